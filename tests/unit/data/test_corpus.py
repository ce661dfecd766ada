"""Reading parallel corpora: plain and gz, mismatched or missing files, bad bytes, empty lines, line ends."""

from __future__ import annotations

import gzip
import logging

import pytest
from text_corpora import corpus, write

from ablate.data.module import read_lines, read_parallel


def test_gz_and_plain_read_alike(tmp_path):
    src, tgt = corpus(20)
    plain = read_parallel(write(tmp_path / "p.en", src), write(tmp_path / "p.de", tgt))[0]
    # gzip is detected by magic bytes, not by suffix
    zipped = read_parallel(write(tmp_path / "z.en.gz", src, gz=True), write(tmp_path / "z_de", tgt, gz=True))[0]
    assert plain == zipped == list(zip(src, tgt))


def test_line_count_mismatch_names_both_files(tmp_path):
    a, b = write(tmp_path / "a.en", ["x", "y", "z"]), write(tmp_path / "b.de", ["x", "y"])
    with pytest.raises(ValueError, match=rf"{a}.* 3 lines.*{b}.* 2 lines"):
        read_parallel(a, b)


def test_missing_file_is_named(tmp_path):
    a = write(tmp_path / "a.en", ["x"])
    with pytest.raises(FileNotFoundError, match="nope.de"):
        read_parallel(a, tmp_path / "nope.de")


def test_invalid_utf8_names_file_and_line(tmp_path):
    a = write(tmp_path / "a.en", ["ok", "ok", "ok"])
    b = tmp_path / "b.de.gz"
    b.write_bytes(gzip.compress(b"gut\ngut\nschlecht \xff\xfe\n"))
    with pytest.raises(ValueError, match=rf"{b}:3: not valid UTF-8"):
        read_parallel(a, b)


def test_empty_lines_dropped_and_counted(tmp_path, caplog):
    a = write(tmp_path / "a.en", ["one", "", "three", "   ", "five"])
    b = write(tmp_path / "b.de", ["eins", "zwei", "", "vier", "fuenf"])
    pairs, stats = read_parallel(a, b)
    assert pairs == [("one", "eins"), ("five", "fuenf")]
    assert (stats.lines, stats.kept, stats.empty) == (5, 2, 3)


def test_control_characters_are_kept_and_reported_with_file_and_line(tmp_path, caplog):
    a = write(tmp_path / "a.en", ["one", "t\x00wo", "three\tfour"])  # a tab is not a control character worth a word
    b = write(tmp_path / "b.de", ["eins", "zwei", "dr\x07ei"])
    with caplog.at_level(logging.WARNING, logger="ablate.data.corpus"):
        pairs, _ = read_parallel(a, b)
    assert pairs[1] == ("t\x00wo", "zwei")
    assert f"{a}:2" in caplog.text and f"{b}:3" in caplog.text and f"{a}:3" not in caplog.text


def test_crlf_and_unicode_line_separators(tmp_path):
    # U+2028 inside a sentence must not split it (str.splitlines would)
    a = write(tmp_path / "a.en", ["one\u2028half", "two"], newline="\r\n")
    b = write(tmp_path / "b.de", ["eins", "zwei"], newline="\r\n")
    assert read_parallel(a, b)[0] == [("one\u2028half", "eins"), ("two", "zwei")]


def test_a_line_over_the_bound_is_read_from_its_first_bytes_with_a_warning_the_rest_never_held(tmp_path, caplog):
    """Issue 38 item 7 (`ablate translate`): one line of 200 MB would be held and tokenized whole."""
    import io
    import logging

    from ablate.data.corpus import _decoded, iter_lines

    text = "ab\n" + "x" * 99 + "\n" + "y" * 100 + "\n" + "é" * 60 + "\n" + "z" * 5000 + "\nlast"
    with caplog.at_level(logging.WARNING):
        lines = list(_decoded(io.BytesIO(text.encode()), "stdin", 100))
    assert lines == ["ab", "x" * 99, "y" * 100, "é" * 50, "z" * 100, "last"]  # é is 2 bytes: 50 of them fit whole
    assert "stdin:4 is over 100 bytes long; read from its first 100 only (21 bytes skipped)" in caplog.text
    assert "stdin:5 is over 100 bytes long; read from its first 100 only (4,901 bytes skipped)" in caplog.text
    (tmp_path / "f.txt").write_bytes(b"a\n" + b"b" * 10 + b"\xff\n")
    assert list(iter_lines(tmp_path / "f.txt", 8)) == ["a", "b" * 8]  # the bad byte is in the part not read
    with pytest.raises(ValueError, match=r"f.txt:2: not valid UTF-8"):
        list(iter_lines(tmp_path / "f.txt", 100))


def test_a_folder_or_a_missing_path_is_named_as_such_not_as_a_corpus_file(tmp_path):
    """`ablate translate CKPT -i FOLDER` said "corpus file not found: FOLDER": it is there, a folder, and a user's
    --input is no corpus file."""
    from ablate.data.corpus import iter_lines

    with pytest.raises(IsADirectoryError, match=f"^{tmp_path} is a folder, not a text file$"):
        read_lines(tmp_path)
    with pytest.raises(IsADirectoryError, match="is a folder, not a text file"):
        next(iter_lines(tmp_path, 100))
    with pytest.raises(FileNotFoundError, match=f"^text file not found: {tmp_path / 'nope.en'}$"):
        read_lines(tmp_path / "nope.en")

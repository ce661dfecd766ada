"""Issue 38 item 7: `ablate translate` streams. Lines are read, translated and written a bounded chunk at a time:
the first translations are written while most of the input is still unread, in input order, and a long line's
warning names its line in the whole input."""

from __future__ import annotations

import io
import json
import logging
import os
import sys
import threading

import pytest
import torch
from checkpoints import tiny_checkpoint

from ablate.cli import main
from ablate.inference import stream
from ablate.inference.stream import chunks, translated_chunks


def test_chunks_are_bounded_by_lines_and_characters_and_keep_every_line_in_order():
    lines = [f"line {i}" + "x" * (i % 7) for i in range(1000)] + ["y" * 500] + ["z"] * 10
    got = list(chunks(lines, max_lines=64, max_chars=300))
    assert [line for chunk in got for line in chunk] == lines and all(got)
    assert all(len(c) <= 64 and (sum(map(len, c)) <= 300 or len(c) == 1) for c in got)
    assert ["y" * 500] in got  # a line longer than the bound goes alone
    assert [len(c) for c in chunks(map(str, range(300)), max_lines=100)] == [32, 64, 100, 100, 4]  # the first lines soon
    assert list(chunks([])) == []


def test_each_chunk_is_told_how_many_lines_came_before_it(monkeypatch):
    monkeypatch.setattr(stream, "CHUNK_LINES", 3)
    seen = []
    out = "".join(translated_chunks(iter("abcdefg"), lambda chunk, first: seen.append(first) or [c.upper() for c in chunk]))
    assert out == "A\nB\nC\nD\nE\nF\nG\n" and seen == [0, 3, 6]


class CountingStdin:
    """Standard input whose lines are counted as they are read."""

    def __init__(self, lines: list[bytes]):
        self.read = 0
        self.buffer = self
        self._lines = lines

    def readline(self, limit: int = -1) -> bytes:
        assert limit == -1 or all(len(line) <= limit for line in self._lines[self.read : self.read + 1])
        if self.read == len(self._lines):
            return b""
        self.read += 1
        return self._lines[self.read - 1]


class RecordingStdout(io.StringIO):
    """Standard output that records how many input lines had been read at each write."""

    def __init__(self, stdin: CountingStdin):
        super().__init__()
        self.stdin, self.read_at_write = stdin, []

    def write(self, text: str) -> int:
        self.read_at_write.append(self.stdin.read)
        return super().write(text)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stream")
    torch.save(tiny_checkpoint(folder, data={"max_len": 16}, positional="learned", max_positions=16), folder / "m.ckpt")
    return folder / "m.ckpt"


def test_translate_writes_each_chunk_before_reading_the_next(checkpoint, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(stream, "CHUNK_LINES", 30)
    words = ["the dog runs", "a cat sleeps", "the big old man eats", ""]  # an empty line is translated too, as before
    lines = [words[i % 4] for i in range(120)]
    lines[100] = " ".join(["the red dog runs"] * 20)  # over the 15 source tokens the model takes
    stdin = CountingStdin([(line + "\n").encode() for line in lines])
    stdout = RecordingStdout(stdin)
    monkeypatch.setattr(sys, "stdin", stdin)
    monkeypatch.setattr(sys, "stdout", stdout)
    with caplog.at_level(logging.WARNING):
        assert main(["translate", str(checkpoint), "--device", "cpu", "--beam", "1"]) == 0
    assert stdout.read_at_write[0] <= 31, stdout.read_at_write[:3]  # the first chunk written after its 30 lines (and one more)
    assert len(stdout.read_at_write) == 4 and stdout.read_at_write == sorted(stdout.read_at_write)
    streamed = stdout.getvalue().splitlines()
    assert len(streamed) == 120 and streamed[0] == streamed[4] == streamed[96]  # the same line, the same translation
    assert "stdin:101 has" in caplog.text  # numbered in the whole input, not the chunk


def test_output_to_a_file_is_written_as_it_is_translated_and_replaced_whole(checkpoint, tmp_path, monkeypatch):
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(stream, "CHUNK_LINES", 2)
    source, out = tmp_path / "in.en", tmp_path / "out.de"
    source.write_bytes(b"the dog runs\na cat sleeps\nthe man\n\xff bad\n")
    out.write_text("kept\n")
    command = ["translate", str(checkpoint), "--device", "cpu", "-i", str(source), "-o", str(out), "--force"]
    assert main(command) == 2  # line 4 is not UTF-8
    assert out.read_text() == "kept\n" and [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []
    source.write_text("the dog runs\na cat sleeps\nthe man\n")
    assert main(command) == 0
    assert len(out.read_text().splitlines()) == 3


@pytest.mark.parametrize("verb", ["translate", "evaluate"])
def test_an_output_that_exists_is_written_over_only_with_force(checkpoint, tmp_path, monkeypatch, capsys, verb):
    """translate -o and evaluate --hyp-out replaced a file already there (an earlier run's translations, or a
    reference a typo named) without asking, as average -o and table --out never did."""
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    source, reference, out = tmp_path / "in.en", tmp_path / "ref.de", tmp_path / "out.de"
    source.write_text("the dog runs\na cat sleeps\n")
    reference.write_text("der Hund rennt\neine Katze schläft\n")
    out.write_text("the user's own file\n")
    flag = "-o" if verb == "translate" else "--hyp-out"
    inputs = ["-i", str(source)] if verb == "translate" else ["--src", str(source), "--ref", str(reference)]
    command = [verb, str(checkpoint), "--device", "cpu", *inputs, flag, str(out)]
    assert main(command) == 2
    err = capsys.readouterr().err
    long_flag = "--output" if verb == "translate" else "--hyp-out"
    assert f"error: {long_flag} {out} already exists; pass --force to write over it, or choose another {long_flag}" in err
    assert out.read_text() == "the user's own file\n"
    assert main([*command, "--force"]) == 0
    assert len(out.read_text().splitlines()) == 2
    assert main([verb, str(checkpoint), "--device", "cpu", *inputs, flag, "/dev/stdout"]) == 0  # a stream is written into


def test_evaluate_hypotheses_to_stdout_keep_the_score_out_of_them(checkpoint, tmp_path, monkeypatch, capfd):
    """`evaluate --hyp-out /dev/stdout > f`: the score JSON was written over the first hypotheses; it goes to stderr."""
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    source, reference = tmp_path / "in.en", tmp_path / "ref.de"
    source.write_text("the dog runs\na cat sleeps\n")
    reference.write_text("der Hund rennt\neine Katze schläft\n")
    command = ["evaluate", str(checkpoint), "--device", "cpu", "--src", str(source), "--ref", str(reference)]
    assert main([*command, "--hyp-out", "/dev/stdout"]) == 0
    out, err = capfd.readouterr()
    assert len(out.splitlines()) == 2 and '"test_set"' not in out and '"test_set"' in err


def test_evaluate_never_writes_its_hypotheses_over_the_splits_own_files(tmp_path, monkeypatch, capsys):
    """`evaluate CKPT --split test --hyp-out DATA/test.de --force` replaced the reference it scored against: only
    --src, --ref and the checkpoint were inputs, not the split's files found through the run's data section."""
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    prefix = tmp_path / "corpus" / "test"  # where tiny_checkpoint writes its corpus
    torch.save(
        tiny_checkpoint(
            tmp_path, data={"dataset": "files", "train_prefix": str(prefix.with_name("train")), "test_prefix": str(prefix), "max_len": 16}
        ),
        tmp_path / "m.ckpt",
    )
    for name in ("test.en", "test.de"):
        before = (tmp_path / "corpus" / name).read_bytes()
        command = ["evaluate", str(tmp_path / "m.ckpt"), "--device", "cpu", "--split", "test", "--hyp-out", str(tmp_path / "corpus" / name)]
        assert main([*command, "--force"]) == 2
        what = "source" if name.endswith(".en") else "reference"
        assert f"is the input --split test's {what} {tmp_path / 'corpus' / name}" in capsys.readouterr().err
        assert (tmp_path / "corpus" / name).read_bytes() == before
    assert main(["evaluate", str(tmp_path / "m.ckpt"), "--device", "cpu", "--split", "test", "--hyp-out", str(tmp_path / "h.de")]) == 0
    assert (tmp_path / "h.de").read_text().count("\n") == 1


def test_translate_of_a_folder_names_it_a_folder(checkpoint, tmp_path, monkeypatch, capsys):
    """`ablate translate CKPT -i FOLDER` said "corpus file not found: FOLDER"."""
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    assert main(["translate", str(checkpoint), "-i", str(tmp_path), "--device", "cpu"]) == 2
    assert capsys.readouterr().err.strip().endswith(f"ablate translate: error: {tmp_path} is a folder, not a text file")


def test_a_chunk_ends_where_the_input_pauses():
    pauses = iter([True, True, False, True, False] + [True] * 10)  # asked only with lines in hand
    assert [len(c) for c in chunks(map(str, range(8)), waiting=lambda: next(pauses))] == [3, 2, 3]


def test_a_line_typed_into_a_pipe_is_translated_before_the_next_comes(checkpoint, tmp_path, monkeypatch):
    """A person typing a sentence, or a slow producer, saw nothing until 32 lines had come or the input ended."""
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    written, seen = threading.Event(), []
    r, w = os.pipe()

    class Stdout(io.StringIO):
        def write(self, text: str) -> int:
            written.set()
            return super().write(text)

    def type_then_close():
        os.write(w, b"the dog runs\n")
        seen.append(written.wait(timeout=60))  # its translation, while the input is still open
        os.write(w, b"a cat sleeps\n")
        os.close(w)

    stdout = Stdout()
    with os.fdopen(r, "rb", buffering=0) as raw, io.TextIOWrapper(io.BufferedReader(raw)) as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        monkeypatch.setattr(sys, "stdout", stdout)
        typist = threading.Thread(target=type_then_close)
        typist.start()
        assert main(["translate", str(checkpoint), "--device", "cpu", "--beam", "1"]) == 0
        typist.join()
    assert seen == [True] and len(stdout.getvalue().splitlines()) == 2


def test_evaluate_says_how_it_decoded_so_a_score_is_traced_back_to_its_settings(checkpoint, tmp_path, monkeypatch, capsys):
    """The result named the beam but not `--alpha` or the length limit, so two scores made with other settings looked
    alike."""
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    source, reference = tmp_path / "in.en", tmp_path / "ref.de"
    source.write_text("the dog runs\n")
    reference.write_text("der Hund rennt\n")
    command = ["evaluate", str(checkpoint), "--device", "cpu", "--src", str(source), "--ref", str(reference)]
    assert main([*command, "--alpha", "1.5", "--beam", "2"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert {k: result[k] for k in ("beam", "length_penalty", "max_len_a", "max_len_b")} == {
        "beam": 2, "length_penalty": 1.5, "max_len_a": 1.0, "max_len_b": 50}  # fmt: skip
    assert main(command) == 0
    assert json.loads(capsys.readouterr().out)["length_penalty"] == 0.6  # the run's own


def test_evaluate_scores_a_chinese_target_with_the_chinese_tokenizer(tmp_path, monkeypatch, capsys):
    """`evaluate` of a model whose data.tgt_lang is zh scored its BLEU with 13a, under a 13a signature."""
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    torch.save(tiny_checkpoint(tmp_path, data={"max_len": 16, "tgt_lang": "zh"}), tmp_path / "zh.ckpt")
    source, reference = tmp_path / "in.en", tmp_path / "ref.zh"
    source.write_text("the dog runs\n")
    reference.write_text("狗在跑\n")
    assert main(["evaluate", str(tmp_path / "zh.ckpt"), "--device", "cpu", "--src", str(source), "--ref", str(reference)]) == 0
    assert "|tok:zh|" in json.loads(capsys.readouterr().out)["bleu_signature"]


def test_evaluate_of_a_split_says_how_many_pairs_with_an_empty_side_it_left_out(tmp_path, monkeypatch, capsys):
    """Decoding review: `--split test` dropped a pair with an empty reference in silence, so its BLEU was not
    sacreBLEU's on the same files, and the docs said every test pair was kept."""
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    prefix = tmp_path / "corpus" / "test"
    data = {"dataset": "files", "train_prefix": str(prefix.with_name("train")), "test_prefix": str(prefix), "max_len": 16}
    torch.save(tiny_checkpoint(tmp_path, data=data), tmp_path / "m.ckpt")
    source = (tmp_path / "corpus" / "test.en").read_text()
    (tmp_path / "corpus" / "test.en").write_text(source + source)
    (tmp_path / "corpus" / "test.de").write_text((tmp_path / "corpus" / "test.de").read_text() + "\n")  # its reference empty
    assert main(["evaluate", str(tmp_path / "m.ckpt"), "--device", "cpu", "--split", "test"]) == 0
    out, err = capsys.readouterr()
    assert "ablate evaluate: note: files:test: 1 of 2 pairs have an empty side, left out as the run's validation leaves them" in err
    assert json.loads(out)["sentences"] == 1


@pytest.mark.parametrize("flags", [["--beam", "1"], ["--alpha", "3"]])
def test_save_eval_decoded_otherwise_than_the_runs_config_is_refused(tmp_path, monkeypatch, capsys, flags):
    """Decoding review: the record keeps no decoding settings, and `ablate table --split test` compared a row's
    beam-1 record with the others' beam-4 ones, saying nothing (493 of 1000 hypotheses differed)."""
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    prefix = tmp_path / "corpus" / "test"
    data = {"dataset": "files", "train_prefix": str(prefix.with_name("train")), "test_prefix": str(prefix), "max_len": 16}
    (tmp_path / "run" / "checkpoints").mkdir(parents=True)
    torch.save(tiny_checkpoint(tmp_path, data=data), tmp_path / "run" / "checkpoints" / "last.ckpt")
    command = ["evaluate", str(tmp_path / "run" / "checkpoints" / "last.ckpt"), "--device", "cpu", "--split", "test", "--save-eval"]
    assert main([*command, *flags]) == 2
    assert "--save-eval writes the run's record, decoded as its config says (beam" in capsys.readouterr().err
    assert not (tmp_path / "run" / "eval").exists()
    assert main(command) == 0 and (tmp_path / "run" / "eval" / "test.json").is_file()

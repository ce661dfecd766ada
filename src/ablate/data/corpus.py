"""Parallel text files, one sentence per line, plain or gzip, strict UTF-8 (the sentence pairs of Sec. 5.1).

The same reader serves the training splits and `ablate evaluate --src FILE --ref FILE`.
"""

from __future__ import annotations

import gzip
import logging
import re
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Optional

log = logging.getLogger(__name__)

GZIP_MAGIC = b"\x1f\x8b"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # C0 controls and DEL, but not tab (\t) or line ends


@dataclass
class CorpusStats:
    lines: int  # lines per side in the files
    kept: int
    empty: int  # pairs dropped because one side was empty (after stripping whitespace)
    too_long: int  # pairs dropped because one side had more than max_len_chars characters


def _open(path: Path) -> BinaryIO:
    # Sniff the magic bytes: a gzipped file without .gz (or a .gz that was decompressed in place) still reads.
    with open(path, "rb") as f:
        magic = f.read(2)
    return gzip.open(path, "rb") if magic == GZIP_MAGIC else open(path, "rb")


def read_lines(path: str | Path) -> list[str]:
    """Stripped lines of a text file; invalid UTF-8 raises a ValueError naming the file and 1-based line."""
    return list(iter_lines(path))


def iter_lines(path: str | Path, max_line_bytes: int | None = None) -> Iterator[str]:
    """read_lines one line at a time, for input of any size (`ablate translate`); with `max_line_bytes`, a longer
    line is read from its first that many bytes only, with a warning naming it (see _raw_lines)."""
    path = Path(path)
    if path.is_dir():  # a corpus side, or a user's --input or --src: "text file" fits each
        raise IsADirectoryError(f"{path} is a folder, not a text file")
    if not path.is_file():
        raise FileNotFoundError(f"text file not found: {path}")
    try:
        with _open(path) as f:
            yield from _decoded(f, str(path), max_line_bytes)
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise ValueError(f"{path}: corrupt gzip data ({e})") from None


def iter_stdin(max_line_bytes: int | None = None, f: BinaryIO | None = None) -> Iterator[str]:
    """Stripped lines of standard input (or `f`, a reader of it), as iter_lines reads a file (errors say
    "stdin:LINE"; `max_line_bytes` as there). Read as bytes: the text stream decodes by the locale, and under C turns
    invalid UTF-8 into surrogates the tokenizer then rejects."""
    return _decoded(f or sys.stdin.buffer, "stdin", max_line_bytes)


def _raw_lines(f: BinaryIO, name: str, max_bytes: int | None) -> Iterator[bytes]:
    """The lines of `f` as bytes; with `max_bytes`, a longer line as its first `max_bytes` (less a character cut in
    two), the rest skipped unread into memory and the line named in a warning: one line of 200 MB would otherwise be
    held whole, and tokenized whole."""
    if max_bytes is None:
        yield from f  # splits on b"\n" only
        return
    for number, raw in enumerate(iter(lambda: f.readline(max_bytes + 1), b""), 1):
        if len(raw) <= max_bytes or raw.endswith(b"\n"):
            yield raw
            continue
        skipped = len(raw) - max_bytes
        while (more := f.readline(1 << 20)) and not more.endswith(b"\n"):
            skipped += len(more)
        skipped += len(more)
        log.warning(
            "warning: %s:%d is over %s bytes long; read from its first %s only (%s bytes skipped)",
            name,
            number,
            f"{max_bytes:,}",
            f"{max_bytes:,}",
            f"{skipped:,}",
        )
        cut = raw[:max_bytes]
        try:
            cut.decode("utf-8")
        except UnicodeDecodeError as e:
            if e.reason == "unexpected end of data":  # a character cut in two at the bound, not a bad byte
                cut = cut[: e.start]
        yield cut


def _decoded(f: BinaryIO, name: str, max_line_bytes: int | None = None) -> Iterator[str]:
    odd = []
    # Iterating bytes splits on b"\n" only; str.splitlines() would also split on U+2028, U+0085 and
    # friends, which occur inside real sentences and would break the line alignment of the two sides.
    for number, raw in enumerate(_raw_lines(f, name, max_line_bytes), 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            bad = raw[e.start : e.start + 4]
            where = f"bytes {bad!r} at column {e.start + 1}"
            raise ValueError(f"{name}:{number}: not valid UTF-8 ({where})") from None
        line = line.strip()  # also drops the \r of CRLF files
        if _CONTROL.search(line):
            odd.append(number)
        if number == 1 and line.startswith("\ufeff"):  # a UTF-8 byte order mark is not part of the first sentence
            line = line[1:].strip()
        yield line
    if odd:  # a NUL or bell in a sentence would train silently as <unk>
        shown = ", ".join(f"{name}:{n}" for n in odd[:5]) + (f" and {len(odd) - 5} more" if len(odd) > 5 else "")
        log.warning("control characters in %d line(s) of %s (kept; the tokenizer reads them as <unk>): %s", len(odd), name, shown)


def read_parallel(
    src_path: str | Path, tgt_path: str | Path, max_len_chars: Optional[int] = None
) -> tuple[list[tuple[str, str]], CorpusStats]:
    """Aligned (source, target) pairs; pairs with an empty side (or a side over max_len_chars) are dropped."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise ValueError(f"parallel files differ in length: {src_path} has {len(src)} lines, {tgt_path} has {len(tgt)} lines")
    pairs, empty, too_long = [], 0, 0
    for s, t in zip(src, tgt):
        if not s or not t:
            empty += 1
        elif max_len_chars is not None and max(len(s), len(t)) > max_len_chars:
            too_long += 1
        else:
            pairs.append((s, t))
    return pairs, CorpusStats(lines=len(src), kept=len(pairs), empty=empty, too_long=too_long)

"""`ablate translate` over input of any size: lines are read, translated and written a chunk at a time, so the
first translations appear while the rest is still being read and memory stays bounded by a chunk, not the input
(216 MB on stdin once took 3.5 GB and printed nothing for minutes). Within a chunk, translate() still sorts by
length into token-bounded batches; chunks keep the input's order."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator

CHUNK_LINES = 1000  # sentences translated together: enough to fill several length-sorted batches
FIRST_CHUNK = 32  # lines of the first chunk, each next one twice as many up to CHUNK_LINES: the first lines come soon
CHUNK_CHARS = 1 << 20  # and at most this much text (a chunk of long lines is cut sooner)
MAX_LINE_BYTES = 1 << 20  # a sentence is far shorter; a longer line is read from its first MiB (ablate.data.corpus)


def chunks(
    lines: Iterable[str], max_lines: int | None = None, max_chars: int | None = None, waiting: Callable[[], bool] | None = None
) -> Iterator[list[str]]:
    """`lines` in consecutive lists of at most `max_lines` lines (default CHUNK_LINES; the first FIRST_CHUNK, each
    next one twice as many) and `max_chars` characters (CHUNK_CHARS; a longer line alone), none empty. With
    `waiting` (ablate.inference.pipe_input), a chunk also ends where the next line is not there yet."""
    max_lines, max_chars = max_lines or CHUNK_LINES, max_chars or CHUNK_CHARS
    chunk, size, limit = [], 0, min(FIRST_CHUNK, max_lines)
    lines = iter(lines)
    while True:
        if chunk and waiting is not None and not waiting():  # asked before the next line is read, which would block
            yield chunk
            chunk, size = [], 0
        if (line := next(lines, None)) is None:
            break
        if chunk and (len(chunk) >= limit or size + len(line) > max_chars):
            yield chunk
            chunk, size, limit = [], 0, min(2 * limit, max_lines)
        chunk.append(line)
        size += len(line)
    if chunk:
        yield chunk


def translated_chunks(
    lines: Iterable[str], translate: Callable[[list[str], int], list[str]], waiting: Callable[[], bool] | None = None
) -> Iterator[str]:
    """Each chunk of `lines` translated by `translate(chunk, lines before it)`, as one text of a line per sentence,
    in input order; a chunk ends early where the input pauses, with `waiting` (see chunks)."""
    first = 0
    for chunk in chunks(lines, waiting=waiting):
        yield "".join(h + "\n" for h in translate(chunk, first))
        first += len(chunk)


def to_stdout(texts: Iterable[str]) -> int:
    """Each text written to stdout and flushed as it comes; the exit code. A reader that stops early (`| head`) ends
    the command quietly with 141, as it ends every command (ablate.cli.main)."""
    for text in texts:
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0

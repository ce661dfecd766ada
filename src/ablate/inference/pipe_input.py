"""Standard input read as it comes, for `ablate translate` fed by a person typing or a slow producer (`tail -f`,
another program's pipe): a chunk is translated once the input pauses, not only when it holds its lines or ends (a
person typing a sentence saw nothing until the 32nd).

Python's buffered stdin hides the bytes it has read ahead from `select`, so whether the next line would block cannot
be asked of it; this reader keeps its own buffer over the descriptor and can say. A file given as stdin
(`< mine.en`) never pauses and is read as before."""

from __future__ import annotations

import os
import select
import stat
import sys
import time

IDLE_S = 0.2  # the input quiet this long: the lines read so far are translated
READ_BYTES = 1 << 16


class PipeInput:
    """The lines of a pipe's or terminal's file descriptor, with `waiting()`: whether the next line is there."""

    def __init__(self, fd: int):
        self.fd, self.buf, self.pos, self.eof = fd, bytearray(), 0, False

    def waiting(self, timeout: float = IDLE_S) -> bool:
        """Whether a whole next line (or the input's end) can be read now, waiting at most `timeout` for it."""
        deadline = time.monotonic() + timeout
        while not self.eof and self.buf.find(b"\n", self.pos) < 0:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                return False
            self._fill()
        return True

    def readline(self, limit: int = -1) -> bytes:
        """The next line with its b"\\n" (b"" at the end), or its first `limit` bytes, as BinaryIO.readline."""
        while True:
            end = self.buf.find(b"\n", self.pos)
            have = (end + 1 if end >= 0 else len(self.buf)) - self.pos
            if end >= 0 or self.eof or 0 <= limit <= have:
                n = have if limit < 0 else min(have, limit)
                line = bytes(self.buf[self.pos : self.pos + n])
                self.pos += n
                if self.pos > READ_BYTES and 2 * self.pos > len(self.buf):  # what was read is let go
                    del self.buf[: self.pos]
                    self.pos = 0
                return line
            self._fill()

    def __iter__(self):
        return iter(self.readline, b"")

    def _fill(self) -> None:
        data = os.read(self.fd, READ_BYTES)
        self.eof = not data
        self.buf += data


def stdin_pipe() -> PipeInput | None:
    """A PipeInput over standard input where it is a pipe, terminal or socket; None where it is a file, which never
    pauses, or no descriptor at all (a test's stand-in), or on Windows, whose select takes sockets only."""
    try:
        fd = sys.stdin.fileno()
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except (AttributeError, OSError, ValueError):
        return None
    return None if regular or os.name == "nt" else PipeInput(fd)

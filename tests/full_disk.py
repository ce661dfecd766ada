"""A disk that fills up, for tests: files written under one folder take a few more bytes, then every write raises
OSError(ENOSPC), as a real full disk does (a write may land partly). It catches open() (pathlib, csv, json.dump,
torch.save, fsspec's local files all go through it) and os.write on a descriptor of a file in the folder."""

from __future__ import annotations

import builtins
import errno
import io
import os
from pathlib import Path


class FullDisk:
    """`room` bytes more fit under `folder`; a write that would go past them writes what fits, then ENOSPC."""

    def __init__(self, folder: Path, room: int = 0):
        self.folder, self.room = Path(folder).resolve(), room

    def take(self, n: int) -> int:
        """How many of `n` bytes fit; raises ENOSPC when none do."""
        if n and self.room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        fits = min(n, self.room)
        self.room -= fits
        return fits

    def under(self, path) -> bool:
        try:
            return Path(os.fspath(path)).resolve().is_relative_to(self.folder)
        except TypeError:  # an int descriptor, or a path-like of another kind
            return False

    def install(self, monkeypatch) -> FullDisk:
        disk, real_open, real_write = self, builtins.open, os.write

        class Filling(io.FileIO):
            def write(self, b):
                return super().write(memoryview(b).cast("B")[: disk.take(len(memoryview(b).cast("B")))])

        def fake_open(file, mode="r", buffering=-1, encoding=None, errors=None, newline=None, closefd=True, opener=None):
            if not any(c in mode for c in "wax+") or not disk.under(file):
                return real_open(file, mode, buffering, encoding, errors, newline, closefd, opener)
            raw = Filling(file, mode.replace("b", "").replace("t", ""), closefd=closefd, opener=opener)
            buffered = io.BufferedWriter(raw)
            return buffered if "b" in mode else io.TextIOWrapper(buffered, encoding=encoding or "utf-8", errors=errors, newline=newline)

        def fake_write(fd, data):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                target = None
            if target is None or not disk.under(target):
                return real_write(fd, data)
            return real_write(fd, memoryview(data).cast("B")[: disk.take(len(data))]) if data else 0

        monkeypatch.setattr(builtins, "open", fake_open)
        monkeypatch.setattr(io, "open", fake_open)
        monkeypatch.setattr(os, "write", fake_write)
        return self


def leftovers(folder: Path, *expected: str) -> list[str]:
    """The names in `folder` other than `expected`: a temporary a failed write left behind."""
    return sorted(p.name for p in Path(folder).iterdir() if p.name not in expected)

"""Standard input read as it comes (ablate.inference.pipe_input): whether the next line is there is known without
blocking, and lines read back exactly as a buffered reader gives them."""

from __future__ import annotations

import contextlib
import os
import sys

import pytest

from ablate.inference.pipe_input import PipeInput, stdin_pipe


@pytest.fixture
def pipe():
    r, w = os.pipe()
    yield PipeInput(r), w
    os.close(r)
    with contextlib.suppress(OSError):  # closed by the test
        os.close(w)


def test_a_line_is_waiting_only_once_it_is_whole(pipe):
    reader, w = pipe
    assert not reader.waiting(0.01)  # nothing written yet: told at once, not blocked
    os.write(w, b"ab\ncd")
    assert reader.waiting(0.01) and reader.readline() == b"ab\n"
    assert not reader.waiting(0.01)  # "cd" is half a line
    os.write(w, b"e\n")
    assert reader.waiting(0.01) and reader.readline(2) == b"cd" and reader.readline() == b"e\n"
    os.write(w, b"tail")
    os.close(w)
    assert reader.waiting(0.01) and reader.readline() == b"tail" and reader.readline() == b""  # the end is waiting too
    assert reader.waiting(0.01)


def test_lines_read_back_as_a_buffered_reader_reads_them(pipe):
    reader, w = pipe
    data = b"".join(b"x" * (i * 37 % 5000) + b"\n" for i in range(300)) + b"last"
    lines = []
    for start in range(0, len(data), 4096):  # written in pieces, each read before the next is written
        os.write(w, data[start : start + 4096])
        while reader.waiting(0.001):
            lines.append(reader.readline(3000))
    os.close(w)
    lines += list(reader)
    assert b"".join(lines) == data and all(len(line) <= 3000 for line in lines[:-1])
    assert len(reader.buf) < 2 * len(data) / 3  # what was read is let go


def test_only_a_pipe_or_terminal_is_read_this_way(tmp_path, monkeypatch):
    path = tmp_path / "in.en"
    path.write_text("a\n")
    with open(path) as f:
        monkeypatch.setattr(sys, "stdin", f)
        assert stdin_pipe() is None  # a file never pauses
    monkeypatch.setattr(sys, "stdin", object())  # a stand-in with no descriptor
    assert stdin_pipe() is None
    r, w = os.pipe()
    with os.fdopen(r) as f, os.fdopen(w, "w"):
        monkeypatch.setattr(sys, "stdin", f)
        assert isinstance(stdin_pipe(), PipeInput)

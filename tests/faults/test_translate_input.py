"""Issue 32 item 9: `ablate translate` input. Invalid UTF-8 on stdin is an error naming stdin and the line (as it is
from a file), never a traceback; a line longer than the model takes is translated from its first tokens with a
warning naming the line and both lengths, never cut without a word."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from checkpoints import tiny_checkpoint

from ablate.cli import main

LONG = ("the dog runs " * 7700).strip()  # 100,099 characters


@pytest.fixture(scope="module")
def bounded(tmp_path_factory):
    """A checkpoint of a model with learned positions: 64 at most, so a source keeps 63 tokens and EOS."""
    folder = tmp_path_factory.mktemp("bounded")
    path = folder / "m.ckpt"
    torch.save(tiny_checkpoint(folder, data={"max_len": 64}, positional="learned", max_positions=64), path)
    return path


def translate(ckpt, stdin: bytes, **env) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "ablate.cli", "translate", str(ckpt), "--device", "cpu"]
    return subprocess.run(cmd, input=stdin, capture_output=True, timeout=300, env={**os.environ, **env})


@pytest.mark.parametrize(
    "env",
    [{}, {"LC_ALL": "C"}, {"PYTHONIOENCODING": "utf-8"}],
    ids=["default", "C-locale", "strict-utf8"],
)
@pytest.mark.slow  # subprocesses importing torch: seconds each; the default set stays under a minute
def test_invalid_utf8_on_stdin_names_stdin_and_the_line(tmp_path, bounded, env):
    proc = translate(bounded, b"the dog runs\nthe cat \xff\xfe sleeps\n", ABLATE_CACHE=str(tmp_path / "cache"), **env)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "Traceback" not in err, err[-2000:]
    assert err.startswith("ablate translate: error: stdin:2: not valid UTF-8 (bytes b'\\xff\\xfe s' at column 9)"), err
    assert proc.stdout == b""  # nothing translated from input that cannot be read


def test_a_line_longer_than_the_model_takes_is_translated_with_a_warning_naming_it(tmp_path, monkeypatch, capfd, bounded):
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "in.txt"
    source.write_text(f"the dog runs\n{LONG}\nthe cat sleeps\n")
    rc = main(["translate", str(bounded), "--input", str(source), "--device", "cpu"])
    out, err = capfd.readouterr()
    assert rc == 0 and len(out.splitlines()) == 3  # every line translated, in order
    warning = [line for line in err.splitlines() if "warning" in line]
    assert len(warning) == 1, err
    assert f"{source}:2 has 69,300 subword tokens; translated from its first 63 only" in warning[0], warning
    assert "model.max_positions=64" in warning[0]


@pytest.mark.slow  # a subprocess importing torch: seconds; the default set stays under a minute
def test_a_long_line_on_stdin_is_named_as_stdins(tmp_path, bounded):
    proc = translate(bounded, f"{LONG}\n".encode(), ABLATE_CACHE=str(tmp_path / "cache"))
    err = proc.stderr.decode()
    assert proc.returncode == 0 and "stdin:1 has 69,300 subword tokens; translated from its first 63 only" in err, err[-2000:]
    assert len(proc.stdout.decode().splitlines()) == 1


STREAM_BYTES = 200_000_000
FIRST_LINE_S = 30  # the harness's limits (tests/faults/test_bad_inputs.py)
ADDRESS_SPACE = 2 * 1024**3


@pytest.mark.slow
def test_translate_streams_200_mb_of_stdin_first_line_soon_memory_bounded(tmp_path, bounded):
    """Issue 38 item 7: with 200 MB on stdin the first translation comes within 30 s, long before the input is read,
    under a 2 GiB address-space limit; it goes on translating under it; a reader that stops early ends it quietly."""
    import resource
    import threading
    import time

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))

    cmd = [sys.executable, "-m", "ablate.cli", "translate", str(bounded), "--device", "cpu"]
    env = {**os.environ, "ABLATE_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, preexec_fn=limit)
    fed = [0]

    def feed():
        block = b"the dog runs after a big red cat\nthe old woman sleeps\n" * 1000
        try:
            while fed[0] < STREAM_BYTES:
                proc.stdin.write(block)
                fed[0] += len(block)
            proc.stdin.close()
        except (BrokenPipeError, ValueError):  # it stopped reading: the test closed its output
            pass

    threading.Thread(target=feed, daemon=True).start()
    started = time.monotonic()
    timer = threading.Timer(FIRST_LINE_S, proc.kill)  # a readline that would wait for all 200 MB fails the test instead
    timer.start()
    first = proc.stdout.readline()
    waited = time.monotonic() - started
    timer.cancel()
    assert first and waited < FIRST_LINE_S, f"no line within {FIRST_LINE_S} s: {proc.stderr.read()[-2000:]!r}"
    assert fed[0] < STREAM_BYTES / 10  # written while most of the input was still to come
    for _ in range(3000):  # more chunks translated, and memory still bounded by one
        assert proc.stdout.readline(), proc.stderr.read()[-2000:]
    status = Path(f"/proc/{proc.pid}/status").read_text().splitlines()
    vm = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
    assert vm * 1024 < ADDRESS_SPACE
    proc.stdout.close()  # `| head`: the reader goes away
    assert proc.wait(timeout=120) == 141
    err = proc.stderr.read().decode()
    assert "Traceback" not in err and "Error" not in err, err[-2000:]


@pytest.mark.slow
def test_a_line_of_32_mb_on_stdin_is_read_from_its_first_mib_under_the_harness_memory_limit(tmp_path, bounded):
    """A 20 MB line once aborted in SentencePiece (std::bad_alloc) under 2 GiB: now it is read from its first MiB,
    the rest skipped unread, with a warning naming it, and translated (from its first 63 tokens, this model's)."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))

    cmd = [sys.executable, "-m", "ablate.cli", "translate", str(bounded), "--device", "cpu"]
    env = {**os.environ, "ABLATE_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    stdin = b"the dog runs after the cat " * 1_200_000 + b"\nthe cat sleeps\n"
    proc = subprocess.run(cmd, input=stdin, capture_output=True, timeout=120, env=env, preexec_fn=limit)
    err = proc.stderr.decode()
    assert proc.returncode == 0 and "Traceback" not in err, err[-2000:]
    assert "stdin:1 is over 1,048,576 bytes long; read from its first 1,048,576 only (31,351,425 bytes skipped)" in err, err[-2000:]
    assert len(proc.stdout.decode().splitlines()) == 2


@pytest.mark.slow  # a subprocess importing torch: seconds; the default set stays under a minute
def test_translations_piped_from_a_terminal_are_one_line_a_source_line(tmp_path):
    """`ablate translate CKPT -i FILE > out` typed at a terminal: the progress bar (on, as stderr is a terminal) wrote a
    blank line into stdout, so out.txt began with one and each translation sat a line below its source."""
    import pty

    (tmp_path / "in.txt").write_text("the dog runs\na cat sleeps\nthe man\n")
    torch.save(tiny_checkpoint(tmp_path), tmp_path / "m.ckpt")  # untrained, it translates each line to a few tokens
    primary, terminal = pty.openpty()
    try:
        with open(tmp_path / "out.txt", "wb") as out:
            cmd = [
                sys.executable,
                "-m",
                "ablate.cli",
                "translate",
                str(tmp_path / "m.ckpt"),
                "-i",
                str(tmp_path / "in.txt"),
                "--device",
                "cpu",
            ]
            env = {**os.environ, "ABLATE_CACHE": str(tmp_path / "cache")}
            rc = subprocess.run(cmd, stdout=out, stderr=terminal, timeout=300, env=env).returncode
    finally:
        os.close(primary)
        os.close(terminal)
    lines = (tmp_path / "out.txt").read_text().split("\n")
    assert rc == 0 and len(lines) == 4 and lines[-1] == "" and lines[0], lines  # 3 translations (an empty one may be one)

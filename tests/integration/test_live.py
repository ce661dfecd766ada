"""What a user sees while a real sweep runs: the live view in a terminal (a pseudo-terminal here), plain lines in a
log, `ablate status` of the finished study; and that a healthy training run prints nothing alarming."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from helpers import sweep_writer, tiny_experiment

from ablate.config import to_yaml

pytestmark = pytest.mark.slow  # real sweeps: a minute or two each on 2 CPU cores

ROWS = ("base", "A-h1", "E-learned")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


@pytest.fixture
def sweep_file(tmp_path, monkeypatch):
    """Three tiny rows, 150 steps each with a validation every 30, so a trial trains for some seconds after its
    first validation and the view catches it mid-run."""
    monkeypatch.setenv("ABLATE_SWEEP_HEARTBEAT", "1")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    write = sweep_writer(tmp_path, {"max_steps": 150, "val_every_steps": 30, "num_threads": 1, "val_max_sentences": 10})
    return write(name="live", variants={"base": {}, "A-h1": {"model.heads": 1}, "E-learned": {"model.positional": "learned"}})


def in_terminal(cmd: list[str], timeout: float = 600, cols: int = 160) -> tuple[int, str]:
    """Run `cmd` with a pseudo-terminal as its stdin/stdout/stderr; returns its exit code and everything it wrote."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, cols, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM", "COLUMNS", "LINES")}
    proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, env={**env, "TERM": "xterm-256color"}, close_fds=True)
    os.close(slave)
    chunks, deadline = [], time.time() + timeout
    try:
        while time.time() < deadline:
            ready, _, _ = select.select([master], [], [], 1)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the terminal's other side closed
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
    finally:
        os.close(master)
    if proc.poll() is None:
        proc.kill()
    return proc.wait(), b"".join(chunks).decode(errors="replace")


def screen_text(raw: str) -> str:
    """What a terminal's output says, escape codes out, one display line per line."""
    return re.sub(r"[ \t]*\r?\n|\r", "\n", ANSI.sub("", raw))


def test_live_view_in_a_terminal_shows_each_running_trial_the_counts_and_the_best_row(sweep_file):
    rc, raw = in_terminal([sys.executable, "-m", "ablate.cli", "sweep", str(sweep_file), "--workers", "2"])
    text = screen_text(raw)
    assert rc == 0, text[-3000:]
    assert "\x1b[" in raw  # a terminal: the display redraws itself
    assert re.search(r"#\s+row\s+state\s+step\s+epochs\s+tok/s\s+ETA\s+val/loss\s+val/bleu", text), text[-3000:]
    # A running trial after its first validation: row, state, step/total, epochs done, tokens/s, ETA, val loss and BLEU.
    mid_run = re.compile(r"\d+\s+(base|A-h1|E-learned)\s+training\s+\d+/150\s+\d+\.\d\d\s+[\d,]+\s+(\d+m)?\d+s\s+\d+\.\d{3}\s+\d+\.\d{2}")
    assert mid_run.search(text), text[-5000:]
    assert all(re.search(rf"\d+\s+{row}\s+training\s+\d+/150", text) for row in ROWS), text[-5000:]
    assert re.search(r"^running 2, finished 0, pruned 0, failed 0, waiting 1$", text, re.M)
    # Once a trial finished, how long the rest takes (the running trial at its ETA, the waiting ones at the finished ones' mean).
    assert re.search(r"^running 1, finished 2, pruned 0, failed 0; about (\d+h\d\dm|\d+m\d\ds|\d+s) left at 1 at a time$", text, re.M)
    assert re.search(r"^running 0, finished 3, pruned 0, failed 0\nbest: (base|A-h1|E-learned) \(trial \d\) objective [\d.]+", text, re.M)
    assert "[worker 0] trial" in text and "[worker 1] trial" in text  # the workers' messages, shown above the view
    for warning in ("Warning", "deprecated", "Tip:"):
        assert warning not in text, text


def test_plain_output_when_not_a_terminal_then_status_of_the_finished_study(sweep_file, tmp_path):
    env = {**os.environ, "ABLATE_PROGRESS_EVERY": "2"}
    proc = subprocess.run(
        [sys.executable, "-m", "ablate.cli", "sweep", str(sweep_file), "--workers", "2"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "\x1b" not in out + proc.stderr  # no escape code in a log, ever
    progress = re.compile(
        r"^\[\d\d:\d\d:\d\d\] trial \d+ (base|A-h1|E-learned): training, step \d+/150, epochs \d+\.\d\d, [\d,]+ tok/s, "
        r"ETA (\d+m)?\d+s, val/loss \d+\.\d{3}, val/bleu \d+\.\d{2}$",
        re.M,
    )
    assert progress.search(out), out[-3000:]
    ended = re.findall(r"^\[\d\d:\d\d:\d\d\] trial \d+ (base|A-h1|E-learned): finished, step 150/150, .*objective", out, re.M)
    assert sorted(ended) == sorted(ROWS), out[-3000:]
    assert re.search(r"^\[\d\d:\d\d:\d\d\] live: running 2, finished 0, pruned 0, failed 0, waiting 1; best: none finished yet$", out, re.M)
    assert re.search(
        r"^\[\d\d:\d\d:\d\d\] live: running 0, finished 3, pruned 0, failed 0; best: (base|A-h1|E-learned) \(trial \d\) "
        r"objective [\d.]+",
        out,
        re.M,
    )

    status = subprocess.run(
        [sys.executable, "-m", "ablate.cli", "status", str(tmp_path / "sweep")], capture_output=True, text=True, timeout=120, env=env
    )
    assert status.returncode == 0, status.stderr
    assert "\x1b" not in status.stdout
    for row in ROWS:
        assert re.search(
            rf"^trial \d+ {row}: finished, step 150/150, epochs \d+\.\d\d, [\d,]+ tok/s, ETA -, val/loss \d+\.\d{{3}}, "
            rf"val/bleu \d+\.\d{{2}}, objective [\d.]+$",
            status.stdout,
            re.M,
        ), status.stdout
    assert re.search(r"^live: running 0, finished 3, pruned 0, failed 0; best: ", status.stdout, re.M)
    rc, shown = in_terminal([sys.executable, "-m", "ablate.cli", "status", str(sweep_file)])
    assert rc == 0 and "\x1b[" in shown  # the rich picture on a terminal
    assert all(re.search(rf"\d+\s+{row}\s+finished\s+150/150", screen_text(shown)) for row in ROWS), shown


def test_a_healthy_run_and_its_resume_print_nothing_alarming(tmp_path):
    cfg = tiny_experiment(
        tmp_path,
        train={"max_steps": 20, "val_every_steps": 10, "num_threads": 1},
        logging={"wandb": True, "mode": "offline", "progress": True},
    )
    config = tmp_path / "run.yaml"
    config.write_text(to_yaml(cfg))
    env = {**os.environ, "WANDB_MODE": "offline"}
    cmd = [sys.executable, "-m", "ablate.cli", "train", str(config)]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    # 25: off the validation grid, so the end validates the final weights and saves them as last.ckpt too
    again = subprocess.run([*cmd, "train.max_steps=25", "--resume", "--force"], capture_output=True, text=True, timeout=300, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming" in again.stderr  # ablate's own messages still show
    for proc in (first, again):
        text = proc.stdout + proc.stderr
        for alarming in (
            "will be deleted",
            "exists and is not empty",
            "litlogger",
            "anonymous setting",
            "LeafSpec",
            "not resumable",
            "weights_only",
            "Warning",
            "warning",
        ):
            assert alarming not in text, text
    assert (Path(cfg.out_dir) / "metrics.csv").exists() and (Path(cfg.out_dir) / "resume-1" / "metrics.csv").exists()
    assert (Path(cfg.out_dir) / "progress.json").exists()

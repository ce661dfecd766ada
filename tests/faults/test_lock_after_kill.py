"""After `kill -9` of `ablate train` with DataLoader workers (data.num_workers > 0), its run lock held on in the
orphaned workers, which share the lock's open file description, until they noticed the parent gone (about 5 s): an
immediate `--resume`, or a sweep continuing the trial, was refused, naming the dead pid. Now a forked worker closes
the lock's descriptor as it starts (ablate.files.held_locks), so the lock ends with the process that took it."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from helpers import ablate, lock_free, write_experiment

pytestmark = [
    pytest.mark.slow,  # a training run with two worker processes
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds the workers through /proc"),
]


def children(pid: int) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError, IndexError, ValueError):
            if proc.name.isdigit() and int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(proc.name))
    return found


def test_the_run_lock_is_free_as_soon_as_a_killed_run_with_workers_is_reaped(tmp_path):
    path = write_experiment(tmp_path, max_steps=100_000, val_every_steps=100_000, data={"num_workers": 2})
    run = tmp_path / "run"
    proc = ablate("train", str(path), popen=True)
    workers = []
    try:
        deadline = time.time() + 240
        while proc.poll() is None and time.time() < deadline and not (len(workers) >= 2 and (run / "metrics.csv").exists()):
            time.sleep(0.1)
            workers = children(proc.pid)
        assert proc.poll() is None and len(workers) >= 2, (
            f"no training with workers: {proc.stderr.read()[-3000:] if proc.poll() is not None else workers}"
        )
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        polls = [lock_free(run / ".run.lock")]
        while not polls[-1] and len(polls) < 6:  # 300 ms at most
            time.sleep(0.05)
            polls.append(lock_free(run / ".run.lock"))
        assert polls[-1], f"the run lock still held {len(polls) * 50} ms after its process was reaped (workers {workers})"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

"""DataLoader workers leave stopping to the training process (ablate.data.loader_workers): a group's Ctrl-C or a
scheduler's SIGTERM killed them, and the run stopped on "DataLoader worker exited unexpectedly" (exit 1) instead of
saving its step and exiting 130 or 75."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import lightning.fabric.utilities.seed as lightning_seed
from torch.utils.data import DataLoader

from ablate.data.loader_workers import worker_init


def test_a_worker_outlives_a_groups_ctrl_c_and_first_sigterm_but_not_a_second(tmp_path, monkeypatch):
    seeded = tmp_path / "seeded"
    monkeypatch.setenv("PL_SEED_WORKERS", "1")  # as seed_everything(workers=True) sets it
    monkeypatch.setattr(lightning_seed, "pl_worker_init_function", lambda worker_id: seeded.write_text(str(worker_id)))
    loader = DataLoader(range(100), batch_size=1, num_workers=1, worker_init_fn=worker_init, persistent_workers=True)
    batches = iter(loader)
    assert int(next(batches)) == 0
    (worker,) = batches._workers  # noqa: SLF001 (the process to signal)
    os.kill(worker.pid, signal.SIGINT)
    os.kill(worker.pid, signal.SIGTERM)
    time.sleep(0.5)
    assert worker.is_alive() and [int(next(batches)) for _ in range(3)] == [1, 2, 3]
    assert seeded.read_text() == "0"  # Lightning's seeding of workers, which a loader given its own init no longer gets
    with contextlib.suppress(RuntimeError):  # torch's SIGCHLD handler says the worker was killed, as it should be
        os.kill(worker.pid, signal.SIGTERM)  # the loader's own terminate() of a stuck worker
        worker.join(timeout=10)
    worker.join(timeout=10)
    assert not worker.is_alive() and worker.exitcode == -signal.SIGTERM
    del batches


def test_every_loader_ablate_builds_gives_its_workers_this_init():
    """A loader added without it would bring the crash back for its runs (a run's and a member group's today)."""
    import ablate

    def call(text: str, start: int) -> str:  # from "DataLoader(" to its closing parenthesis
        depth = 0
        for end in range(start, len(text)):
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            if depth == 0 and text[end] == ")":
                return text[start : end + 1]
        return text[start:]

    calls = []
    for path in Path(ablate.__file__).parent.rglob("*.py"):
        text = path.read_text()
        for start in (i for i in range(len(text)) if text.startswith("DataLoader(", i)):
            calls.append((path.name, "worker_init_fn=worker_init" in call(text, start)))
    assert sorted(calls) == [("batching.py", True), ("member_data.py", True)], calls


STUCK = """
import ctypes, multiprocessing, sys
from ablate.data import loader_workers

def stuck():
    loader_workers.worker_init(0)
    mutex = ctypes.create_string_buffer(64)  # a pthread mutex, zeroed: unlocked
    libc = ctypes.CDLL(None)
    libc.pthread_mutex_lock(mutex)
    libc.pthread_mutex_lock(mutex)  # never returns, whatever signal comes: its Python handler never runs

if __name__ == "__main__":
    loader_workers.GRACE_S = 0.5
    worker = multiprocessing.get_context("fork").Process(target=stuck, daemon=True)
    worker.start()
    print(worker.pid, flush=True)
    worker.terminate()  # as the loader's shutdown ends a worker that did not stop: ignored
    sys.exit(3)
"""


def test_a_worker_stuck_in_c_code_is_killed_as_the_process_exits(tmp_path):
    """Ignoring its first SIGTERM, a worker blocked in C never ran the handler that lets a second end it, and
    multiprocessing's exit waited for it for ever: the run never exited."""
    import subprocess
    import sys

    script = tmp_path / "stuck.py"
    script.write_text(STUCK)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3 and "Traceback" not in proc.stderr, proc.stderr
    pid = int(proc.stdout.split()[0])
    time.sleep(0.2)
    try:
        state = Path(f"/proc/{pid}/status").read_text().lower()
    except FileNotFoundError:  # reaped by init, even between a look and a read
        state = "gone"
    assert state == "gone" or "zombie" in state  # killed (reaped, or about to be)

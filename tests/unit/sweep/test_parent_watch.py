"""ablate.sweep.parent_watch on real processes: a child started with watched_env gets SIGTERM in its main thread (even
while it sleeps) once its starter is killed by SIGKILL, and not before; the variable does not reach its own children.
(The whole sweep under `kill -9` is tests/faults/test_orphans.py.)"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ablate.sweep.parent_watch import PARENT_ENV, watch_parent

CHILD = """
import os, pathlib, signal, sys, time
from ablate.sweep.parent_watch import PARENT_ENV, watch_parent
out = pathlib.Path(sys.argv[1])
def term(signum, frame):
    (out / "sigterm").write_text(str(PARENT_ENV in os.environ))
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
watch_parent("child", poll_s=0.05)
(out / "ready").write_text(str(os.getpid()))
time.sleep(120)  # a blocking call in the main thread: the handler must still run at once
"""
STARTER = """
import os, subprocess, sys, time
from ablate.sweep.parent_watch import watched_env
subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], env=watched_env(dict(os.environ)))
time.sleep(120)
"""


def running(pid: int) -> bool:
    """Alive and not a zombie (an orphan re-parented to a pid 1 that does not reap stays one)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(path, seconds: float = 30) -> None:
    deadline = time.time() + seconds
    while not path.exists():
        assert time.time() < deadline, f"{path.name} never came"
        time.sleep(0.05)


@pytest.mark.slow  # a real process tree killed: seconds; the default set stays under a minute
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; macOS is untested")
def test_a_child_stops_as_on_sigterm_when_its_starter_is_killed(tmp_path):
    starter = subprocess.Popen([sys.executable, "-c", STARTER, CHILD, str(tmp_path)])
    try:
        wait_for(tmp_path / "ready")
        child = int((tmp_path / "ready").read_text())
        time.sleep(0.5)  # ten polls with its starter alive: nothing happens
        assert not (tmp_path / "sigterm").exists()
        starter.send_signal(signal.SIGKILL)  # no handler of the starter runs
        starter.wait()
        wait_for(tmp_path / "sigterm", 10)
        assert (tmp_path / "sigterm").read_text() == "False"  # PARENT_ENV was taken out of the child's environment
        deadline = time.time() + 10
        while running(child):
            assert time.time() < deadline, "the child did not exit after its handler"
            time.sleep(0.05)
    finally:
        starter.kill()
        starter.wait()


def test_a_process_no_sweep_started_watches_nothing(monkeypatch):
    monkeypatch.delenv(PARENT_ENV, raising=False)
    assert watch_parent("train") is None

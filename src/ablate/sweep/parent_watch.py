"""A sweep's worker or trial process stops when the process that started it dies, rather than running on with nobody to
record its result or stop it: `kill -9` of `ablate sweep` (or of a worker) runs no handler in the dead process, so its
children have to notice by themselves.

The starter names itself in the child's environment (`watched_env`); the child's `watch_parent` polls os.getppid() in a
daemon thread and, once its parent is no longer that process (it died and the child was re-parented to init or a
subreaper, a zombie parent included), sends its own main thread SIGTERM: a preemption's path, so a trial saves
last.ckpt at its next step boundary and exits with PREEMPTED_EXIT, and a worker passes it to its trial, records the
trial and takes no new one. getppid() and re-parenting behave alike on Linux and macOS; tested on Linux only (macOS is
untested). Linux's PR_SET_PDEATHSIG is not used: it fires when the parent *thread* that started the child ends, not the
process, and a second path would go untested beside this one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time

PARENT_ENV = "ABLATE_SWEEP_PARENT"  # the pid a worker or trial process watches
POLL_S = 1.0


def watched_env(env: dict[str, str]) -> dict[str, str]:
    """`env` for a child process that is to stop when this process dies."""
    return {**env, PARENT_ENV: str(os.getpid())}


def watch_parent(what: str, poll_s: float = POLL_S) -> threading.Thread | None:
    """Watch the parent named by PARENT_ENV; None when none is named (a process not started by a sweep). The variable is
    removed, so this process's own children (DDP ranks, which Lightning starts with this command line) watch nothing:
    their parent is this process, not the one named."""
    named = os.environ.pop(PARENT_ENV, None)
    if not named:
        return None
    thread = threading.Thread(target=_watch, args=(int(named), what, poll_s), name="parent-watch", daemon=True)
    thread.start()
    return thread


def _watch(parent: int, what: str, poll_s: float) -> None:
    while os.getppid() == parent:  # a pid that started this process before it died could not be our parent again
        time.sleep(poll_s)
    with contextlib.suppress(OSError):  # stderr may be a pipe whose reader died with the parent
        print(f"{what}: the process that started it (pid {parent}) is gone; stopping as on SIGTERM", file=sys.stderr, flush=True)
    # To the main thread, where Python runs signal handlers: the handler runs at once, even during a sleep or a wait there.
    with contextlib.suppress(ProcessLookupError, RuntimeError):
        signal.pthread_kill(threading.main_thread().ident, signal.SIGTERM)

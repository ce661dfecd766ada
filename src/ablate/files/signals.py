"""One rule for signals in commands that write (docs/runs.md, "Stopping"): SIGTERM is raised as `Terminated`, as
SIGINT is raised as KeyboardInterrupt, so every `with replacing(...)` block on the way out removes its temporary and
leaves the file it was replacing as it was; the command then exits with one line and 128 + the signal's number.
`ablate train` and `ablate sweep` keep their own handlers (save, then 75 or 130). A few renames that belong together
(a table's files, an archive's moved in) hold a signal until the last is done (`held`), so it leaves all or none.
A reader of stdout that goes away (`| head`: SIGPIPE, which Python ignores, so a write fails with EPIPE) ends any
command quietly with SIGPIPE_EXIT (`stdout_reader_gone`, `quiet_stdout`), as a tool SIGPIPE killed would end."""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

SIGINT_EXIT, SIGTERM_EXIT = 128 + signal.SIGINT, 128 + signal.SIGTERM  # 130, 143: what a shell reports
SIGPIPE_EXIT = 128 + signal.SIGPIPE  # 141
HELD = (signal.SIGINT, signal.SIGTERM)


class Terminated(BaseException):
    """SIGTERM, raised where the process is (a BaseException, as KeyboardInterrupt: no `except Exception` eats it)."""


def _raise(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM while cleaning up ends the process at once
    raise Terminated


def raise_on_sigterm() -> None:
    """From now on SIGTERM raises Terminated in the main thread."""
    signal.signal(signal.SIGTERM, _raise)


def raises_on_sigterm(handler) -> bool:
    """Whether `handler` is raise_on_sigterm's (one a training loop takes over, and does not hand back)."""
    return handler is _raise


@contextmanager
def held() -> Iterator[None]:
    """SIGINT and SIGTERM that arrive in the block act as it ends, as if they arrived then (the handlers in force
    before it run): for renames that must all happen or none. Only the main thread handles signals; elsewhere this
    holds nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    previous = {signum: signal.signal(signum, lambda signum, frame: arrived.append(signum)) for signum in HELD}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)  # None: a handler set outside Python
        if arrived:
            signal.raise_signal(arrived[0])  # handled (raised, for ablate's handlers) before this returns


def exit_code(e: BaseException) -> tuple[int, str] | None:
    """(exit code, the signal's name) when `e`, or what it arose from (torch.save turns a Ctrl-C into a RuntimeError
    as it closes its file), is a Ctrl-C or SIGTERM; None otherwise."""
    for cause in _chain(e):
        if isinstance(cause, KeyboardInterrupt):
            return SIGINT_EXIT, "Ctrl-C (SIGINT)"
        if isinstance(cause, Terminated):
            return SIGTERM_EXIT, "SIGTERM"
    return None


def _chain(e: BaseException) -> Iterator[BaseException]:
    """`e` and what it arose from, nearest first (the chain is short; a bound in case it loops)."""
    cause: BaseException | None = e
    for _ in range(8):
        if cause is None:
            return
        yield cause
        cause = cause.__cause__ or cause.__context__


def stdout_reader_gone(e: BaseException) -> bool:
    """Whether `e`, or what it arose from, is a write's EPIPE and stdout's reader has gone: an EPIPE on another pipe
    (a worker's) is an error to report, not a reader that stopped early."""
    if not any(isinstance(cause, BrokenPipeError) for cause in _chain(e)):
        return False
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
    except (OSError, ValueError, AttributeError):  # stdout replaced by no file (a test's capture): not a pipe at all
        return False
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def quiet_stdout() -> None:
    """Point stdout at /dev/null, so the exit's flush of what is still buffered has nothing to fail on (Python would
    print "Exception ignored ... BrokenPipeError" and exit 120)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    finally:
        os.close(devnull)

"""One rule for signals in commands that write (docs/runs.md, "Stopping"): SIGTERM is raised as `Terminated`, as
SIGINT is raised as KeyboardInterrupt, so every `with replacing(...)` block on the way out removes its temporary and
leaves the file it was replacing as it was; the command then exits with one line and 128 + the signal's number.
`ablate train` and `ablate sweep` keep their own handlers (save, then 75 or 130). A few renames that belong together
(a table's files, an archive's moved in) hold a signal until the last is done (`held`), so it leaves all or none."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

SIGINT_EXIT, SIGTERM_EXIT = 128 + signal.SIGINT, 128 + signal.SIGTERM  # 130, 143: what a shell reports
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
    cause: BaseException | None = e
    for _ in range(8):  # the chain is short; a bound in case it loops
        if cause is None:
            return None
        if isinstance(cause, KeyboardInterrupt):
            return SIGINT_EXIT, "Ctrl-C (SIGINT)"
        if isinstance(cause, Terminated):
            return SIGTERM_EXIT, "SIGTERM"
        cause = cause.__cause__ or cause.__context__
    return None

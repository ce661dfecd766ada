"""One rule for signals in commands that write (docs/runs.md, "Stopping"): SIGTERM is raised as `Terminated`, as
SIGINT is raised as KeyboardInterrupt, so every `with replacing(...)` block on the way out removes its temporary and
leaves the file it was replacing as it was; the command then exits with one line and 128 + the signal's number.
`ablate train` and `ablate sweep` keep their own handlers (save, then 75 or 130)."""

from __future__ import annotations

import signal

SIGINT_EXIT, SIGTERM_EXIT = 128 + signal.SIGINT, 128 + signal.SIGTERM  # 130, 143: what a shell reports


class Terminated(BaseException):
    """SIGTERM, raised where the process is (a BaseException, as KeyboardInterrupt: no `except Exception` eats it)."""


def _raise(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM while cleaning up ends the process at once
    raise Terminated


def raise_on_sigterm() -> None:
    """From now on SIGTERM raises Terminated in the main thread."""
    signal.signal(signal.SIGTERM, _raise)


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

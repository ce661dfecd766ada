"""Where ablate's own messages go: stderr, plain, INFO and up, for every entry point (the CLI, a sweep's trial
processes). Python's fallback handler would show warnings only, so a report such as how many corpus pairs were
dropped would reach nobody."""

from __future__ import annotations

import logging
import sys


class _Stderr(logging.StreamHandler):
    """Writes to whatever sys.stderr is when a message comes (a test's capture, a redirected stream), not to the
    stream that was current when the handler was made, which may be closed by then."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def to_stderr(level: int = logging.INFO) -> None:
    logger = logging.getLogger("ablate")
    if any(isinstance(h, _Stderr) for h in logger.handlers):
        return
    handler = _Stderr()
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level)
    # It still propagates: the root logger has no handler unless an application (or a test capture) adds one.


def worker_says(index: int, msg: str) -> None:
    """A sweep worker's line on stderr, `[worker N] ...`."""
    import contextlib

    with contextlib.suppress(OSError):  # a pipe to a live view whose sweep process died: the worker must still stop cleanly
        print(f"[worker {index}] {msg}", file=sys.stderr, flush=True)

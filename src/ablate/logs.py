"""Where ablate's own messages go: stderr, plain, INFO and up, for every entry point (the CLI, a sweep's trial
processes). Python's fallback handler would show warnings only, so a report such as how many corpus pairs were
dropped would reach nobody."""

from __future__ import annotations

import logging
import sys


def to_stderr(level: int = logging.INFO) -> None:
    logger = logging.getLogger("ablate")
    if any(getattr(h, "_ablate", False) for h in logger.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler._ablate = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False

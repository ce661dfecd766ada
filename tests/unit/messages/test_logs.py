"""ablate's own log lines (`ablate.messages.logs.to_stderr`): plain, INFO and up, on whatever stderr is current when
a message comes, and one handler however often an entry point asks for it."""

from __future__ import annotations

import io
import logging
import sys

import pytest

from ablate.messages import logs


@pytest.fixture
def ablate_logger():
    """The "ablate" logger with none of logs' handlers; restored as it was afterwards."""
    logger = logging.getLogger("ablate")
    saved = (list(logger.handlers), logger.level)
    logger.handlers = [h for h in logger.handlers if not isinstance(h, logs._Stderr)]
    yield logger
    logger.handlers, logger.level = saved[0], saved[1]


def test_info_lines_reach_the_stderr_current_when_they_are_logged(ablate_logger, monkeypatch):
    logs.to_stderr()
    first, later = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    logging.getLogger("ablate.data.corpus").info("train: dropped 8 of 29000 pairs")
    monkeypatch.setattr(sys, "stderr", later)  # e.g. a stream replaced after the handler was made
    logging.getLogger("ablate.run").warning("second")
    logging.getLogger("ablate.run").debug("not shown")
    assert first.getvalue() == "train: dropped 8 of 29000 pairs\n"  # plain: no level, no logger name
    assert later.getvalue() == "second\n"


def test_asking_twice_adds_one_handler(ablate_logger):
    logs.to_stderr()
    logs.to_stderr(logging.WARNING)
    assert sum(isinstance(h, logs._Stderr) for h in ablate_logger.handlers) == 1
    assert ablate_logger.level == logging.INFO  # the first call's level stands

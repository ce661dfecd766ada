"""Unit-test fixtures: each test (and each module's own fixtures) leaves the process as it found it, whichever test its
xdist worker runs next (worksteal moves tests between workers as they finish)."""

import contextlib
import logging
import signal
import sys

import pytest
import torch

from ablate import plugins
from ablate.messages import redact
from ablate.registry import restoring

torch.set_num_threads(1)  # tiny tensors: more threads only add overhead and contention

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@contextlib.contextmanager
def _process_state():
    """Signal handlers, sys.excepthook and the `ablate` logger as they were. A test or a module's fixture that ran a
    command in-process (cli.main: SIGTERM raised as an exception, tracebacks masked, a stderr handler; a sweep worker:
    Ctrl-C caught) left them so for every later test of its worker: there a sweep stopped as interrupted (130), an
    expected KeyboardInterrupt never came, or a check that a command sets its own SIGTERM handler passed on another's."""
    handlers = {signum: signal.getsignal(signum) for signum in HANDLED}
    hook, logger = sys.excepthook, logging.getLogger("ablate")
    level, log_handlers, propagate = logger.level, list(logger.handlers), logger.propagate
    try:
        yield
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        sys.excepthook = hook
        logger.setLevel(level)
        logger.handlers[:], logger.propagate = log_handlers, propagate
        if (trial := sys.modules.get("ablate.sweep.trial")) is not None:
            trial.Stop.requested, trial.Stop.signum, trial.Stop.child = False, None, None


@pytest.fixture(autouse=True, scope="module")
def _module_process_state():
    with _process_state():
        yield


@pytest.fixture(autouse=True)
def _test_process_state(monkeypatch):
    """The above, plus what plugins registered (a sweep's --dry-run importing a variant of its own: the model's
    invariant tests, which take in every registered variant, then failed on it) and the passwords redaction remembers
    (one with '%' or '/' has every 4-character piece of it masked in later output)."""
    monkeypatch.setattr(plugins, "_imported", dict(plugins._imported))  # ABLATE_TEST_PLUGINS' stay
    monkeypatch.setattr(plugins, "_hashes", dict(plugins._hashes))
    monkeypatch.setattr(redact, "_seen", set(redact._seen))
    with _process_state(), restoring(*plugins._registries()):
        yield

"""Unit-test fixtures."""

import signal
import sys

import pytest
import torch

torch.set_num_threads(1)  # tiny tensors: more threads only add overhead and contention

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _signal_state():
    """Each test ends with the process's signal handlers as they were and no sweep stop requested. A test that ran a
    sweep worker in-process (run_worker sets both) left Ctrl-C caught by the worker's handler, and in whichever test
    its xdist worker ran next a sweep stopped as interrupted (130) or an expected KeyboardInterrupt never came."""
    saved = {signum: signal.getsignal(signum) for signum in HANDLED}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)
    if (trial := sys.modules.get("ablate.sweep.trial")) is not None:
        trial.Stop.requested, trial.Stop.signum, trial.Stop.child = False, None, None


@pytest.fixture(autouse=True)
def _excepthook():
    """cli.main masks secrets in uncaught tracebacks by setting sys.excepthook (ablate.messages.redact): each test
    ends with the process's own hook back."""
    saved = sys.excepthook
    yield
    sys.excepthook = saved

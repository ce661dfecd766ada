"""The exit codes of a run stopped by a signal after saving (`ablate.run.exits`): the values schedulers and shells
read (a requeue on EX_TEMPFAIL, 128 + SIGINT for Ctrl-C), exported by `ablate.run` for the sweep worker."""

from __future__ import annotations

import os
import signal

import ablate.run
from ablate.run.exits import INTERRUPTED_EXIT, PREEMPTED_EXIT


def test_a_preempted_run_exits_ex_tempfail_and_an_interrupted_one_128_plus_sigint():
    assert PREEMPTED_EXIT == os.EX_TEMPFAIL == 75
    assert INTERRUPTED_EXIT == 128 + signal.SIGINT == 130
    assert (ablate.run.PREEMPTED_EXIT, ablate.run.INTERRUPTED_EXIT) == (PREEMPTED_EXIT, INTERRUPTED_EXIT)

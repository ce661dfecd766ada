"""How a run that ended early tells whoever supervises it: the signals that stop it, the exit codes of a run stopped
by one after saving, and the file a run that diverged leaves instead of a summary. Shared by the run and the sweep
worker that restarts or judges it; their own module so the worker reads them without importing Lightning."""

import signal

PREEMPTED_EXIT = 75  # EX_TEMPFAIL: stopped by SIGTERM/SIGUSR1 after saving (`--resume` continues), or before its first
# checkpoint (its new folder removed: the same command starts it again)
INTERRUPTED_EXIT = 130  # 128 + SIGINT: a user's Ctrl-C, after saving; not a preemption for a scheduler to requeue
SWEEP_FILE_ENV = "ABLATE_SWEEP_FILE"  # set for a sweep's trial: its sweep file, whose rerun continues it (not `ablate train`)
FAILED_FILE = "FAILED.txt"  # a run or member that diverged: the reason, in its run directory (set aside by a resume)
PRUNED = "pruned"  # the stop_reason in the summary of a run a sweep's pruner stopped early: no finished seed
# The signals a run saves and stops on (run/callbacks.py), and a sweep worker passes on to its trial (sweep/trial.py).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)


def stop_exit(signum: int | None) -> int:
    """The exit code of a run or sweep stopped by `signum` after saving: a Ctrl-C is its user's (INTERRUPTED_EXIT),
    any other stop signal a preemption a scheduler may requeue (PREEMPTED_EXIT)."""
    return INTERRUPTED_EXIT if signum == signal.SIGINT else PREEMPTED_EXIT


def stopped_by_signal(e: BaseException) -> bool:
    """Whether a run ended with `e` because of a signal: Ctrl-C or SIGTERM raised where it was, or the exit a run makes
    of one (ablate.run.trainer.fit_or_exit, ablate.run.callbacks.run_end)."""
    from ablate.files.signals import exit_code

    return exit_code(e) is not None or (isinstance(e, SystemExit) and e.code in (PREEMPTED_EXIT, INTERRUPTED_EXIT))

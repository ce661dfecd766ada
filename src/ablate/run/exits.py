"""How a run that ended early tells whoever supervises it: the exit codes of a run stopped by a signal after saving,
and the file a run that diverged leaves instead of a summary. Shared by the run and the sweep worker that
restarts or judges it; their own module so the worker reads them without importing Lightning."""

PREEMPTED_EXIT = 75  # EX_TEMPFAIL: stopped by SIGTERM/SIGUSR1 after saving (`--resume` continues), or before its first
# checkpoint (its new folder removed: the same command starts it again)
INTERRUPTED_EXIT = 130  # 128 + SIGINT: a user's Ctrl-C, after saving; not a preemption for a scheduler to requeue
SWEEP_FILE_ENV = "ABLATE_SWEEP_FILE"  # set for a sweep's trial: its sweep file, whose rerun continues it (not `ablate train`)
FAILED_FILE = "FAILED.txt"  # a run or member that diverged: the reason, in its run directory (set aside by a resume)
PRUNED = "pruned"  # the stop_reason in the summary of a run a sweep's pruner stopped early: no finished seed


def stopped_by_signal(e: BaseException) -> bool:
    """Whether a run ended with `e` because of a signal: Ctrl-C or SIGTERM raised where it was, or the exit a run makes
    of one (ablate.run.trainer.fit_or_exit, ablate.run.callbacks.run_end)."""
    from ablate.files.signals import exit_code

    return exit_code(e) is not None or (isinstance(e, SystemExit) and e.code in (PREEMPTED_EXIT, INTERRUPTED_EXIT))

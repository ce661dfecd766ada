"""Exit codes of a run stopped by a signal after saving, shared by the run and the sweep worker that restarts it;
their own module so the worker reads them without importing Lightning."""

PREEMPTED_EXIT = 75  # EX_TEMPFAIL: stopped by SIGTERM/SIGUSR1 after saving; `--resume` continues
INTERRUPTED_EXIT = 130  # 128 + SIGINT: a user's Ctrl-C, after saving; not a preemption for a scheduler to requeue

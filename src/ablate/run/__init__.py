"""One training run and its run directory; imports nothing from sweeps, which use the services exported here.

The run itself is `ablate.run.train.train`, not exported here: it brings in Lightning (seconds), which a sweep
worker, asking only about run directories and exit codes, never needs."""

from ablate.run.exits import FAILED_FILE, INTERRUPTED_EXIT, PREEMPTED_EXIT
from ablate.run.resume_point import resume_checkpoint
from ablate.run.run_lock import run_dir_in_use
from ablate.run.rundir import changes_from_saved_config

__all__ = ["FAILED_FILE", "INTERRUPTED_EXIT", "PREEMPTED_EXIT", "changes_from_saved_config", "resume_checkpoint", "run_dir_in_use"]

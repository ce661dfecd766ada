"""One training run and its run directory; imports nothing from sweeps, which use the services exported here."""

from ablate.run.callbacks import INTERRUPTED_EXIT, PREEMPTED_EXIT
from ablate.run.rundir import changes_from_saved_config, resume_checkpoint, run_dir_in_use
from ablate.run.train import train

__all__ = ["INTERRUPTED_EXIT", "PREEMPTED_EXIT", "changes_from_saved_config", "resume_checkpoint", "run_dir_in_use", "train"]

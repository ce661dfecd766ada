"""DataLoader worker processes (`data.num_workers > 0`) leave stopping to the training process.

A Ctrl-C in a terminal reaches every process of the foreground group, and a scheduler's SIGTERM (SLURM's preemption,
`kill -- -PGID`) every process of the job: the workers died of it, and the training process, which would have saved
the step and exited 130 or 75, stopped on "DataLoader worker exited unexpectedly" with exit 1 instead (a sweep then
counted the trial failed and trained it again from scratch). Workers ignore SIGINT and their first SIGTERM; the loader
ends them itself when the run stops. A worker stuck in C code never runs the Python handler that would let a second
SIGTERM end it, so the training process kills what is left of its workers as it exits (multiprocessing's own exit
would wait for them for ever).
"""

from __future__ import annotations

import atexit
import multiprocessing
import multiprocessing.util  # its exit hook registered first, so this module's runs before it
import os
import signal

GRACE_S = 2.0  # a worker asked to stop (the loader's shutdown) that is still alive this long after the process ends


def worker_init(worker_id: int) -> None:
    """A DataLoader's worker_init_fn. Given one, the loader no longer gets Lightning's seeding of workers
    (`seed_everything(workers=True)` sets it only where there is none), so that is done here too."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _first_term_ignored)
    if int(os.environ.get("PL_SEED_WORKERS", 0)):
        from lightning.fabric.utilities.seed import pl_worker_init_function

        pl_worker_init_function(worker_id)


def _first_term_ignored(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def end_stuck_workers() -> None:
    """Daemonic children (DataLoader workers) still alive as the process exits, killed after GRACE_S. Registered after
    multiprocessing's exit hook (imported with torch), so it runs before that hook's unbounded join."""
    for child in multiprocessing.active_children():
        if child.daemon:
            child.join(GRACE_S)
            if child.is_alive():
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # torch's handler would call this kill a failure
                child.kill()
                child.join(GRACE_S)


atexit.register(end_stuck_workers)

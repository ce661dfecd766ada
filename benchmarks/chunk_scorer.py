"""Scoring finished runs while a chunk's sweep still trains, so little is left to score when the chunk ends."""

from __future__ import annotations

import multiprocessing
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from ablate.table.checkpoint_scoring import evaluate_run, selected_checkpoint

sys.path.insert(0, str(Path(__file__).parent))
from chunk_report import say  # noqa: E402

SCORE_EVERY_S = 10.0  # how often the scorer looks for newly finished runs


class Scorer(threading.Thread):
    """Scores every finished run under TRIALS without an eval/SPLIT.json, looking every SCORE_EVERY_S until halted, in
    `workers` processes: a wave of packed trials finishes together, and one at a time its records would outlast the
    reserve. Halting waits for the records being made; runs not yet begun are left to `ablate archive`."""

    def __init__(self, trials: Path, split: str, device: str, log: Path, workers: int):
        super().__init__(daemon=True)
        self.trials, self.split, self.device, self.log = trials, split, device, log
        self.halt, self.scored, self.workers = threading.Event(), [], workers

    def pending(self, taken: dict) -> list[Path]:
        if not self.trials.is_dir():
            return []
        done = sorted(p.parent for p in self.trials.glob("*/summary.json") if p.parent not in taken)
        return [d for d in done if not (d / "eval" / f"{self.split}.json").exists() and selected_checkpoint(d) is not None]

    def collect(self, taken: dict) -> None:
        for run, (future, began) in list(taken.items()):
            if future is not None and future.done() and not future.cancelled():
                if future.exception() is None:
                    self.scored.append(run.name)
                    say(self.log, f"scored {run.name} on {self.split} ({time.monotonic() - began:.0f} s)")
                else:  # ablate archive scores it again, and says why it cannot
                    e = future.exception()
                    say(self.log, f"could not score {run.name} on {self.split} ({type(e).__name__}: {e}); left to ablate archive")
                taken[run] = (None, began)

    def run(self) -> None:
        taken: dict[Path, tuple] = {}  # run -> (its future, when submitted); None once reported
        # spawn, not fork: each scorer process opens CUDA itself
        with ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            while not self.halt.is_set():
                for run in self.pending(taken):
                    taken[run] = (pool.submit(evaluate_run, run, self.split, self.device), time.monotonic())
                self.collect(taken)
                self.halt.wait(SCORE_EVERY_S)
            pool.shutdown(wait=True, cancel_futures=True)
        self.collect(taken)

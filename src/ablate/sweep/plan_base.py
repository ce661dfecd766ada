"""The interface every kind of sweep plan has (ablate.sweep.plan): what a trial trains, and the calls the worker
loop, the dry run and the file's validation make."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from ablate.sweep.spec import Sweep
from ablate.sweep.storage import StudyHandle

MAX_RETRY = 2  # work interrupted this often in one run (its workers died, a preemption) is not queued again in it


@dataclass
class TrialSpec:
    """What one trial trains: its run name, the row it belongs to, its overrides of the base config."""

    name: str
    row: str
    overrides: dict[str, Any]
    seed: int | None
    tags: list[str]


class Plan(ABC):
    def __init__(self, sweep: Sweep):
        self.sweep = sweep

    @abstractmethod
    def check(self) -> str | None:
        """What is wrong with this part of the sweep file, if anything."""

    @abstractmethod
    def sampler(self) -> optuna.samplers.BaseSampler:
        """The study's sampler."""

    @abstractmethod
    def queue(self, study: optuna.Study, only_dead: bool = False, since: int = 0) -> int:
        """Queue the trials that should run now; returns how many. With `only_dead`, only work that was interrupted
        (failed without a reason: its worker died, it was preempted), not more than MAX_RETRY times since trial
        number `since` (this run's first: a rerun of the sweep retries it regardless)."""

    def take(self, handle: StudyHandle) -> optuna.Trial | None:
        """Start the next trial (RUNNING from here on); None when there is none to take after all."""
        return handle.study.ask()

    def members(self, handle: StudyHandle, trial: optuna.Trial) -> int:
        """How many trials the one just taken trains with as members of one model (its config's members.size)."""
        return self.sweep.row_config({}).members.size

    def take_partners(self, handle: StudyHandle, trial: optuna.Trial, n: int) -> list[optuna.Trial]:
        """Up to `n` more trials to train with `trial` as members: what it may be grouped with (a row's other seeds;
        a search's next trials, whose keys the sweep file was checked to be member-able)."""
        return [t for t in (self.take(handle) for _ in range(n)) if t is not None]

    @abstractmethod
    def next_action(self, study: optuna.Study, started: float) -> str:
        """'run' a trial, 'wait' for running ones (one may die and need a retry), or 'stop'."""

    @abstractmethod
    def claim(self, handle: StudyHandle, trial: optuna.Trial) -> TrialSpec | str:
        """The spec of a trial just taken, or why it must not run (a BOOKKEEPING reason)."""

    @abstractmethod
    def earlier_attempts(self, handle: StudyHandle, trial: optuna.Trial) -> list[FrozenTrial]:
        """Earlier trials of the same work that this trial may continue from their checkpoint."""

    @abstractmethod
    def describe(self) -> tuple[list[str], list[list[str]], str]:
        """For --dry-run: table header, rows, and a closing line."""

    def timed_out(self, started: float) -> bool:
        return bool(self.sweep.timeout) and time.time() - started > self.sweep.timeout

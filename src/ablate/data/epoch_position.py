"""Where a training sampler stands for Lightning and for a resume, for a run's batches and a member group's alike.

Lightning calls `set_epoch` on `dataloader.batch_sampler.sampler`, never on the batch sampler itself, so a batch sampler
keeps one of these there. Its epoch is read from the trainer, not from Lightning's argument, which is one ahead when a
run restarts from a checkpoint taken at an epoch's end. On a resume Lightning builds the epoch's iterator before it
calls `set_epoch`, so `follow` sets the epoch itself; the batches a resumed run trained in it are skipped once, and
since a sampler's order is a function of (seed, epoch) the run goes on exactly where it stopped.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol, TypeVar

T = TypeVar("T")


class EpochSampler(Protocol):
    epoch: int

    def set_epoch(self, epoch: int) -> None: ...


class EpochPosition:
    """A batch sampler's epoch and resume point. `epoch_source` None: the caller sets the epoch (benchmarks' loops)."""

    def __init__(self, owner: EpochSampler):
        self.owner = owner
        self.epoch_source: Callable[[], int] | None = None
        self.resume_at: tuple[int, int] | None = None  # (epoch, batches already trained): skipped once

    def set_epoch(self, epoch: int) -> None:
        """Lightning's call at each epoch's start."""
        self.owner.set_epoch(self.epoch_source() if self.epoch_source is not None else epoch)

    def follow(self, epoch_source: Callable[[], int], resume_at: tuple[int, int] | None) -> None:
        """Take the epoch from `epoch_source` (the trainer's); with `resume_at`, start in that epoch past its trained
        batches."""
        self.epoch_source = epoch_source
        if resume_at is not None:
            self.owner.set_epoch(resume_at[0])
            self.resume_at = resume_at

    def untrained(self, batches: Iterable[T]) -> Iterator[T]:
        """`batches`, the epoch's in order, less those a resumed run already trained in it (on the first pass only).
        A generator, so the skip is spent by the pass that draws a batch: a DataLoader with workers makes an iterator
        it never draws from before the one it uses, which would otherwise take the skip and replay the trained steps."""
        skip = 0
        if self.resume_at is not None and self.resume_at[0] == self.owner.epoch:
            skip, self.resume_at = self.resume_at[1], None
        yield from itertools.islice(batches, skip, None)

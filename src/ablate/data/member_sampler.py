"""Batches for K members trained as one model: one length schedule for the group, each member's own order within it.

Members share a step, so their batches are padded to one shape (ablate.data.member_batches): batches of unrelated
lengths would pad each other heavily. The token buckets (ablate.data.batching, cut from the length-sorted corpus)
are grouped into length classes of `class_size` neighbours. On Multi30k (8 members, the table3-small and table3-gpu
batch sizes) a step's positions were 4.1% and 6.5% padding with class_size 1 (as one run's batches: every member a
batch of the same bucket), 12% and 18% with 2, 19% and 27% with 4, and 67% for members' unrelated batches. Each
epoch the group draws one order of classes, and at every step each member takes the next of its own shuffled buckets
of that step's class, its pairs ordered with its own random tie-breaking. So every member still sees each pair once an epoch, in an order of its own drawn from its
own seed, while the batches of one step differ in length only as much as neighbouring buckets do.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from ablate.data.batching import TokenBucketBatchSampler


class MemberBatchSampler:
    """Yields, per step, one list of dataset indices per member.

    `shared`: every member gets the group's batch, the same pairs in the same order (what one run with seed
    `group_seed` would see). Members then differ only in their initial weights, dropout masks and member-able values,
    so a spread between them leaves out the part of seed-to-seed variation that the order of the data makes.
    """

    def __init__(
        self,
        src_lens: Sequence[int],
        tgt_lens: Sequence[int],
        max_tokens: int,
        seeds: Sequence[int],
        group_seed: int,
        class_size: int = 2,
        shared: bool = False,
    ):
        self.buckets = TokenBucketBatchSampler(src_lens, tgt_lens, max_tokens, shuffle=True, seed=group_seed)
        self.seeds, self.group_seed, self.class_size, self.shared = list(seeds), group_seed, class_size, shared
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self.buckets.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self.buckets._bounds)

    def _member_order(self, seed: int) -> tuple[np.ndarray, np.random.Generator]:
        rng = np.random.default_rng([seed % 2**63, self.epoch])
        b = self.buckets
        return np.lexsort((rng.random(len(b.src_lens)), b.src_lens, b.tgt_lens)), rng

    def __iter__(self) -> Iterator[list[list[int]]]:
        if self.shared:
            for batch in self.buckets._all_batches():
                yield [batch] * len(self.seeds)
            return
        bounds = self.buckets._bounds
        classes = np.arange(len(bounds)) // self.class_size  # neighbouring buckets (sorted by length) share a class
        schedule = np.random.default_rng([self.group_seed % 2**63, self.epoch]).permutation(classes)
        members = []
        for seed in self.seeds:
            order, rng = self._member_order(seed)
            own = {int(c): list(rng.permutation(np.flatnonzero(classes == c))) for c in np.unique(classes)}
            members.append((order, own))
        for c in schedule.tolist():
            step = []
            for order, own in members:
                start, end = bounds[own[c].pop()]
                step.append(order[start:end].tolist())
            yield step

"""Batches for K members trained as one model: one length schedule for the group, each member's own order within it.

Members share a step, so their batches are padded to one shape (ablate.data.member_batches): batches of unrelated
lengths would pad each other heavily (67% of a step's positions on Multi30k at 8 members). The token buckets
(ablate.data.batching, cut from the length-sorted corpus) are grouped into length classes: a class takes the buckets
that follow its first while their longest source and target stay within `tolerance` tokens of its first's. Each epoch
the group draws one order of classes (a class appears once per bucket it holds), and at every step each member takes
the next of its own shuffled buckets of that step's class, its pairs ordered with its own random tie-breaking. So
every member still sees each pair once an epoch, in an order of its own drawn from its own seed, and the longest
sentences of one step's batches lie within `tolerance` tokens a side of its class's first bucket's.

The trade-off is between padding and how much the members' data orders share: a class of c buckets lets two members
take the same bucket at the same step, so a bigger tolerance (wider classes) decorrelates their orders and pads more.
Classes by tolerance rather than by a fixed count of neighbours put the wide classes where the corpus is dense: on
Multi30k, 8 members, the default tolerance 3 both pads less and shares less than the classes of 2 neighbouring buckets
it replaced (at 2,048 tokens a batch 8.8% padding against 11.5%, and 27% of pairs seen by two members at the same
step against 40%; at 4,096 tokens 11.9% against 17.8%, and 39% against 43%), while one run's own batches are 4.1% and
6.5% padding (`benchmarks/member_data.py`; docs/members.md says what the shared part means for intervals).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from ablate.data.batching import TokenBucketBatchSampler
from ablate.data.epoch_position import EpochPosition


def length_classes(src_max: Sequence[int], tgt_max: Sequence[int], tolerance: int) -> np.ndarray:
    """The class of each bucket, buckets in length order given their longest source and target: a class starts at a
    bucket and takes the following ones while both lengths stay within `tolerance` of that first bucket's."""
    classes, c, first = np.empty(len(src_max), dtype=np.int64), -1, (0, 0)
    for i, (s, t) in enumerate(zip(src_max, tgt_max)):
        if c < 0 or abs(s - first[0]) > tolerance or abs(t - first[1]) > tolerance:
            c, first = c + 1, (s, t)
        classes[i] = c
    return classes


class MemberBatchSampler:
    """Yields, per step, one list of dataset indices per member.

    `tolerance` 0 pads the members' batches as one run's own (only buckets of the same longest lengths share a step).
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
        tolerance: int = 3,
        shared: bool = False,
    ):
        if tolerance < 0:
            raise ValueError(f"tolerance={tolerance} must be at least 0")
        self.buckets = TokenBucketBatchSampler(src_lens, tgt_lens, max_tokens, shuffle=True, seed=group_seed)
        self.seeds, self.group_seed, self.tolerance, self.shared = list(seeds), group_seed, tolerance, shared
        b = self.buckets
        src, tgt = b.src_lens[b.sorted_order], b.tgt_lens[b.sorted_order]  # ties fall anywhere, but tied pairs have equal lengths
        self.classes = length_classes([src[i:j].max() for i, j in b.bounds], [tgt[i:j].max() for i, j in b.bounds], tolerance)
        self.epoch = 0
        self.sampler = EpochPosition(self)  # Lightning's set_epoch goes to batch_sampler.sampler; the resume point

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self.buckets.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self.buckets.bounds)

    def __iter__(self) -> Iterator[list[list[int]]]:
        yield from self.sampler.untrained(self._steps())  # drawn lazily: see EpochPosition.untrained

    def _steps(self) -> Iterator[list[list[int]]]:
        if self.shared:
            for batch in self.buckets.batches():
                yield [batch] * len(self.seeds)
            return
        bounds, classes = self.buckets.bounds, self.classes
        schedule = np.random.default_rng([self.group_seed % 2**63, self.epoch]).permutation(classes)
        members = []
        for seed in self.seeds:
            order, rng = self.buckets.epoch_order(seed)  # its own run's order of this epoch, its generator drawn on
            own = {int(c): list(rng.permutation(np.flatnonzero(classes == c))) for c in np.unique(classes)}
            members.append((order, own))
        for c in schedule.tolist():
            step = []
            for order, own in members:
                start, end = bounds[own[c].pop()]
                step.append(order[start:end].tolist())
            yield step

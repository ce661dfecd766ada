"""MemberBatchSampler: each member an epoch of its own, the group one length schedule (little padding between members)."""

from __future__ import annotations

import numpy as np

from ablate.data.batching import TokenBucketBatchSampler
from ablate.data.member_sampler import MemberBatchSampler


def lengths(n: int = 3000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    tgt = rng.integers(3, 60, n)
    return np.clip(tgt + rng.integers(-5, 6, n), 2, None), tgt


def padded_share(steps, src, tgt) -> float:
    """The share of a step's (K * B_max * L_max) positions, source and target, that are padding."""
    real = total = 0
    for step in steps:
        b = max(len(s) for s in step)
        for side in (src, tgt):
            longest = max(int(side[s].max()) for s in step)
            real += sum(int(side[s].sum()) for s in step)
            total += len(step) * b * longest
    return 1 - real / total


def test_every_member_sees_every_pair_once_an_epoch_in_an_order_of_its_own():
    src, tgt = lengths()
    sampler = MemberBatchSampler(src, tgt, max_tokens=400, seeds=[1, 2, 3], group_seed=9)
    steps = list(sampler)
    assert len(steps) == len(sampler)
    for k in range(3):
        seen = [i for step in steps for i in step[k]]
        assert sorted(seen) == list(range(len(src)))
    orders = [[i for step in steps for i in step[k]] for k in range(3)]
    assert orders[0] != orders[1] != orders[2]
    assert steps == list(MemberBatchSampler(src, tgt, max_tokens=400, seeds=[1, 2, 3], group_seed=9))  # reproducible
    sampler.set_epoch(1)
    assert [s[0] for s in sampler] != [s[0] for s in steps]  # a new epoch, a new order


def test_one_length_schedule_keeps_the_padding_between_members_small():
    src, tgt = lengths()
    grouped = list(MemberBatchSampler(src, tgt, max_tokens=400, seeds=range(8), group_seed=0))
    independent = [list(TokenBucketBatchSampler(src, tgt, 400, shuffle=True, seed=s)) for s in range(8)]
    unrelated = [list(step) for step in zip(*independent)]
    alone = [[batch] for batch in independent[0]]
    assert padded_share(grouped, src, tgt) < 0.25 * padded_share(unrelated, src, tgt)
    assert padded_share(grouped, src, tgt) < padded_share(alone, src, tgt) + 0.1
    same_bucket = list(MemberBatchSampler(src, tgt, max_tokens=400, seeds=range(8), group_seed=0, class_size=1))
    assert padded_share(same_bucket, src, tgt) < padded_share(alone, src, tgt) + 0.01


def test_shared_data_gives_every_member_the_batches_one_run_of_the_group_seed_sees():
    src, tgt = lengths()
    sampler = MemberBatchSampler(src, tgt, max_tokens=400, seeds=[1, 2, 3], group_seed=5, shared=True)
    one_run = TokenBucketBatchSampler(src, tgt, 400, shuffle=True, seed=5)
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        one_run.set_epoch(epoch)
        steps = list(sampler)
        assert [step[0] for step in steps] == list(one_run)
        assert all(step[0] == step[1] == step[2] for step in steps)
    assert padded_share(steps, src, tgt) == padded_share([[b] for b in one_run], src, tgt)

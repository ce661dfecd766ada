"""MemberBatchSampler: each member an epoch of its own, the group one length schedule (little padding between members)."""

from __future__ import annotations

import numpy as np

from ablate.data.batching import TokenBucketBatchSampler
from ablate.data.member_sampler import MemberBatchSampler, length_classes


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
    same_lengths = list(MemberBatchSampler(src, tgt, max_tokens=400, seeds=range(8), group_seed=0, tolerance=0))
    assert padded_share(same_lengths, src, tgt) < padded_share(alone, src, tgt) + 0.01


def same_step_share(steps, pairs: int) -> float:
    """The share of pairs member 0 sees at the same step as member 1."""
    seen = np.full((2, pairs), -1)
    for i, step in enumerate(steps):
        seen[0, step[0]], seen[1, step[1]] = i, i
    return float((seen[0] == seen[1]).mean())


def test_a_wider_length_tolerance_shares_less_of_the_members_data_order_and_pads_more():
    src, tgt = lengths()
    steps = {t: list(MemberBatchSampler(src, tgt, max_tokens=400, seeds=[1, 2], group_seed=0, tolerance=t)) for t in (0, 3, 8)}
    same = {t: same_step_share(s, len(src)) for t, s in steps.items()}
    padded = {t: padded_share(s, src, tgt) for t, s in steps.items()}
    assert same[0] > same[3] > same[8] and padded[0] < padded[3] < padded[8]
    runs = [list(TokenBucketBatchSampler(src, tgt, 400, shuffle=True, seed=s)) for s in (1, 2)]
    assert same_step_share(list(zip(*runs)), len(src)) < 0.02 < same[8]  # independent runs share (almost) nothing


def test_a_length_class_holds_the_buckets_within_the_tolerance_of_its_first():
    src_max, tgt_max = [10, 11, 13, 9, 12, 12, 20], [5, 5, 6, 7, 7, 8, 8]
    assert length_classes(src_max, tgt_max, 0).tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert length_classes(src_max, tgt_max, 1).tolist() == [0, 0, 1, 2, 3, 3, 4]
    assert length_classes(src_max, tgt_max, 3).tolist() == [0, 0, 0, 0, 0, 0, 1]
    src, tgt = lengths()
    sampler = MemberBatchSampler(src, tgt, max_tokens=400, seeds=range(4), group_seed=0, tolerance=2)
    for step in sampler:  # a step's batches differ in their longest sentences by at most the tolerance
        for side in (src, tgt):
            longest = [int(side[batch].max()) for batch in step]
            assert max(longest) - min(longest) <= 2 * 2


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

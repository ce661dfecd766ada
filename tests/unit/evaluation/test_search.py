"""Greedy and beam search: against a hand-set toy model, against full re-decoding, and their limits."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import VOCAB, random_batch, tiny_model

from ablate.evaluation.search import beam_search, greedy_decode, length_penalty
from ablate.model import build_transformer
from ablate.model.tokens import BOS_ID, EOS_ID, PAD_ID

A, B, C = 4, 5, 6


class ToyModel:
    """Next-token log-probs depend only on the previous token: greedy takes A (0.6) and then
    can only end at 0.6 * 0.25; beam search finds B, EOS at 0.4 * 0.9."""

    V = 8

    def __init__(self):
        table = torch.full((self.V, self.V), 1e-9)
        table[BOS_ID, [A, B]] = torch.tensor([0.6, 0.4])
        table[A, [A, B, C, EOS_ID]] = 0.25
        table[B, [EOS_ID, C]] = torch.tensor([0.9, 0.1])
        table[C, EOS_ID] = 1.0
        self.logp = table.log()

    def encode(self, src):
        return torch.zeros(src.size(0), src.size(1), 1), (src != PAD_ID)[:, None, None, :]

    def new_cache(self):
        return [{"self": {}, "cross": {}}]

    def decode(self, tokens, memory, src_mask, cache, start=0):
        return self.logp[tokens[:, -1:]]  # (B, 1, V)


def test_beam_search_beats_greedy_on_toy_model():
    src = torch.tensor([[7, 7, 0]])
    assert greedy_decode(ToyModel(), src)[0][0] == A
    assert beam_search(ToyModel(), src, beam=2, alpha=0.0) == [[B]]


class LimitModel(ToyModel):
    """BOS -> A 0.55 | B 0.45; A -> EOS 0.5 | C 0.45; B -> C 0.9 | EOS 0.1; C -> A 0.99 | EOS 0.01. With beam 2 and a
    limit of 3 tokens, [A] finishes at step 1 (0.275); at step 2 the limit forces EOS on B C (0.405 * 0.01) and A C,
    whose unforced best extensions (B C A, 0.401) would beat [A] if the forced step were scored without the mask."""

    def __init__(self):
        table = torch.full((self.V, self.V), 1e-9)
        table[BOS_ID, [A, B]] = torch.tensor([0.55, 0.45])
        table[A, [EOS_ID, C]] = torch.tensor([0.5, 0.45])
        table[B, [C, EOS_ID]] = torch.tensor([0.9, 0.1])
        table[C, [A, EOS_ID]] = torch.tensor([0.99, 0.01])
        self.logp = table.log()


def test_forced_eos_is_scored_with_its_own_probability():
    src = torch.tensor([[7, 7, 0]])
    assert beam_search(LimitModel(), src, beam=2, alpha=0.0, max_len_a=0.0, max_len_b=3) == [[A]]
    assert beam_search(LimitModel(), src, beam=2, alpha=0.0, max_len_a=0.0, max_len_b=2) == [[A]]  # A's EOS forced at 2


class Float64Model(ToyModel):
    """BOS -> A or B, each then EOS for certain; B's log-prob exceeds A's by 1e-12, which float64 holds and float32
    rounds away (a tie, which keeps A, the first candidate)."""

    def __init__(self):
        table = torch.full((self.V, self.V), 1e-30, dtype=torch.float64).log()
        table[BOS_ID, A] = math.log(0.5)
        table[BOS_ID, B] = math.log(0.5) + 1e-12
        table[A, EOS_ID] = table[B, EOS_ID] = 0.0
        self.logp = table

    def encode(self, src):
        memory, mask = super().encode(src)
        return memory.double(), mask


def test_a_float64_model_s_beams_are_ranked_in_float64():
    assert beam_search(Float64Model(), torch.tensor([[7, 7, 0]]), beam=2, alpha=0.0) == [[B]]


def test_length_penalty_is_gnmt():
    assert length_penalty(1, 0.6) == 1.0
    assert math.isclose(length_penalty(7, 0.6), 2.0**0.6)


def test_a_huge_length_penalty_is_infinite_and_beam_search_still_ends(tiny):
    assert length_penalty(7, 1e308) == math.inf  # Python's float power raises OverflowError; a tensor's gives inf
    model, src = tiny
    assert len(beam_search(model, src, beam=3, alpha=1e308, max_len_a=0.0, max_len_b=5)) == src.size(0)


@pytest.fixture
def tiny():
    model = build_transformer(tiny_model(), VOCAB).eval()
    src, _ = random_batch(b=4, s=6)
    return model, src


def greedy_by_full_forward(model, src, steps):
    """Reference greedy decoding that re-runs the whole decoder every step (no cache)."""
    tokens = torch.full((src.size(0), 1), BOS_ID)
    for _ in range(steps):
        logits = model(src, tokens)[:, -1]
        logits[:, [PAD_ID, BOS_ID]] = float("-inf")
        tokens = torch.cat([tokens, logits.argmax(-1, keepdim=True)], 1)
    return tokens[:, 1:]


def test_greedy_with_cache_equals_full_redecoding(tiny):
    model, src = tiny
    out = greedy_decode(model, src, max_len_a=0.0, max_len_b=6)
    ref = greedy_by_full_forward(model, src, 5).tolist()
    for hyp, row in zip(out, ref):
        expected = row[: row.index(EOS_ID)] if EOS_ID in row else row
        assert hyp == expected


def test_beam_one_is_greedy(tiny):
    model, src = tiny
    assert beam_search(model, src, beam=1) == greedy_decode(model, src)


def test_beam_search_respects_length_limit_and_batch_independence(tiny):
    model, src = tiny
    outs = beam_search(model, src, beam=4, max_len_a=0.0, max_len_b=3)
    assert len(outs) == 4 and all(len(o) <= 2 for o in outs)  # 3 steps including the forced EOS
    full = beam_search(model, src, beam=4)
    # Each row decodes the same alone as in the batch (finished rows leaving the batch must not shift others).
    for i in range(src.size(0)):
        row = src[i : i + 1, : int((src[i] != 0).sum())]
        assert beam_search(model, row, beam=4) == [full[i]]


def test_beam_finds_at_least_greedy_score(tiny):
    model, src = tiny

    def score(src_row, hyp):
        tgt = torch.tensor([[BOS_ID, *hyp]])
        logp = model(src_row, tgt).log_softmax(-1)[0]
        target = torch.tensor([*hyp, EOS_ID])
        return logp[torch.arange(len(target)), target].sum().item()

    for i in range(src.size(0)):
        row = src[i : i + 1]
        g = greedy_decode(model, row)[0]
        b = beam_search(model, row, beam=4, alpha=0.0)[0]
        assert score(row, b) >= score(row, g) - 1e-4

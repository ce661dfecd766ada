"""The rows validation decodes (ablate.data.subset, ablate.evaluation.sentence_scores): the subset mask without reading indices on the host, the rows found on the host
before a batch moves, and decoding with padding columns cut (by a device read or by a width known beforehand)."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest
import torch
from helpers import VOCAB, tiny_model

from ablate.config import ExperimentConfig
from ablate.data.batching import collate
from ablate.data.subset import filled_width, host_rows, row_mask
from ablate.evaluation.search import beam_search
from ablate.evaluation.sentence_scores import decode_rows
from ablate.model import build_transformer
from ablate.model.tokens import PAD_ID


@contextmanager
def host_reads_refused():
    """Inside, a read of a tensor's values by the host (`tolist`, `item`, `int`, `bool`) fails."""

    def refuse(self, *args):
        raise AssertionError("a tensor was read on the host")

    with pytest.MonkeyPatch.context() as patch:
        for name in ("tolist", "item", "__int__", "__bool__", "__index__"):
            patch.setattr(torch.Tensor, name, refuse)
        yield


def test_row_mask_is_subset_membership_without_reading_the_indices():
    idx = torch.tensor([0, 7, 3, 12, 40, 5])  # 12 and 40 lie beyond the largest chosen index
    chosen = frozenset({3, 5, 7, 9})
    with host_reads_refused():
        mask = row_mask(idx, chosen)
    assert mask.dtype == torch.bool and mask.device == idx.device
    torch.testing.assert_close(mask, torch.tensor([False, True, True, False, False, True]))
    torch.testing.assert_close(row_mask(idx, None), torch.ones(6, dtype=torch.bool))
    torch.testing.assert_close(row_mask(idx, frozenset()), torch.zeros(6, dtype=torch.bool))


def batch(lengths: list[int], first: int = 0) -> dict:
    rng = np.random.default_rng(0)
    samples = [(first + i, rng.integers(4, VOCAB, n), rng.integers(4, VOCAB, 3)) for i, n in enumerate(lengths)]
    return collate(samples)


def test_host_rows_are_the_chosen_rows_and_the_columns_they_fill():
    b = batch([9, 3, 5, 4], first=10)  # split indices 10..13
    found = host_rows(b, frozenset({11, 13, 2}))
    assert found["rows"].tolist() == [1, 3] and found["idx"] == [11, 13]
    assert found["width"] == 4  # the longer of rows 1 and 3; the 9-token row is left out
    everything = host_rows(b, None)
    assert everything["idx"] == [10, 11, 12, 13] and everything["width"] == 9
    assert host_rows(b, frozenset({99}))["idx"] == []


def test_filled_width_is_the_last_column_with_a_real_token():
    src = torch.tensor([[5, 6, 0, 0, 0], [0, 0, 7, 0, 0]])
    assert filled_width(src) == 3
    assert filled_width(torch.zeros(2, 4, dtype=torch.long)) == 0
    assert filled_width(torch.zeros(0, 4, dtype=torch.long)) == 0


def test_decode_rows_cuts_padding_columns_and_a_known_width_spares_the_read(monkeypatch):
    cfg = ExperimentConfig(model=tiny_model())
    model = build_transformer(cfg.model, VOCAB).eval()
    b = batch([9, 3, 5, 4])
    found = host_rows(b, frozenset({1, 3}))
    src = b["src"].index_select(0, found["rows"])  # (2, 9): five columns of padding only
    seen = []
    monkeypatch.setattr("ablate.evaluation.sentence_scores.beam_search", lambda model, src, *args: seen.append(src) or [[]] * len(src))
    with host_reads_refused():
        decode_rows(model, src, cfg, width=found["width"])
    assert seen[0].shape == (2, 4) and (seen[0] != PAD_ID).any(0).all()
    monkeypatch.undo()  # the real search
    cut, full = decode_rows(model, src, cfg), beam_search(model, src, cfg.train.beam_size, cfg.train.length_penalty)
    assert cut == full  # padding columns change no hypothesis

"""Holm's correction (ablate.table.holm) against a worked example."""

import numpy as np
import pytest

from ablate.table.holm import holm


def test_holm_worked_example():
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_holm_is_monotone_in_p_and_capped_at_one():
    raw = list(np.random.default_rng(3).uniform(0, 0.6, size=12))
    adj = holm(raw)
    order = np.argsort(raw)
    assert all(np.diff(np.array(adj)[order]) >= 0)
    assert all(a >= r for a, r in zip(adj, raw))
    assert max(adj) <= 1.0 and holm([0.5, 0.6]) == [1.0, 1.0]


def test_holm_skips_rows_without_a_test():
    assert holm([None, 0.01, None, 0.04]) == pytest.approx([None, 0.02, None, 0.04])
    assert holm([0.01, float("nan")])[1] is None
    assert holm([]) == [] and holm([None]) == [None]

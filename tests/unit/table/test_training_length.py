"""Training length within rows (`ablate.table.training_length`): the within-row slope of a score on log2(updates),
against an independent least-squares fit with one dummy per row, and the rows and runs it counts."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats as st
from test_compare import write_runs

from ablate.cli import main
from ablate.table.training_length import lines as training_length_lines
from ablate.table.training_length import training_length


def noisy_rows(slope: float, rng_seed: int = 0, noise: float = 0.4) -> dict:
    rng = np.random.default_rng(rng_seed)
    rows = {}
    for i, updates in enumerate([(8000, 12000, 19500), (4000, 9000, 16000, 20000), (10000, 11000, 15000)]):
        rows[f"r{i}"] = [(u, 20.0 + 3 * i + slope * np.log2(u) + noise * rng.standard_normal()) for u in updates]
    return rows


def dummy_fit(rows: dict) -> tuple[float, float, int]:
    """Slope, its standard error and df, from lstsq on [log2 u, one dummy per row]: the textbook fixed-effects fit."""
    names = list(rows)
    design, ys = [], []
    for i, name in enumerate(names):
        for u, y in rows[name]:
            design.append([np.log2(u), *(float(j == i) for j in range(len(names)))])
            ys.append(y)
    x, y = np.array(design), np.array(ys)
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    df = len(y) - x.shape[1]
    sigma2 = float(np.sum((y - x @ beta) ** 2)) / df
    return float(beta[0]), float(np.sqrt(sigma2 * np.linalg.inv(x.T @ x)[0, 0])), df


def test_the_slope_interval_and_p_match_a_fit_with_a_dummy_per_row():
    rows = noisy_rows(1.2)
    found = training_length(rows)
    slope, se, df = dummy_fit(rows)
    q = st.t.ppf(0.975, df)
    assert found.slope == pytest.approx(slope) and (found.low, found.high) == pytest.approx((slope - q * se, slope + q * se))
    assert found.p == pytest.approx(2 * st.t.sf(abs(slope) / se, df))
    assert (found.runs, found.rows, found.shortest, found.longest) == (10, 3, 4000, 20000)
    assert found.low > 0 and found.p < 0.01


def test_row_effects_drop_out_where_a_pooled_fit_would_reverse_the_sign():
    # The long-trained row scores lower overall (a worse configuration), but within each row longer is better.
    rows = {"good": [(4000, 35.0), (8000, 36.0)], "bad": [(16000, 28.0), (32000, 29.0)], "mid": [(8000, 31.0), (16000, 32.0)]}
    pooled = np.polyfit([np.log2(u) for r in rows.values() for u, _ in r], [y for r in rows.values() for _, y in r], 1)[0]
    found = training_length(rows)
    assert pooled < 0 and found.slope == pytest.approx(1.0) and found.r == pytest.approx(1.0) and found.p < 1e-6


def test_rows_whose_runs_trained_equally_long_or_have_one_run_add_nothing():
    rows = noisy_rows(0.8, rng_seed=1)
    found = training_length(rows)
    more = rows | {"capped": [(20000, 30.0), (20000, 33.0), (20000, 31.0)], "single": [(5000, 12.0)]}
    also = training_length(more)
    assert (also.slope, also.p, also.runs, also.rows) == (found.slope, found.p, found.runs, found.rows)


def test_non_finite_or_missing_values_are_skipped_and_too_few_runs_give_none():
    rows = noisy_rows(0.8, rng_seed=2)
    with_gaps = {k: [*v, (None, 30.0), (9000, float("nan")), (0, 30.0)] for k, v in rows.items()}
    assert training_length(with_gaps) == training_length(rows)
    assert training_length({"a": [(1000, 1.0), (2000, 2.0), (4000, 2.5)]}) is None  # df 1
    assert training_length({"a": [(1000, 1.0), (2000, 2.0)], "b": [(1000, 3.0), (4000, 3.5)]}) is None  # df 1
    assert training_length({"a": [(1000, 1.0), (2000, 2.0), (4000, 2.5)], "b": [(1000, 3.0), (4000, 3.5)]}) is not None
    assert training_length({"a": [(1000, 2.0), (2000, 2.0), (4000, 2.0)], "b": [(1000, 3.0), (4000, 3.0)]}) is None  # flat


def _summary(bleu_slope: float, ppl_slope: float, p: float) -> dict:
    def t(slope):
        return {
            "slope": slope,
            "low": slope - 0.5,
            "high": slope + 0.5,
            "p": p,
            "r": 0.6,
            "runs": 9,
            "rows": 3,
            "shortest": 4000,
            "longest": 20000,
        }

    return {"bootstrap": {"alpha": 0.05}, "training_length": {"bleu": t(bleu_slope), "ppl": t(ppl_slope)}}


def test_the_note_reads_the_direction_per_metric_and_says_when_there_is_no_sign():
    [better] = training_length_lines(_summary(+1.2, -0.4, 0.001))
    assert "9 runs in 3 rows, 4,000-20,000 updates): BLEU +1.20 [+0.70, +1.70] per doubling (r +0.60, p 0.001)" in better
    assert "runs that trained longer scored better (BLEU, PPL), as when a stopping rule ends runs short of convergence" in better
    [worse] = training_length_lines(_summary(-1.2, +0.4, 0.001))
    assert "runs that trained longer scored worse (BLEU, PPL): the rule let some overtrain" in worse
    [none] = training_length_lines(_summary(+1.2, -0.4, 0.2))
    assert "no sign that runs which trained longer scored otherwise" in none
    assert training_length_lines({"bootstrap": {"alpha": 0.05}, "training_length": {"bleu": None, "ppl": None}}) == []


def test_the_table_measures_training_length_from_the_runs_steps(tmp_path):
    longer = {1: 1.0, 2: 0.0, 3: 2.0}  # log2 of the updates over 4,000: 8,000, 4,000, 16,000
    rows = {
        "base": ({}, [(s, 30.0 + d, 5.0 - d / 4) for s, d in longer.items()]),
        "A-h1": ({"model.heads": 1, "model.d_k": 64, "model.d_v": 64}, [(s, 29.0 + d, 5.5 - d / 4) for s, d in longer.items()]),
        "D-ls0.0": ({"train.label_smoothing": 0.0}, [(s, 31.0 + (s == 2), 4.8) for s in longer]),
    }
    training = {(row, s): {"steps": 4000 * 2**d, "stop_reason": "converged"} for row in rows for s, d in longer.items()}
    training |= {("D-ls0.0", s): {"steps": 20000, "stop_reason": "max_steps"} for s in longer}  # equally long: left out
    assert main(["table", str(write_runs(tmp_path / "study", rows, training)), "--out", str(tmp_path / "out")]) == 0
    found = json.loads((tmp_path / "out" / "table3.json").read_text())["training_length"]
    assert found["bleu"]["slope"] == pytest.approx(1.0) and found["ppl"]["slope"] == pytest.approx(-0.25)
    assert (found["bleu"]["runs"], found["bleu"]["rows"], found["bleu"]["shortest"], found["bleu"]["longest"]) == (6, 2, 4000, 16000)
    md = (tmp_path / "out" / "table3.md").read_text()
    assert "Training length within rows" in md and "BLEU +1.00 [+1.00, +1.00] per doubling (r +1.00, p < 0.001)" in md

"""`ablate table` at the edges of its statistics (issue 32, item 11): a seed interval of a bounded score stays in the
score's range, a row with no variance at all is said to have none instead of getting a test, and every tested row
left out of the seed plan says why."""

from __future__ import annotations

import json
import statistics

import pytest
from scipy import stats as st
from table_study import PAPER_AT_SMALL, markdown_rows, references, system, write_run

from ablate.cli import main

OVERRIDES = PAPER_AT_SMALL


def _table(root, *args: str) -> dict:
    out = root / "out"
    assert main(["table", str(root), "--out", str(out), "--boot", "200", *args]) == 0
    md = (out / "table3.md").read_text()
    report = json.loads((out / "table3.json").read_text())
    return {"md": md, "json": report, "rows": {r["row"]: r for r in report["rows"]}, "cells": markdown_rows(md)}


def _t(values: list[float]) -> tuple[float, float, float]:
    mean = statistics.mean(values)
    half = st.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / len(values) ** 0.5
    return mean, mean - half, mean + half


# BLEU near 0 with one seed far above: the t interval reaches below 0 (and PPL's below 1).
NEAR_ZERO = {"base": [(0.5, 1.2), (0.2, 1.1), (4.0, 3.0)], "A-h1": [(0.1, 1.3), (0.3, 1.2), (5.0, 2.5)]}


def test_a_seed_interval_stays_in_the_metrics_range_and_says_it_was_cut(tmp_path):
    for row, seeds in NEAR_ZERO.items():
        for seed, (bleu, ppl) in enumerate(seeds, 1):
            write_run(tmp_path, row, seed, OVERRIDES[row], {"last": {"val/bleu": bleu, "val/ppl": ppl}})
    t = _table(tmp_path)
    base = t["rows"]["base"]
    mean, low, high = _t([b for b, _ in NEAR_ZERO["base"]])
    assert low < 0  # what the t interval alone would print
    assert (base["bleu"]["mean"], base["bleu"]["low"], base["bleu"]["high"]) == pytest.approx((mean, 0.0, high))
    assert base["bleu"]["clipped"] and t["rows"]["A-h1"]["bleu"]["clipped"]
    _, ppl_low, ppl_high = _t([p for _, p in NEAR_ZERO["base"]])
    assert ppl_low < 1 and (base["ppl"]["low"], base["ppl"]["high"]) == pytest.approx((1.0, ppl_high)) and base["ppl"]["clipped"]
    assert t["cells"]["base"]["BLEU [95% CI]"] == f"{mean:.2f} [0.00, {high:.2f}]"
    # A difference may be negative: Δ's interval is Welch's, uncut.
    welch = st.ttest_ind([b for b, _ in NEAR_ZERO["A-h1"]], [b for b, _ in NEAR_ZERO["base"]], equal_var=False).confidence_interval()
    delta = t["rows"]["A-h1"]["bleu"]
    assert delta["delta_low"] < 0 and (delta["delta_low"], delta["delta_high"]) == pytest.approx((welch.low, welch.high))
    note = next(ln for ln in t["md"].splitlines() if ln.startswith("Seed intervals cut at the metric's range"))
    assert "base BLEU and PPL" in note and "A-h1 BLEU and PPL" in note and "read them as rough" in note


def _records(tmp_path, plan: dict[str, list[dict]], refs: list[str]) -> None:
    for row, seeds in plan.items():
        for seed, fields in enumerate(seeds, 1):
            write_run(tmp_path, row, seed, OVERRIDES[row], None, {"valid": {**fields, "references": refs}})


def test_rows_that_score_zero_in_every_run_have_no_variance_and_no_test(tmp_path):
    """A model that learned nothing: no n-gram of any hypothesis is in its reference, in every run of both rows. Their
    NLLs still differ, so PPL is tested as usual."""
    refs = references(60)
    plan = {row: [system(refs, 0.3, first + s) for s in range(3)] for row, first in (("base", 10), ("A-h1", 20))}
    for seeds in plan.values():
        for fields in seeds:
            fields["hypotheses"] = ["nothing learned"] * len(refs)
    _records(tmp_path, plan, refs)
    t = _table(tmp_path)
    bleu = t["rows"]["A-h1"]["bleu"]
    assert bleu["mean"] == 0.0 and bleu["sd"] == 0.0 and (bleu["low"], bleu["high"]) == (None, None)
    assert bleu["delta"] == 0.0 and (bleu["delta_low"], bleu["delta_high"]) == (None, None)
    assert (bleu["p"], bleu["p_holm"], bleu["mde"], bleu["test_low"], bleu["test_high"]) == (None,) * 5 and bleu["se"] == 0.0
    assert bleu["untested"] == "every run of 'A-h1' and of 'base' scores 0.00 BLEU: no variance, no test"
    assert bleu["verdict"] == "inconclusive" and t["rows"]["A-h1"]["ppl"]["p"] is not None and t["rows"]["A-h1"]["ppl"]["delta"] != 0
    cells = t["cells"]["A-h1"]
    assert (cells["BLEU [95% CI]"], cells["ΔBLEU [95% CI]"], cells["paired CI BLEU"]) == ("0.00", "+0.00", "no variance")
    assert (cells["p BLEU"], cells["p Holm BLEU"], cells["MDE BLEU"]) == ("-", "-", "-")
    assert "No paired test ('-') for A-h1: every run of 'A-h1' and of 'base' scores 0.00 BLEU: no variance, no test." in t["md"]
    assert "Noise floor (base row over 3 seeds): BLEU no spread (every seed scores 0.00);" in t["md"]
    assert "No spread over seeds (every run, or member group, the same score, so no interval): base BLEU 0.00, A-h1 BLEU 0.00." in t["md"]
    assert "+0.00, +0.00" not in t["md"] and "0.00 [0.00, 0.00]" not in t["md"]


def test_every_tested_row_left_out_of_the_seed_plan_says_why(tmp_path):
    """A-h1 has 3 seeds as the base has: planned. C-N2 ran one seed (its seed variance is borrowed, not measured),
    base-2x is a control, E-learned has no records (no test): each is named with its reason."""
    refs = references(60)
    plan = {
        "base": [system(refs, 0.3, 10 + s) for s in range(3)],
        "A-h1": [system(refs, 0.5, 20 + s) for s in range(3)],
        "C-N2": [system(refs, 0.2, 30)],
    }
    _records(tmp_path, plan, refs)
    write_run(tmp_path, "base-2x", 1, {"train.max_steps": 16500}, None, {"valid": {**plan["base"][0], "references": refs}})
    write_run(tmp_path, "E-learned", 1, OVERRIDES["E-learned"], {"last": {"val/bleu": 20.0, "val/ppl": 9.0}})
    t = _table(tmp_path)
    rows = t["rows"]
    assert rows["A-h1"]["bleu"]["plan_mde"] == 1.0 and rows["A-h1"]["bleu"]["plan_skipped"] is None
    one_seed = "one seed (or one member group) in the row or in base, so no seed variance measured to plan from"
    assert rows["C-N2"]["bleu"]["plan_skipped"] == one_seed
    assert rows["base-2x"]["bleu"]["plan_skipped"] == "a control, compared with the base's runs of its seeds"
    assert rows["E-learned"]["bleu"]["plan_skipped"] == "no paired test"
    assert rows["base"]["bleu"]["plan_skipped"] is None and all(r["ppl"]["plan_skipped"] is None for r in rows.values())
    line = next(ln for ln in t["md"].splitlines() if ln.startswith("Seeds for an MDE of 1 BLEU"))
    assert line.startswith("Seeds for an MDE of 1 BLEU, per row (the base keeping its 3 where it has more; Holm over the 2 tested rows)")
    assert (
        f"not planned: base-2x (a control, compared with the base's runs of its seeds); C-N2 ({one_seed}); "
        "E-learned (no paired test)." in line
    )

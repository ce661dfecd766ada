"""Controls (`ablate.table.controls`): a row on another basis than the base's is compared with the base's runs of
its own seeds, tested in a Holm family of its own, and given no verdict against the paper."""

from __future__ import annotations

import json

import pytest
from table_study import markdown_rows, references, system, write_run

from ablate.cli import main
from ablate.paper import TABLE3
from ablate.table.compare import make_table
from ablate.table.controls import find_controls
from ablate.table.load import runs_from_dirs
from ablate.table.stats import holm

OVERRIDES = {p.name: p.overrides for p in TABLE3}
RULE, LONGER = "to convergence, last-5 average", "at most max_steps 16500, last-5 average"


def _study(root, control_seed=2, base_basis=RULE):
    """Base and two ablations over seeds 1-3; base-2x, one seed, outputs identical to the base's run of that seed
    (where the base has it), on the LONGER basis."""
    refs = references(150)
    base = {s: system(refs, 0.3, 10 + s) for s in (1, 2, 3)}
    plan = {
        "base": base,
        "A-h4": {s: system(refs, 0.6, 20 + s) for s in (1, 2, 3)},
        "A-h1": {s: system(refs, 0.3, 30 + s) for s in (1, 2, 3)},
    }
    for row, seeds in plan.items():
        for seed, fields in seeds.items():
            basis = base_basis if row == "base" else RULE
            write_run(
                root,
                row,
                seed,
                OVERRIDES.get(row),
                {"last": {"val/bleu": 1.0, "val/ppl": 9.0}, "basis": basis},
                {"valid": {**fields, "references": refs}},
            )
    control = base.get(control_seed) or system(refs, 0.3, 99)
    write_run(
        root,
        "base-2x",
        control_seed,
        {"train.max_steps": 16500},
        {"last": {"val/bleu": 1.0, "val/ppl": 9.0}, "basis": LONGER},
        {"valid": {**control, "references": refs}},
    )
    return root


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = _study(tmp_path_factory.mktemp("study"))
    out = root / "out"
    assert main(["table", str(root), "--out", str(out)]) == 0
    data = json.loads((out / "table3.json").read_text())
    return {"rows": {r["row"]: r for r in data["rows"]}, "json": data, "md": (out / "table3.md").read_text()}


def test_a_control_is_compared_with_the_base_run_of_its_own_seed(report):
    rows = report["rows"]
    control, base = rows["base-2x"]["bleu"], rows["base"]["bleu"]
    assert control["mean"] != pytest.approx(base["mean"])  # against all the base's seeds, Δ would not be 0
    # The same outputs as the base's run of seed 2: no difference at all, though seed 2 is not the base's mean.
    assert control["delta"] == 0.0 and control["p"] == 1.0 and control["test_low"] == 0.0 == control["test_high"]
    assert rows["base-2x"]["ppl"]["delta"] == pytest.approx(0.0, abs=1e-9)
    assert report["json"]["controls"] == {"base-2x": {"seeds": [2], "base_seeds": [2]}}


def test_a_control_is_tested_apart_from_the_ablations_and_has_no_verdict(report):
    rows = report["rows"]
    ablations = [rows["A-h4"]["bleu"], rows["A-h1"]["bleu"]]
    assert [a["p_holm"] for a in ablations] == pytest.approx(holm([a["p"] for a in ablations]))  # m = 2, not 3
    assert rows["base-2x"]["bleu"]["p_holm"] == rows["base-2x"]["bleu"]["p"]  # a family of one
    assert rows["base-2x"]["control"] and not rows["A-h4"]["control"]
    assert rows["base-2x"]["bleu"]["verdict"] is None and rows["A-h4"]["bleu"]["verdict"] == "disagree"  # paper: -0.3
    counts = report["json"]["verdicts"]["bleu"]
    assert sum(counts["overall"].values()) == 2 and "base-variants" not in counts["by_group"]
    assert markdown_rows(report["md"])["base-2x"]["verdict BLEU"] == "control"
    assert f"Controls, on another basis than the base's ({RULE}): base-2x against the base's run of seed 2." in report["md"]


def test_seed_luck_leaves_the_control_out(report):
    assert report["json"]["seed_luck"]["bleu"]["runs"] == 6  # A-h4's and A-h1's 3 seeds each


def test_a_control_whose_seed_the_base_lacks_is_compared_with_the_whole_base(tmp_path):
    table = make_table(runs_from_dirs(_study(tmp_path, control_seed=7)))
    assert table.summary["controls"] == {"base-2x": {"seeds": [7], "base_seeds": [1, 2, 3]}}
    control = next(ln for ln in table.lines if ln["row"] == "base-2x")["bleu"]
    base = next(ln for ln in table.lines if ln["row"] == "base")["bleu"]
    assert control["delta"] == pytest.approx(control["mean"] - base["mean"])


def test_without_a_basis_recorded_by_the_base_no_row_is_a_control(tmp_path):
    table = make_table(runs_from_dirs(_study(tmp_path, base_basis=None)))
    assert find_controls(table.rows, table.base) == {} and table.summary["controls"] == {}
    assert all(not ln["control"] for ln in table.lines)

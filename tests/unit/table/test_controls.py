"""Controls (`ablate.table.controls`): a `base-…` row is compared with the base's runs of its own seeds, tested in a
Holm family of its own, and given no verdict against the paper; other rows stay ablations whatever basis they record."""

from __future__ import annotations

import json

import pytest
from power import rejection_rate
from sacrebleu.metrics import BLEU
from table_study import PAPER_AT_SMALL, markdown_rows, references, system, write_run

from ablate.cli import main
from ablate.table.compare import make_table
from ablate.table.finished_runs import runs_from_dirs
from ablate.table.holm import holm

OVERRIDES = PAPER_AT_SMALL
RULE, LONGER = "to convergence, last-5 average", "at most max_steps 16500, last-5 average"


def _longer(run: dict, refs: list[str], k: int = 15) -> dict:
    """The base's run trained on: the first k sentences now copied from the reference, at a copied sentence's NLL."""
    out = {key: list(v) for key, v in run.items()}
    out["hypotheses"][:k], out["nll"][:k] = refs[:k], [float(t) for t in run["tokens"][:k]]
    return out


def _study(root, control_seeds=(2,), records=True, a_h1_basis=RULE):
    """Base and two ablations over seeds 1-3; base-2x with outputs the base's run of each of its seeds would give
    trained on (`_longer`; another system where the base lacks the seed), on the LONGER basis."""
    refs = references(150)
    base = {s: system(refs, 0.3, 10 + s) for s in (1, 2, 3)}
    plan = {
        "base": base,
        "A-h4": {s: system(refs, 0.6, 20 + s) for s in (1, 2, 3)},
        "A-h1": {s: system(refs, 0.3, 30 + s) for s in (1, 2, 3)},
        "base-2x": {s: _longer(base[s], refs) if s in base else system(refs, 0.3, 90 + s) for s in control_seeds},
    }
    basis = {"A-h1": a_h1_basis, "base-2x": LONGER}
    for row, seeds in plan.items():
        for seed, fields in seeds.items():
            summary = {"last": {"val/bleu": 1.0, "val/ppl": 9.0}, "basis": basis.get(row, RULE)}
            kept = {"valid": {**fields, "references": refs}} if records or row != "base-2x" else None
            overrides = {"train.max_steps": 16500} if row == "base-2x" else OVERRIDES.get(row)
            write_run(root, row, seed, overrides, summary, kept)
    return root


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = _study(tmp_path_factory.mktemp("study"))
    out = root / "out"
    assert main(["table", str(root), "--out", str(out)]) == 0
    data = json.loads((out / "table3.json").read_text())
    refs = references(150)
    base = {s: system(refs, 0.3, 10 + s) for s in (1, 2, 3)}
    return {"rows": {r["row"]: r for r in data["rows"]}, "json": data, "md": (out / "table3.md").read_text(), "refs": refs, "base": base}


def test_a_control_is_compared_with_the_base_run_of_its_own_seed(report):
    rows = report["rows"]
    control, base = rows["base-2x"]["bleu"], rows["base"]["bleu"]
    seed2 = BLEU().corpus_score(report["base"][2]["hypotheses"], [report["refs"]]).score
    # Against the base's run of seed 2, which it continues: Δ is what the 15 sentences it now copies gained.
    assert control["delta"] == pytest.approx(control["mean"] - seed2) and control["delta"] > 0
    assert control["delta"] != pytest.approx(control["mean"] - base["mean"])  # not against the mean of all seeds
    assert control["test_low"] < control["delta"] < control["test_high"] and control["p"] < 0.05
    assert rows["base-2x"]["ppl"]["delta"] < 0
    assert report["json"]["controls"] == {"base-2x": {"seeds": [2], "base_seeds": [2]}}


def test_a_control_is_tested_apart_from_the_ablations_and_has_no_verdict(report):
    rows = report["rows"]
    ablations = [rows["A-h4"]["bleu"], rows["A-h1"]["bleu"]]
    assert [a["p_holm"] for a in ablations] == pytest.approx(holm([a["p"] for a in ablations]))  # m = 2, not 3
    for a in ablations:  # the MDE at the ablations' level, alpha / 2
        assert rejection_rate(a["mde"] / a["se"], a["df"], m=2) == pytest.approx(0.8, abs=1e-6)
    assert rows["base-2x"]["bleu"]["p_holm"] == rows["base-2x"]["bleu"]["p"]  # a family of one
    assert rows["base-2x"]["control"] and not rows["A-h4"]["control"]
    assert rows["base-2x"]["bleu"]["verdict"] is None and rows["A-h4"]["bleu"]["verdict"] == "disagree"  # paper: -0.3
    counts = report["json"]["verdicts"]["bleu"]
    assert sum(counts["overall"].values()) == 2 and "base-variants" not in counts["by_group"]
    assert markdown_rows(report["md"])["base-2x"]["verdict BLEU"] == "control"
    md = report["md"]
    assert "Controls (base-... rows, the base trained otherwise): base-2x against the base's run of seed 2." in md
    assert (
        "Holm over the 2 tested rows" in md
        and "Tested on sentence noise only (one seed, or one member group, there and in base, so no seed variance to add): base-2x" in md
    )


def test_seed_luck_leaves_the_control_out(report):
    assert report["json"]["seed_luck"]["bleu"]["runs"] == 6  # A-h4's and A-h1's 3 seeds each


def test_a_control_of_several_seeds_is_compared_with_the_base_runs_of_those_seeds(tmp_path):
    table = make_table(runs_from_dirs(_study(tmp_path, control_seeds=(1, 3))))
    assert table.summary["controls"] == {"base-2x": {"seeds": [1, 3], "base_seeds": [1, 3]}}
    control = next(ln for ln in table.lines if ln["row"] == "base-2x")["bleu"]
    # Without the records, the summaries' scores: every run says 1.0, so no spread and no interval.
    assert control["delta"] == 0.0 and control["delta_low"] is None is control["delta_high"]


def test_a_control_whose_seed_the_base_lacks_is_compared_with_the_whole_base(tmp_path):
    table = make_table(runs_from_dirs(_study(tmp_path, control_seeds=(7,))))
    assert table.summary["controls"] == {"base-2x": {"seeds": [7], "base_seeds": [1, 2, 3]}}
    control = next(ln for ln in table.lines if ln["row"] == "base-2x")["bleu"]
    base = next(ln for ln in table.lines if ln["row"] == "base")["bleu"]
    assert control["delta"] == pytest.approx(control["mean"] - base["mean"])


def test_a_control_without_records_says_why_it_has_no_test(tmp_path):
    out = tmp_path / "out"
    assert main(["table", str(_study(tmp_path, records=False)), "--out", str(out)]) == 0
    md = (out / "table3.md").read_text()
    assert "No paired test ('-') for base-2x: 1 of 1 runs of 'base-2x' saved no eval/valid.json" in md


def test_a_row_on_another_basis_is_still_an_ablation(tmp_path):
    """A Table 3 row the sweep excepts from the basis (big, its own 300K steps) keeps its verdict and its place."""
    table = make_table(runs_from_dirs(_study(tmp_path, a_h1_basis=LONGER)))
    assert set(table.controls) == {"base-2x"}
    line = next(ln for ln in table.lines if ln["row"] == "A-h1")
    assert not line["control"] and line["bleu"]["verdict"] is not None


def test_the_reading_lines_speak_of_controls_only_where_there_are_some(report, tmp_path):
    assert "p Holm: corrected over all rows of the metric but the controls, which are corrected apart;" in report["md"]
    out = tmp_path / "out"
    assert main(["table", str(_study(tmp_path, control_seeds=())), "--out", str(out)]) == 0
    md = (out / "table3.md").read_text()
    assert "p Holm: corrected over all rows of the metric;" in md and "control" not in md


def test_find_controls_pairs_each_control_with_the_base_runs_it_can_be_paired_with():
    """`ablate.table.controls` on rows alone: a control's seeds all in the base -> those base runs; a seed the base
    lacks -> the whole base; an ablation row (another group) is no control."""
    from types import SimpleNamespace

    from ablate.config.paper import BASE_VARIANTS
    from ablate.table.compare import Row
    from ablate.table.controls import find_controls, seeds_of

    def runs(*seeds):
        return [SimpleNamespace(config={"seed": s}) for s in seeds]

    base = Row("base", "base", runs(3, 1, 2))
    paired, unpaired = Row("base-2x", BASE_VARIANTS, runs(2, 1)), Row("base-long", BASE_VARIANTS, runs(4))
    controls = find_controls([base, paired, unpaired, Row("A-h1", "A", runs(1))], base)
    assert set(controls) == {"base-2x", "base-long"}
    assert seeds_of(controls["base-2x"]) == [1, 2] and controls["base-2x"].name == "base"
    assert controls["base-long"] is base
    assert seeds_of(base) == [1, 2, 3] and len(base.runs) == 3  # the base itself untouched

"""Rows at equal updates (`ablate table --at-update N`): the curves read from metrics.csv and resumed attempts, Welch's
test against the base, Holm, the verdict against the paper, and the errors that name what is wrong."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats as st
from test_compare import write_runs

from ablate.cli import main
from ablate.table.equal_updates import at_update, curve, to_markdown
from ablate.table.finished_runs import runs_from_dirs
from ablate.table.holm import holm

HEADER = "epoch,step,train/loss,val/loss,val/ppl\n"
PPL = {  # row -> seed -> val/ppl after update 1,000
    "base": {1: 7.0, 2: 7.2, 3: 7.1},
    "A-h1": {1: 6.5, 2: 6.55, 3: 6.45},  # better: against the paper's +0.37
    "A-h32": {1: 8.1, 2: 8.4, 3: 8.2},  # worse, as the paper's +0.09
    "E-learned": {1: 7.05, 2: 7.2, 3: 7.1},  # the paper: no change
    "base-2x": {2: 7.2},
}
OVERRIDES = {"A-h1": {"model.heads": 1, "model.d_k": 64, "model.d_v": 64}, "A-h32": {"model.heads": 32, "model.d_k": 2, "model.d_v": 2}}
OVERRIDES |= {"E-learned": {"model.positional": "learned"}, "base-2x": {"train.max_steps": 2000}}


def study(root, ppl=PPL, overrides=OVERRIDES):
    rows = {row: (overrides.get(row, {}), [(s, 30.0, 6.0) for s in seeds]) for row, seeds in ppl.items()}
    write_runs(root, rows, {(row, s): {"steps": 1000} for row, seeds in ppl.items() for s in seeds})
    for row, seeds in ppl.items():
        for seed, ppl in seeds.items():
            # logged at step 999, i.e. after update 1,000; an earlier validation the comparison must not pick
            (root / "trials" / f"{row}-s{seed}" / "metrics.csv").write_text(HEADER + f"1,499,3.1,2.5,{ppl + 2}\n1,999,3.0,2.4,{ppl}\n")
    return root


def test_a_curve_joins_resumed_attempts_the_later_winning_and_counts_updates_from_one(tmp_path):
    (tmp_path / "metrics.csv").write_text(HEADER + "0,249,4,3,9.0\n0,499,4,3,8.0\n0,250,4,,\n")
    for attempt, rows in ((1, "0,499,4,3,7.5\n0,749,4,3,7.0\n"), (10, "0,749,4,3,6.5\n"), (9, "0,749,4,3,6.9\n0,999,4,3,6.0\n")):
        (tmp_path / f"resume-{attempt}").mkdir()
        (tmp_path / f"resume-{attempt}" / "metrics.csv").write_text(HEADER + rows)
    # resume-10 after resume-9; resume-10 restarted before update 1,000, so resume-9's value there was thrown away
    assert curve(tmp_path, "val/ppl") == {250: 9.0, 500: 7.5, 750: 6.5}


def test_the_final_weights_evaluation_and_anything_past_the_runs_end_are_not_on_the_curve(tmp_path):
    # validations after updates 250 and 500, then the last-5 average evaluated at the run's last step (500)
    (tmp_path / "metrics.csv").write_text(HEADER + "0,249,4,3,9.0\n0,499,4,3,8.0\n0,500,4,3,7.7\n")
    assert curve(tmp_path, "val/ppl", last_update=500) == {250: 9.0, 500: 8.0}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (HEADER + "0,249,4,3,9.0\n0,499,4,3,abc\n", r", line 3: val/ppl='abc' is not a number"),
        (HEADER + "0,249,4,3,9.0\n0,499,4,3,nan\n", r", line 3: val/ppl=nan at step '499' is not a finite number"),
        (HEADER + "0,249,abc,3,9.0\n", r", line 2: train/loss='abc' is not a number"),  # a column not compared too
        (HEADER + "0,249,1e999,3,9.0\n", r", line 2: train/loss='1e999' is not a number"),  # no float writes that
        (HEADER + "0,249,4,3,9.0\n0,499,4", r": cut short"),
        ("", r": cut short"),
        (HEADER + "0,249,4,3,9.0,1,2\n", r", line 2: 7 cells under a header of 5"),
        ("0,249,4,3,9.0\n0,499,4,3,8.0\n", r", line 1: numbers where the header"),
    ],
    ids=["value-text", "value-nan", "other-column-text", "other-column-overflow", "cut", "empty", "ragged", "no-header"],
)
def test_a_damaged_metrics_file_names_its_file_and_line(tmp_path, text, says):
    """Read leniently, each of these passed for a run that logged no validation at the update compared."""
    (tmp_path / "metrics.csv").write_text(text)
    with pytest.raises(ValueError, match=rf"metrics.csv{says}"):
        curve(tmp_path, "val/ppl")


def test_a_metrics_file_that_is_not_utf8_names_its_file(tmp_path):
    (tmp_path / "metrics.csv").write_bytes(HEADER.encode() + b"0,249,4,3,9.\xff\n")
    with pytest.raises(ValueError, match=r"metrics.csv: not a metrics file \(invalid UTF-8 at byte 51\)"):
        curve(tmp_path, "val/ppl")


def test_inf_as_lightning_spells_it_is_a_number(tmp_path):
    (tmp_path / "metrics.csv").write_text(HEADER + "0,249,inf,3,9.0\n")
    assert curve(tmp_path, "val/ppl") == {250: 9.0}


def test_rows_are_tested_against_the_base_by_welch_with_holm_and_a_verdict(tmp_path):
    result = at_update(runs_from_dirs(study(tmp_path)), 1000)
    rows = {ln["row"]: ln for ln in result["rows"]}
    base = list(PPL["base"].values())
    for row in ("A-h1", "A-h32", "E-learned"):
        test = st.ttest_ind(list(PPL[row].values()), base, equal_var=False)
        ci = test.confidence_interval()
        assert rows[row]["delta"] == pytest.approx(np.mean(list(PPL[row].values())) - np.mean(base))
        assert (rows[row]["low"], rows[row]["high"], rows[row]["p"]) == pytest.approx((ci.low, ci.high, test.pvalue))
    tested = ["A-h1", "A-h32", "E-learned"]
    assert [rows[r]["p_holm"] for r in tested] == pytest.approx(holm([rows[r]["p"] for r in tested]))
    assert rows["A-h1"]["paper_delta"] == pytest.approx(0.37) and rows["A-h1"]["verdict"] == "disagree"
    assert rows["A-h32"]["verdict"] == "agree" and rows["E-learned"]["verdict"] == "paper: no change"
    assert rows["base-2x"]["control"] and "p" not in rows["base-2x"]  # a control is not tested
    assert result["base"]["mean"] == pytest.approx(7.1) and result["base"]["seeds"] == 3
    assert [ln["row"] for ln in result["rows"]] == ["base", "base-2x", "A-h1", "A-h32", "E-learned"]  # Table 3's order


def test_rows_whose_runs_all_score_alike_have_no_variance_and_no_test(tmp_path):
    """Every run of the base at PPL 7.0 and of A-h1 at 6.0 after update 1,000: Welch's se is 0, which made p 0 and a
    verdict out of no measured spread at all; instead no interval, no test, inconclusive, and the page says why."""
    result = at_update(runs_from_dirs(study(tmp_path, {"base": {1: 7.0, 2: 7.0, 3: 7.0}, "A-h1": {1: 6.0, 2: 6.0, 3: 6.0}})), 1000)
    row = next(ln for ln in result["rows"] if ln["row"] == "A-h1")
    assert row["delta"] == -1.0 and (row["low"], row["high"]) == (None, None) and "p" not in row and "p_holm" not in row
    assert row["verdict"] == "inconclusive"
    md = to_markdown(result)
    assert "| A-h1 | 3 | 6.00 | 0.00 | -1.00 |  |  | +0.37 | inconclusive |" in md
    assert "Not tested, no variance (every run of the row and of the base the same there): A-h1." in md


def test_a_row_whose_runs_did_not_get_there_is_untested_and_a_partial_row_is_flagged(tmp_path):
    root = study(tmp_path)
    for seed in (1, 2):  # two of A-h32's runs stopped after 500 updates
        (root / "trials" / f"A-h32-s{seed}" / "metrics.csv").write_text(HEADER + "1,499,3.1,2.5,9.0\n")
        summary = root / "trials" / f"A-h32-s{seed}" / "summary.json"
        summary.write_text(json.dumps(json.loads(summary.read_text()) | {"steps": 500}))
    (root / "trials" / "E-learned-s3" / "metrics.csv").write_text(HEADER + "1,499,3.1,2.5,9.0\n")  # another cadence
    summary = root / "trials" / "base-s3" / "summary.json"  # one base run stopped early: the rest are a selection
    summary.write_text(json.dumps(json.loads(summary.read_text()) | {"steps": 500}))
    (root / "trials" / "base-s3" / "metrics.csv").write_text(HEADER + "1,499,3.1,2.5,9.0\n1,500,3.1,2.5,8.8\n")
    result = at_update(runs_from_dirs(root), 1000)
    rows = {ln["row"]: ln for ln in result["rows"]}
    assert (rows["A-h32"]["seeds"], rows["A-h32"]["seeds_there"], rows["A-h32"]["stopped_before"]) == (1, [3], [1, 2])
    assert "p" not in rows["A-h32"] and rows["A-h32"]["verdict"] == "inconclusive"  # untested, as the table counts it
    assert rows["base"]["seeds_there"] == [1, 2] and rows["E-learned"]["seeds_there"] == [1, 2]
    assert len([ln for ln in result["rows"] if "p_holm" in ln]) == 2  # Holm over the two rows tested
    md = to_markdown(result)
    assert "Not tested, fewer than 2 runs there: A-h32 (1 of 3)." in md
    assert "Compared on part of their runs, the others having stopped before update 1,000: base (seed 3)." in md
    assert "logged no validation there (another cadence): E-learned." in md
    for seed in (1, 2):  # and the base too: nothing can be tested
        (root / "trials" / f"base-s{seed}" / "metrics.csv").write_text(HEADER + "1,499,3.1,2.5,9.0\n")
    result = at_update(runs_from_dirs(root), 1000)
    assert not any("p" in ln for ln in result["rows"]) and "Not tested: the base has 0 runs there" in to_markdown(result)


def test_the_cli_prints_and_writes_the_comparison(tmp_path, capsys):
    root = study(tmp_path / "study")
    assert main(["table", str(root), "--at-update", "1000", "--out", str(tmp_path / "out"), "--name", "t"]) == 0
    printed = capsys.readouterr().out
    md = (tmp_path / "out" / "t-at-1000.md").read_text()
    assert md in printed and "# val/ppl after update 1,000, against the base" in md
    assert "| A-h32 | 3 | 8.23 | 0.15 | +1.13 [" in md and "| +0.09 | agree |" in md and "| base-2x | 1 | 7.20 | - |" in md
    assert json.loads((tmp_path / "out" / "t-at-1000.json").read_text())["update"] == 1000
    args = ["table", str(root), "--at-update", "1000", "--out", str(tmp_path / "out"), "--name", "t", "--title", "other"]
    assert main(args) == 2  # another title: the page would change, and is not replaced without --force
    assert "t-at-1000.md already there with other content and would be replaced" in capsys.readouterr().err
    assert (tmp_path / "out" / "t-at-1000.md").read_text() == md
    assert main([*args, "--force"]) == 0 and (tmp_path / "out" / "t-at-1000.md").read_text().startswith("# other")
    # its outputs go where the full table's may: not into a run of the study (evidence), nor over a link
    run = next(p.parent for p in root.rglob("summary.json"))
    assert main(["table", str(root), "--at-update", "1000", "--out", str(run.parent.parent / "elsewhere" / "x"), "--name", "t"]) == 0
    capsys.readouterr()
    other = study(tmp_path / "other")
    into = next(p.parent for p in other.rglob("summary.json"))
    assert main(["table", str(root), "--at-update", "1000", "--out", str(into)]) == 2
    assert "inside" in capsys.readouterr().err and not list(into.glob("table3-at-*"))


def test_bad_requests_say_what_is_wrong(tmp_path, capsys):
    runs = runs_from_dirs(study(tmp_path))
    with pytest.raises(ValueError, match="at least 1, got 0"):
        at_update(runs, 0)
    with pytest.raises(
        ValueError, match="--at-update 1100: no run logged val/ppl after update 1,100; the nearest logged updates are 500, 1,000"
    ):
        at_update(runs, 1100)
    with pytest.raises(ValueError, match=r"--metric val/bleu: no run logged val/bleu; .*metrics.csv has the columns \['epoch', 'step'"):
        at_update(runs, 1000, "val/bleu")
    with pytest.raises(ValueError, match="expected a validation metric"):
        at_update(runs, 1000, "speed/step_ms")
    with pytest.raises(ValueError, match="no 'base' row among the runs"):
        at_update([r for r in runs if r.row != "base"], 1000)
    runs[0].run_dir = None
    with pytest.raises(ValueError, match="W&B run files hold no metrics.csv"):
        at_update(runs, 1000)
    for args, says in (
        (["--at-update", "1000", "--split", "test"], "--split test and --wandb do not apply"),
        (["--metric", "val/bleu"], "--metric goes with --at-update"),
    ):
        assert main(["table", str(tmp_path), *args, "--out", str(tmp_path / "out")]) != 0
        assert says in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_at_equal_updates_a_row_that_is_not_the_paper_row_of_its_name_gets_no_paper_delta(tmp_path):
    result = at_update(runs_from_dirs(study(tmp_path, overrides=OVERRIDES | {"A-h32": {"model.attention": "additive"}})), 1000)
    rows = {ln["row"]: ln for ln in result["rows"]}
    assert "paper_delta" not in rows["A-h32"] and "verdict" not in rows["A-h32"] and rows["A-h1"]["verdict"] == "disagree"
    assert "row 'A-h32' is not compared with the paper's row of its name: it changes model.attention" in to_markdown(result)

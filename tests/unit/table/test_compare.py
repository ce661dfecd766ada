"""`ablate table` from run directories' summaries: Table 3 layout, seed intervals, deltas, paper columns and verdicts.

With no per-sentence eval records no row gets a paired test, so every verdict is inconclusive; the statistics on
records are tested in test_row_tests.py."""

from __future__ import annotations

import csv
import json
import statistics

import pytest
from scipy import stats as st
from table_study import SMALL, config_text, write_run

from ablate.cli import main
from ablate.table.compare import make_table
from ablate.table.finished_runs import runs_from_dirs

# row -> overrides, [(seed, bleu, ppl)]
ROWS = {
    "base": ({}, [(1, 30.0, 5.0), (2, 32.0, 4.0)]),  # mean BLEU 31, PPL 4.5
    "A-h1": ({"model.heads": 1, "model.d_k": 64, "model.d_v": 64}, [(1, 29.0, 5.5), (2, 30.0, 5.0)]),  # paper: BLEU down, PPL up
    "C-N2": ({"model.enc_layers": 2, "model.dec_layers": 2}, [(1, 33.0, 4.0)]),  # paper: BLEU down, PPL up -> both wrong
    "D-ls0.0": ({"train.label_smoothing": 0.0}, [(1, 30.0, 4.0)]),  # paper: BLEU down, PPL down -> both right
}


def header_line(md: str) -> str:
    return next(line for line in md.split("\n") if line.startswith("| row |"))


def write_runs(root, rows=ROWS, training=None):
    """`training`: (row, seed) -> extra summary fields (steps, stop_reason, ...)."""
    for row, (overrides, seeds) in rows.items():
        for seed, bleu, ppl in seeds:
            flat = {**SMALL, **overrides, "seed": seed, "sweep.study": "t", "sweep.row": row}
            out = root / "trials" / f"{row}-s{seed}"
            out.mkdir(parents=True)
            (out / "config.yaml").write_text(config_text(flat))  # to_yaml(load_config(...)), composed once a config
            summary = {
                "last": {"val/bleu": bleu, "val/ppl": ppl},
                "params": {"total": 1_000_000 + seed},
                "speed/tokens_per_s": 1000.0 * seed,
                "speed/step_ms": 100.0,
                **(training or {}).get((row, seed), {}),
            }
            (out / "summary.json").write_text(json.dumps(summary))
    return root


def test_rows_in_paper_order_with_changed_columns_seed_stats_and_deltas(tmp_path):
    table = make_table(runs_from_dirs(write_runs(tmp_path)))
    lines = {ln["row"]: ln for ln in table.lines}
    assert [ln["row"] for ln in table.lines] == ["base", "A-h1", "C-N2", "D-ls0.0"]
    base = lines["base"]["bleu"]
    half = st.t.ppf(0.975, 1) * statistics.stdev([30, 32]) / 2**0.5
    assert (base["mean"], base["n"]) == (31.0, 2) and base["sd"] == pytest.approx(statistics.stdev([30, 32]))
    assert (base["low"], base["high"]) == pytest.approx((31 - half, 31 + half))
    assert lines["A-h1"]["h"] == 1 and lines["A-h1"]["d_k"] == 64 and lines["A-h1"]["d_model"] == ""  # only what changed
    assert lines["C-N2"]["N"] == 2 and lines["C-N2"]["h"] == ""
    assert (lines["base"]["d_model"], lines["base"]["h"], lines["base"]["d_k"], lines["base"]["N"]) == (64, 4, 16, 3)  # stated in full
    assert lines["D-ls0.0"]["eps_ls"] == 0.0
    assert lines["A-h1"]["bleu"]["delta"] == pytest.approx(-1.5) and lines["A-h1"]["ppl"]["delta"] == pytest.approx(0.75)
    welch = st.ttest_ind([29, 30], [30, 32], equal_var=False).confidence_interval()
    assert (lines["A-h1"]["bleu"]["delta_low"], lines["A-h1"]["bleu"]["delta_high"]) == pytest.approx((welch.low, welch.high))
    assert lines["A-h1"]["bleu"]["paper"] == 24.9 and lines["A-h1"]["bleu"]["paper_delta"] == -0.9
    assert lines["C-N2"]["seeds"] == 1 and lines["C-N2"]["bleu"]["sd"] is None and lines["C-N2"]["bleu"]["low"] is None
    assert lines["base"]["tokens_per_s"] == 1500.0


def test_without_records_rows_are_untested_and_inconclusive_and_ranks_correlate(tmp_path):
    table = make_table(runs_from_dirs(write_runs(tmp_path)))
    for line in table.lines[1:]:
        assert line["bleu"]["p"] is None and line["bleu"]["verdict"] == line["ppl"]["verdict"] == "inconclusive"
    s = table.summary
    assert s["verdicts"]["bleu"]["overall"]["inconclusive"] == 3 and s["verdicts"]["bleu"]["by_group"]["C"]["inconclusive"] == 1
    assert s["noise_floor"]["bleu"]["sd"] == pytest.approx(statistics.stdev([30, 32])) and s["runs_with_eval_records"] == 0
    # ours BLEU: base 31, A 29.5, C 33, D 30; paper: 25.8, 24.9, 23.7, 25.3 -> ranks (3,1,4,2) vs (4,2,1,3)
    sp = s["spearman"]["bleu"]
    assert sp["rho"] == pytest.approx(1 - 6 * (1 + 1 + 9 + 1) / (4 * 15)) and sp["rows"] == 4
    assert sp["low"] <= sp["rho"] <= sp["high"]


def test_how_long_each_row_trained_and_why_it_stopped(tmp_path, capsys):
    def ran(steps, reason):
        return {"steps": steps, "epochs": steps // 100, "flops": steps * 1e12, "wall_seconds": steps * 0.6, "stop_reason": reason}

    training = {("base", 1): ran(3000, "converged"), ("base", 2): ran(4000, "converged"), ("A-h1", 1): ran(5000, "converged")}
    training |= {("A-h1", 2): ran(6000, "max_steps"), ("C-N2", 1): ran(2000, "converged"), ("D-ls0.0", 1): ran(2500, "max_time")}
    root = write_runs(tmp_path / "study", training=training)
    lines = {ln["row"]: ln for ln in make_table(runs_from_dirs(root)).lines}
    assert (lines["base"]["updates"], lines["base"]["epochs"], lines["base"]["flops"]) == (3500, 35, 3.5e15)
    assert (lines["base"]["stopped"], lines["A-h1"]["stopped"]) == ("converged", "converged 1, max_steps 1")
    assert main(["table", str(root), "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "table3.md").read_text()
    head = header_line(md)
    assert all(f"| {h} |" in head for h in ("updates", "epochs", "PFLOP", "wall min", "stopped"))
    assert "| 5,500 | 55.00 | 5.50 | 55.0 | converged 1, max_steps 1 |" in md  # A-h1: means over its 2 runs; epochs as summaries have them
    assert "Training time: 3.8 h summed over 6 runs." in md  # (3000 + 4000 + 5000 + 6000 + 2000 + 2500) * 0.6 s
    # Runs that recorded none of it (written before these fields existed) show no such columns.
    assert main(["table", str(write_runs(tmp_path / "old")), "--out", str(tmp_path / "old-out")]) == 0
    assert "stopped" not in (tmp_path / "old-out" / "table3.md").read_text()


def test_rows_that_ran_into_a_limit_before_converging_are_named_with_how_much_they_still_improved(tmp_path):
    """A study "to convergence" compares a row stopped by a cap or a budget off its basis: the table says which and by
    how much; a row without the rule (a control trained to a cap) is not named."""
    rule = {"train.converge_window": 0.2}
    rows = {
        "base": (rule, [(1, 30.0, 5.0), (2, 32.0, 4.0)]),
        "A-h1": ({**rule, "model.heads": 1, "model.d_k": 64, "model.d_v": 64}, [(1, 29.0, 5.5), (2, 30.0, 5.0), (3, 30.0, 5.0)]),
        "C-N2": ({**rule, "model.enc_layers": 2, "model.dec_layers": 2}, [(1, 33.0, 4.0)]),
        "D-ls0.0": ({"train.label_smoothing": 0.0}, [(1, 30.0, 4.0)]),  # the rule off: a cap is its basis
    }

    def ran(reason, improvement=None):
        return {"stop_reason": reason, "convergence": {"window": 0.2, "tol": 0.02, "improvement": improvement}}

    training = {("base", 1): ran("converged", 0.01), ("base", 2): ran("converged", 0.015), ("A-h1", 1): ran("max_steps", 0.036)}
    training |= {("A-h1", 2): ran("converged", 0.019), ("A-h1", 3): ran("max_epochs", 0.0291), ("C-N2", 1): ran("max_time", 0.05)}
    training |= {("D-ls0.0", 1): ran("max_steps", 0.04)}
    notes = make_table(runs_from_dirs(write_runs(tmp_path / "study", rows, training))).summary["notes"]
    assert notes == [
        # base's PPL of 5.0 and 4.0: t(1) reaches to -1.85; A-h1's 5.5, 5.0, 5.0 stay above 1
        "Seed intervals cut at the metric's range (BLEU 0-100, PPL >= 1) where the t interval reached past it: base PPL; "
        "cutting loses no coverage, but scores this near a bound are skewed, so read them as rough.",
        "Stopped by a limit (max_steps, max_epochs, max_time, max_flops) before the convergence rule was met, so not at "
        "convergence and may still move: A-h1 (2 of 3 runs, by max_epochs, max_steps; val/ppl still 2.9-3.6% better over "
        "the rule's window); C-N2 (1 of 1 runs, by max_time; val/ppl still 5.0% better over the rule's window).",
    ]
    training[("A-h1", 3)] = ran("max_steps")  # an improvement not recorded: the run is still named
    training[("A-h1", 2)] = ran("converged")
    notes = make_table(runs_from_dirs(write_runs(tmp_path / "again", rows, training))).summary["notes"]
    assert "A-h1 (2 of 3 runs, by max_steps; val/ppl still 3.6% better over the rule's window); C-N2" in notes[-1]


def test_the_table_says_whether_seeds_share_luck_across_rows(tmp_path):
    luck = {1: 0.0, 2: -2.0, 3: 2.0}  # seed 2 unlucky, seed 3 lucky, in every row
    rows = {
        "base": ({}, [(s, 30.0 + d, 5.0 - d / 10) for s, d in luck.items()]),
        "A-h1": ({"model.heads": 1, "model.d_k": 64, "model.d_v": 64}, [(s, 29.0 + d, 5.5 - d / 10) for s, d in luck.items()]),
        "C-N2": ({"model.enc_layers": 2, "model.dec_layers": 2}, [(1, 33.0, 4.1), (2, 31.2, 4.0), (3, 35.0, 3.9)]),
        "D-ls0.0": ({"train.label_smoothing": 0.0}, [(s, 31.0 + d, 4.8) for s, d in luck.items()]),
    }
    root = write_runs(tmp_path / "study", rows)
    write_runs(root, {"C-N2": (rows["C-N2"][0], [(4, 34.0, 4.0)])})  # a run that recorded no seed (as W&B runs may)
    config = root / "trials" / "C-N2-s4" / "config.yaml"
    config.write_text("".join(line for line in config.read_text().splitlines(keepends=True) if not line.startswith("seed:")))
    assert main(["table", str(root), "--out", str(tmp_path / "out")]) == 0
    luck = json.loads((tmp_path / "out" / "table3.json").read_text())["seed_luck"]
    assert luck["bleu"]["r"] == pytest.approx(1.0, abs=0.001)
    assert (luck["bleu"]["runs"], luck["bleu"]["rows"], luck["bleu"]["base_seeds"]) == (9, 3, 3)  # the seedless run left out
    # 6^3 within-row orderings of the seeds, 2 as extreme as the observed one (itself, and all three rows' 2 and 3
    # swapped); one-sided it would be 1/216
    assert luck["bleu"]["p"] == pytest.approx(2 / 216, abs=0.002)
    md = (tmp_path / "out" / "table3.md").read_text()
    assert "Seeds across rows: " in md and "BLEU r = +1.00 (p 0.0" in md and "9 runs in 3 rows against 3 base seeds" in md
    assert "seeds share luck, on average over rows, so the paired test" in md
    only_two = {k: v for k, v in ROWS.items() if k in ("base", "A-h1")}  # 2 matched runs: nothing to say
    assert main(["table", str(write_runs(tmp_path / "small", only_two)), "--out", str(tmp_path / "small-out")]) == 0
    assert json.loads((tmp_path / "small-out" / "table3.json").read_text())["seed_luck"] == {"bleu": None, "ppl": None}
    assert "Seeds across rows" not in (tmp_path / "small-out" / "table3.md").read_text()


def test_cli_writes_markdown_latex_csv_json_and_plot(tmp_path, capsys):
    signature = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
    root = write_runs(
        tmp_path / "study", training={(row, s[0]): {"bleu_signature": signature} for row, (_, seeds) in ROWS.items() for s in seeds}
    )
    assert main(["table", str(root), "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "table3.md").read_text()
    assert f"BLEU: sacreBLEU {signature}." in md  # the summaries' scores, with the signature they were scored with
    assert "| A-h1 |" in md and "24.9" in md and "31.00 [18.29, 43.71]" in md and "Spearman" in md
    head = header_line(md).strip("| ").split(" | ")
    assert "d_model" not in head  # a column no row changes is left out
    # Table 3's N (layers) and the seeds each row has are two columns: C-N2 has 2 layers and 1 seed.
    c_n2 = dict(zip(head, next(ln for ln in md.split("\n") if ln.startswith("| C-N2 |")).strip("| ").split(" | ")))
    assert (c_n2["N"], c_n2["seeds"]) == ("2", "1")
    base = dict(zip(head, next(ln for ln in md.split("\n") if ln.startswith("| base |")).strip("| ").split(" | ")))
    assert (base["N"], base["h"], base["d_k"], base["seeds"]) == ("3", "4", "16", "2")  # the base states its values
    assert "Base row: N 3, d_model 64, d_ff 2048, h 4, d_k 16, d_v 16, P_drop 0.1, eps_ls 0.1, pos sinusoidal" in md
    tex = (tmp_path / "out" / "table3.tex").read_text()
    assert r"\begin{tabular}" in tex and r"$\Delta$BLEU" in tex and "eps\\_ls" in tex
    assert r"\multicolumn{" in tex and r"\textit{(A)}" in tex  # group labels, as in Table 3
    assert tex.count(r"\begin{tabular}") == 2 and "inconclusive" in tex and "Spearman" in tex and "Noise floor" in tex
    with open(tmp_path / "out" / "table3-agreement.csv") as f:
        agreement = list(csv.DictReader(f))
    overall = next(r for r in agreement if r["group"] == "all" and r["metric"] == "BLEU")
    assert int(overall["inconclusive"]) == 3 and float(overall["spearman_rho"]) == pytest.approx(-0.2) and overall["spearman_rows"] == "4"
    with open(tmp_path / "out" / "table3.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["row"] for r in rows] == ["base", "A-h1", "C-N2", "D-ls0.0"] and float(rows[1]["ppl_paper"]) == 5.29
    assert float(rows[0]["bleu_low"]) == pytest.approx(18.29, abs=0.01) and rows[1]["bleu_verdict"] == "inconclusive"
    assert (rows[0]["split"], rows[0]["sentences"], rows[0]["basis"], rows[0]["bleu_signature"]) == ("valid", "", "not recorded", signature)
    png = (tmp_path / "out" / "table3.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    report = json.loads((tmp_path / "out" / "table3.json").read_text())
    assert [r["row"] for r in report["rows"]] == ["base", "A-h1", "C-N2", "D-ls0.0"] and report["split"] == "valid"
    assert report["bleu_signature"] == signature
    assert report["rows"][1]["changes"] == {"h": 1, "d_k": 64, "d_v": 64} and report["rows"][1]["bleu"]["n"] == 2
    assert "A-h1" in capsys.readouterr().out


def test_base_variants_and_rows_outside_the_paper_take_their_place_in_table_3_order(tmp_path):
    """base-2x (the base trained longer) is a row of its own right after base, not a second base group; a row the paper
    lacks joins its letter's group after the paper's rows; other prefixes come last; every group but base is plotted."""
    from ablate.table.plot import panels

    rows = dict(ROWS) | {
        "base-2x": ({"train.max_steps": 40}, [(2, 32.5, 3.9)]),
        "A-h2": ({"model.heads": 2}, [(1, 30.5, 4.4)]),
        "attn-additive": ({"model.attention": "additive"}, [(1, 29.0, 5.0)]),
    }
    table = make_table(runs_from_dirs(write_runs(tmp_path / "study", rows)))
    assert [(ln["row"], ln["group"]) for ln in table.lines] == [
        ("base", "base"),
        ("base-2x", "base-variants"),
        ("A-h1", "A"),
        ("A-h2", "A"),
        ("C-N2", "C"),
        ("D-ls0.0", "D"),
        ("attn-additive", "attn"),
    ]
    assert [g for g, _ in panels(table)] == ["base-variants", "A", "C", "D", "attn"]
    assert main(["table", str(tmp_path / "study"), "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "table3.md").read_text()
    assert md.count("**(base)**") == 0 and md.count("**(base-variants)**") == 1


def test_cli_errors_name_the_problem(tmp_path, capsys):
    assert main(["table", str(tmp_path / "missing")]) == 2
    assert "missing" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["table", str(tmp_path / "empty")]) == 2
    assert "found no finished runs" in capsys.readouterr().err
    root = write_runs(tmp_path / "nobase")
    import shutil

    for d in root.glob("trials/base-*"):
        shutil.rmtree(d)
    assert main(["table", str(root)]) == 2
    assert "no 'base' row" in capsys.readouterr().err


def test_a_study_of_other_variants_gets_no_paper_columns_verdicts_or_agreement(tmp_path):
    rows = {"base": ({}, [(1, 30.0, 5.0)]), "pos-rotary": ({"model.positional": "rotary"}, [(1, 31.0, 4.8)])}
    root = write_runs(tmp_path / "study", rows)
    assert main(["table", str(root), "--out", str(tmp_path / "out"), "--name", "variants"]) == 0
    md = (tmp_path / "out" / "variants.md").read_text()
    assert "| pos-rotary | rotary |" in md
    assert "paper" not in header_line(md) and "verdict" not in header_line(md) and "Agreement with the paper" not in md
    report = json.loads((tmp_path / "out" / "variants.json").read_text())
    assert "verdicts" not in report and report["rows"][1]["bleu"]["verdict"] == "no paper row"


@pytest.mark.filterwarnings("error")
def test_a_study_of_the_base_row_alone_tabulates_and_plots_without_complaint(tmp_path):
    """E.g. a study still running: the table and its figure say there is nothing to compare yet, and matplotlib has no
    empty legend to warn about."""
    root = write_runs(tmp_path / "study", rows={"base": ROWS["base"]})
    assert main(["table", str(root), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "table3.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rows_and_seeds_select_the_runs_compared(tmp_path, capsys):
    """E.g. a row trained longer against the base run of the same seed: base seed 2 alone, so Δ is 30 - 32."""
    root = write_runs(tmp_path / "study")
    assert main(["table", str(root), "--rows", "base", "A-h1", "--seeds", "2", "--out", str(tmp_path / "out")]) == 0
    report = json.loads((tmp_path / "out" / "table3.json").read_text())
    rows = {r["row"]: r for r in report["rows"]}
    assert sorted(rows) == ["A-h1", "base"] and rows["base"]["bleu"]["n"] == 1 and rows["base"]["bleu"]["mean"] == 32.0
    assert rows["A-h1"]["bleu"]["delta"] == pytest.approx(-2.0)
    assert "rows base A-h1, seeds 2, valid split (2 runs)" in report["title"]
    # What matches no run is an error naming what there is; nothing is written.
    assert main(["table", str(root), "--rows", "base", "A-h2", "--out", str(tmp_path / "bad")]) == 2
    assert "no runs of ['A-h2']; the study has the rows ['A-h1', 'C-N2', 'D-ls0.0', 'base']" in capsys.readouterr().err
    assert main(["table", str(root), "--rows", "base", "C-N2", "--seeds", "2", "--out", str(tmp_path / "bad")]) == 2
    assert "--seeds: row 'C-N2' has no run with seed [2] (its seeds: 1)" in capsys.readouterr().err
    assert main(["table", str(root), "--seeds", "7", "--out", str(tmp_path / "bad")]) == 2
    assert "--seeds: no run has seed [7]" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


def test_the_declared_basis_and_rows_off_the_recorded_one_are_printed(tmp_path):
    """The sweep file's basis travels in each trial's config (sweep.basis) and the scores line states it; a row
    that ran on another basis (the longer-trained control) is named beside it, the common basis stands alone."""
    declared = {"sweep.basis": "stop: converged, weights: last-5 (except base-2x)"}
    converged, longer = (
        "to convergence (val/ppl < 2% better over the last fifth of validations), last-5 average",
        "equal steps (max_steps 16500), last-5 average",
    )
    for seed in (1, 2):
        write_run(tmp_path, "base", seed, declared, {"last": {"val/bleu": 20.0, "val/ppl": 9.0}, "basis": converged})
        write_run(tmp_path, "A-h1", seed, {**declared, "model.heads": 1}, {"last": {"val/bleu": 19.0, "val/ppl": 9.5}, "basis": converged})
    write_run(tmp_path, "base-2x", 2, declared, {"last": {"val/bleu": 20.1, "val/ppl": 8.9}, "basis": longer})
    assert main(["table", str(tmp_path), "--out", str(tmp_path / "out")]) == 0
    doc = json.loads((tmp_path / "out" / "table3.json").read_text())
    assert doc["declared_basis"] == declared["sweep.basis"]
    assert doc["basis"] == f"{converged}; {longer} (base-2x)"
    md = (tmp_path / "out" / "table3.md").read_text()
    assert f"Comparison basis (the sweep file states {declared['sweep.basis']}): {converged}; {longer} (base-2x)." in md


def test_rows_whose_seeds_trained_as_members_are_named_with_how_they_are_counted(tmp_path):
    members = {"members.size": 2, "members.group": str(tmp_path / "groups" / "0000-base")}
    rows = {"base": (members, [(1, 30.0, 5.0), (2, 32.0, 4.0)]), "A-h1": ROWS["A-h1"]}  # A-h1: seeds as runs
    notes = make_table(runs_from_dirs(write_runs(tmp_path / "study", rows))).summary["notes"]
    (note,) = [n for n in notes if n.startswith("Seeds trained as members")]
    assert "members of one model: base (2 of 2 seeds in 1 group)." in note and "A-h1" not in note
    assert "each group counts once, by its members' mean" in note and "a row in one group has no seed interval" in note


def test_a_row_named_as_a_paper_row_that_varies_something_else_is_not_set_beside_the_paper(tmp_path, capsys):
    """Cosine attention in a folder named A-h1 was shown beside the paper's A-h1 (-0.9 BLEU) and given a verdict."""
    rows = {
        "base": ROWS["base"],
        "A-h1": ({"model.attention": "additive"}, [(1, 29.0, 5.5), (2, 30.0, 5.0)]),
        "D-ls0.0": ROWS["D-ls0.0"],
    }
    table = make_table(runs_from_dirs(write_runs(tmp_path / "study", rows)))
    lines = {ln["row"]: ln for ln in table.lines}
    assert lines["A-h1"]["bleu"]["paper_delta"] is None and lines["A-h1"]["paper_params"] is None
    assert lines["A-h1"]["bleu"]["verdict"] == lines["A-h1"]["ppl"]["verdict"] == "no paper row"
    assert lines["D-ls0.0"]["bleu"]["paper_delta"] == -0.5  # a row that is the paper's keeps its figures
    said = "row 'A-h1' is not compared with the paper's row of its name: it changes model.attention, which the paper's A-h1 does not"
    assert said in table.summary["notes"]
    assert main(["table", str(tmp_path / "study"), "--out", str(tmp_path / "out")]) == 0
    assert said in (tmp_path / "out" / "table3.md").read_text()

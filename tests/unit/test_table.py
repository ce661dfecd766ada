"""`ablate table`: Table 3 layout, seed statistics, deltas, paper columns and agreement, from run directories."""

from __future__ import annotations

import csv
import json
import statistics

import pytest

from ablate.cli import main
from ablate.config import load_config, to_yaml
from ablate.sweep import nest
from ablate.table import make_table, runs_from_dirs, spearman

# row -> overrides, [(seed, bleu, ppl)]
ROWS = {
    "base": ({}, [(1, 30.0, 5.0), (2, 32.0, 4.0)]),  # mean BLEU 31, PPL 4.5
    "A-h1": ({"model.heads": 1, "model.d_k": 64, "model.d_v": 64}, [(1, 29.0, 5.5), (2, 30.0, 5.0)]),  # paper: BLEU down, PPL up
    "C-N2": ({"model.enc_layers": 2, "model.dec_layers": 2}, [(1, 33.0, 4.0)]),  # paper: BLEU down, PPL up -> both wrong
    "D-ls0.0": ({"train.label_smoothing": 0.0}, [(1, 30.0, 4.0)]),  # paper: BLEU down, PPL down -> both right
}


def write_runs(root, rows=ROWS):
    for row, (overrides, seeds) in rows.items():
        for seed, bleu, ppl in seeds:
            cfg = load_config(**nest({"model.d_model": 64, "model.heads": 4, "model.enc_layers": 3, "model.dec_layers": 3,
                                      **overrides, "seed": seed, "sweep.study": "t", "sweep.row": row}))
            out = root / "trials" / f"{row}-s{seed}"
            out.mkdir(parents=True)
            (out / "config.yaml").write_text(to_yaml(cfg))
            summary = {"last": {"val/bleu": bleu, "val/ppl": ppl}, "params": {"total": 1_000_000 + seed},
                       "speed/tokens_per_s": 1000.0 * seed, "speed/step_ms": 100.0}
            (out / "summary.json").write_text(json.dumps(summary))
    return root


def test_rows_in_paper_order_with_changed_columns_seed_stats_and_deltas(tmp_path):
    table = make_table(runs_from_dirs(write_runs(tmp_path)))
    lines = {ln["row"]: ln for ln in table.lines}
    assert [ln["row"] for ln in table.lines] == ["base", "A-h1", "C-N2", "D-ls0.0"]
    assert lines["base"]["bleu"] == 31.0 and lines["base"]["bleu_sd"] == pytest.approx(statistics.stdev([30, 32]))
    assert lines["A-h1"]["h"] == 1 and lines["A-h1"]["d_k"] == 64 and lines["A-h1"]["d_model"] == ""  # only what changed
    assert lines["base"]["d_k"] == "" and lines["C-N2"]["N"] == 2 and lines["C-N2"]["h"] == ""
    assert lines["D-ls0.0"]["eps_ls"] == 0.0
    assert lines["A-h1"]["d_bleu"] == pytest.approx(-1.5) and lines["A-h1"]["d_ppl"] == pytest.approx(0.75)
    assert lines["A-h1"]["paper_bleu"] == 24.9 and lines["A-h1"]["paper_d_bleu"] == pytest.approx(24.9 - 25.8)
    assert lines["C-N2"]["seeds"] == 1 and lines["C-N2"]["bleu_sd"] is None
    assert lines["base"]["tokens_per_s"] == 1500.0


def test_agreement_counts_signs_per_group_and_rank_correlation(tmp_path):
    a = make_table(runs_from_dirs(write_runs(tmp_path))).agreement
    assert a["groups"]["A"]["bleu_sign"] == 1 and a["groups"]["A"]["ppl_sign"] == 1
    assert a["groups"]["C"]["bleu_sign"] == 0 and a["groups"]["C"]["ppl_sign"] == 0
    assert a["groups"]["D"]["bleu_sign"] == 1 and a["groups"]["D"]["ppl_sign"] == 1
    assert (a["bleu_sign_matches"], a["ppl_sign_matches"], a["rows"]) == (2, 2, 3)
    # ours BLEU: base 31, A 29.5, C 33, D 30; paper: 25.8, 24.9, 23.7, 25.3 -> ranks (3,1,4,2) vs (4,2,1,3)
    assert a["spearman_bleu"] == pytest.approx(spearman([31, 29.5, 33, 30], [25.8, 24.9, 23.7, 25.3]))
    assert a["spearman_bleu"] == pytest.approx(1 - 6 * (1 + 1 + 9 + 1) / (4 * 15))


def test_spearman_handles_ties_and_perfect_orders():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 1, 2], [1, 2, 3]) == pytest.approx(0.8660254, abs=1e-6)
    assert spearman([1, 2], [1, 2]) is None


def test_cli_writes_markdown_latex_csv_plot_and_agreement(tmp_path, capsys):
    root = write_runs(tmp_path / "study")
    assert main(["table", str(root), "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "table3.md").read_text()
    assert "| A-h1 |" in md and "24.9" in md and "31.00 ± 1.41" in md and "Spearman" in md
    assert "d_model" not in md.split("\n")[2]  # a column no row changes is left out
    tex = (tmp_path / "out" / "table3.tex").read_text()
    assert r"\begin{tabular}" in tex and r"$\pm$" in tex
    with open(tmp_path / "out" / "table3.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["row"] for r in rows] == ["base", "A-h1", "C-N2", "D-ls0.0"] and float(rows[1]["paper_ppl"]) == 5.29
    png = (tmp_path / "out" / "table3.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    assert json.loads((tmp_path / "out" / "table3-agreement.json").read_text())["rows"] == 3
    assert "A-h1" in capsys.readouterr().out


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


def test_a_study_of_other_variants_gets_no_paper_columns_or_agreement(tmp_path):
    rows = {"base": ({}, [(1, 30.0, 5.0)]), "pos-rotary": ({"model.positional": "rotary"}, [(1, 31.0, 4.8)])}
    root = write_runs(tmp_path / "study", rows)
    assert main(["table", str(root), "--out", str(tmp_path / "out"), "--name", "variants"]) == 0
    md = (tmp_path / "out" / "variants.md").read_text()
    assert "| pos-rotary | rotary |" in md
    assert "paper" not in md.split("\n")[2] and "Agreement with the paper" not in md

"""The Table 3 sweep files: every paper row, paper-scale counts within 3%, the CPU-scale rows keep the paper's ratios
and are trained to convergence by one rule."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import torch

from ablate.config.paper import PAPER_VOCAB, TABLE3
from ablate.model import build_transformer, count_parameters
from ablate.sweep.load import load_sweep

ROOT = Path(__file__).resolve().parents[3]
PAPER = {r.name: r for r in TABLE3}


@pytest.fixture(autouse=True)
def at_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def test_paper_scale_sweep_has_every_row_with_the_papers_overrides():
    sweep = load_sweep("sweeps/table3.yaml")
    assert list(sweep.variants) == [r.name for r in TABLE3]
    for name, overrides in sweep.variants.items():
        expected = dict(PAPER[name].overrides)
        if PAPER[name].train_steps != 100_000:
            expected["train.max_steps"] = PAPER[name].train_steps
        assert overrides == expected, name
    base = sweep.config_for({})
    assert base.data.dataset == "wmt14_en_de" and base.train.max_steps == 100_000
    assert base.data.max_tokens * base.train.accumulate == 25_000  # the paper's ~25k target tokens per step


@pytest.fixture(scope="module")
def paper_sweep():
    """Loaded once: loading validates all 20 rows' configs (about 1.5 s)."""
    return load_sweep(ROOT / "sweeps" / "table3.yaml")


@pytest.mark.parametrize("row", [r.name for r in TABLE3])
def test_paper_scale_rows_count_within_3_percent_at_41k(row, paper_sweep):
    cfg = paper_sweep.config_for(paper_sweep.variants[row])
    with torch.device("meta"):
        total = count_parameters(build_transformer(cfg.model, PAPER_VOCAB))["total"] / 1e6
    assert abs(total - PAPER[row].params_m) / PAPER[row].params_m <= 0.03, f"{row}: {total:.1f}M vs {PAPER[row].params_m}M"


CONTROLS = {"base-2x": 2 * 8250, "base-2x-seed5": 2 * 12250}  # base seeds 2 and 5 stopped at 8,250 and 12,250


def test_cpu_scale_sweep_keeps_the_rows_relative_changes_and_trains_each_to_convergence():
    sweep = load_sweep("sweeps/table3-small.yaml")
    rows = [r.name for r in TABLE3 if r.group in ("base", "A", "B", "D", "E")]
    assert [v for v in sweep.variants if v not in CONTROLS] == rows  # groups C and big are cut, no other row is
    seeds = dict(Counter(row for row, _ in sweep.rows()))
    assert seeds.pop("base") >= 5 and all(seeds.pop(c) == 1 for c in CONTROLS) and min(seeds.values()) >= 3
    cfg = {name: sweep.config_for(o) for name, o in sweep.variants.items()}
    build = cfg["base"].model

    def dk(m):
        return m.head_dims[0]

    for name in ("A-h1", "A-h4", "A-h16", "A-h32"):  # (A): h x d_k = d_model, as in the paper
        m = cfg[name].model
        assert m.heads * m.d_k == m.d_model == build.d_model and m.d_v == m.d_k
        assert m.heads == PAPER[name].overrides["model.heads"]
    for name, ratio in (("B-dk16", 16 / 64), ("B-dk32", 32 / 64)):
        assert cfg[name].model.d_k == dk(build) * ratio
    assert cfg["D-drop0.0"].model.dropout == 0.0 and cfg["D-drop0.2"].model.dropout == 0.2
    assert cfg["D-ls0.0"].train.label_smoothing == 0.0 and cfg["D-ls0.2"].train.label_smoothing == 0.2
    assert cfg["E-learned"].model.positional == "learned"
    assert build.dropout == 0.1 and cfg["base"].train.label_smoothing == 0.1
    for name, c in cfg.items():  # one stopping rule and one reported checkpoint for every row
        assert c.train.final_average == 5 and c.train.val_max_sentences == 0
        if name in CONTROLS:  # twice the updates its seed's base run took before the rule fired, rule off
            assert c.train.converge_window == 0 and c.train.max_steps == CONTROLS[name]
        else:
            assert (c.train.converge_window, c.train.converge_tol) == (0.2, 0.02)

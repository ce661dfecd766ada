"""Parameter counts of every Table 3 row at a 41k shared vocabulary are within 3% of the paper's column."""

from __future__ import annotations

import pytest
import torch

from ablate.cli import main
from ablate.config.paper import PAPER_VOCAB, TABLE3
from ablate.experiment import load_config
from ablate.model import build_transformer, count_parameters


def row_params(overrides: dict) -> dict[str, int]:
    cfg = load_config(overrides=[f"{k}={v}" for k, v in overrides.items()])
    with torch.device("meta"):  # counts need no memory or init time
        return count_parameters(build_transformer(cfg.model, PAPER_VOCAB))


@pytest.mark.parametrize("row", TABLE3, ids=[r.name for r in TABLE3])
def test_table3_params_within_3_percent(row):
    total = row_params(row.overrides)["total"] / 1e6
    assert abs(total - row.params_m) / row.params_m <= 0.03, f"{row.name}: {total:.1f}M vs paper {row.params_m}M"


def test_base_breakdown():
    counts = row_params({})
    assert counts["embeddings"] == PAPER_VOCAB * 512  # one table shared by source, target and output
    # 6 layers x (attention 4*(512*512+512) + FFN 2*512*2048+2048+512 + 2 LayerNorms)
    assert counts["encoder"] == 6 * (4 * (512 * 512 + 512) + 2 * 512 * 2048 + 2048 + 512 + 2 * 1024)
    assert counts["total"] == counts["embeddings"] + counts["encoder"] + counts["decoder"]


def test_params_cli(capsys, tmp_path):
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text("model: {d_model: 64, heads: 4, d_ff: 128, enc_layers: 1, dec_layers: 1}\ndata: {vocab_size: 1000}\n")
    assert main(["params", str(cfg), "model.dec_layers=2"]) == 0
    out = capsys.readouterr().out
    model = build_transformer(load_config([cfg], ["model.dec_layers=2"]).model, 1000)
    assert f"{count_parameters(model)['total']:,}" in out
    assert "1,000" in out  # the vocabulary it was counted at

"""Sweep files written for the sweep tests."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "base.yaml").write_text("model:\n  d_model: 64\n  heads: 4\n  d_ff: 128\n")
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    return path


VARIANTS = """
name: demo
base: base.yaml
objective: {metric: val/bleu, direction: maximize}
seeds: [1, 2]
variants:
  base: {}
  A-h1: {model.heads: 1, model.d_k: 64, model.d_v: 64}
  E-learned: {model.positional: learned}
"""

"""The README's "adding a variant" example works as written: one class, one registration, a trained model."""

from __future__ import annotations

import re
from pathlib import Path

import torch

from ablate.model import ATTENTION, build_transformer
from helpers import VOCAB, random_batch, tiny_model

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_variant_example_registers_and_trains():
    block = re.search(r"## Adding a variant.*?```python\n(.*?)```", README.read_text(), re.S).group(1)
    try:
        exec(compile(block, "README.md", "exec"), {"__name__": "readme_example"})
        assert "cosine" in ATTENTION
        model = build_transformer(tiny_model(attention="cosine"), VOCAB)
        src, tgt = random_batch()
        logits = model(src, tgt)
        assert logits.shape == (3, 6, VOCAB) and torch.isfinite(logits).all()
        logits.sum().backward()
    finally:
        ATTENTION.pop("cosine", None)


def test_readme_sweep_examples_are_valid_sweep_files(tmp_path, monkeypatch):
    from ablate.sweep import load_sweep

    section = README.read_text().split("## Sweeps", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```yaml\n(.*?)```", section, re.S)
    assert len(blocks) == 2
    monkeypatch.chdir(README.parent)
    for i, block in enumerate(blocks):
        path = tmp_path / f"readme{i}.yaml"
        path.write_text(block)
        sweep = load_sweep(path)
        assert sweep.mode == ("variants", "search")[i]


def test_readme_relative_position_example_keeps_every_invariant():
    from ablate.model import POSITIONAL

    blocks = re.findall(r"```python\n(.*?)```", README.read_text().split("## Adding a variant", 1)[1].split("\n## ", 1)[0], re.S)
    assert len(blocks) == 2
    try:
        exec(compile(blocks[1], "README.md", "exec"), {"__name__": "readme_example"})
        model = build_transformer(tiny_model(positional="log_distance", attention_window=2), VOCAB).eval()
        src, tgt = random_batch(pad_tail=False)
        full = model(src, tgt)
        memory, src_mask = model.encode(src)
        cache = model.new_cache()
        steps = [model.decode(tgt[:, i : i + 1], memory, src_mask, cache, start=i) for i in range(tgt.size(1))]
        torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)
        model.train()
        model(src, tgt).sum().backward()
        weights = [m.position.weight for m in model.modules() if getattr(m, "position", None) is not None]
        assert weights and all(w.grad is not None for w in weights)
    finally:
        POSITIONAL.pop("log_distance", None)

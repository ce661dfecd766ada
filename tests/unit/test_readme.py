"""The README's "adding a variant" example works as written: one class, one registration, a trained model; saved as
the file it names and passed as the plugin its commands name (through the real command line, in a subprocess:
tests/integration/test_plugin_runs.py::test_the_readme_example_works_as_written)."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import torch
from helpers import VOCAB, random_batch, tiny_model

from ablate.model import ATTENTION, build_transformer
from ablate.registry import restoring

README = Path(__file__).resolve().parents[2] / "README.md"


def variant_section() -> str:
    return README.read_text().split("## Adding a variant", 1)[1].split("\n## ", 1)[0]


def test_readme_variant_example_registers_and_trains():
    block = re.search(r"## Adding a variant.*?```python\n(.*?)```", README.read_text(), re.S).group(1)
    with restoring(ATTENTION):
        exec(compile(block, "README.md", "exec"), {"__name__": "readme_example"})
        assert "cosine" in ATTENTION
        model = build_transformer(tiny_model(attention="cosine"), VOCAB)
        src, tgt = random_batch()
        logits = model(src, tgt)
        assert logits.shape == (3, 6, VOCAB) and torch.isfinite(logits).all()
        logits.sum().backward()


def test_readme_sweep_examples_are_valid_sweep_files(tmp_path, monkeypatch):
    from ablate.sweep import load_sweep
    from ablate.sweep.plan import Search, Variants, plan_for

    section = README.read_text().split("## Sweeps", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```yaml\n(.*?)```", section, re.S)
    assert len(blocks) == 2
    monkeypatch.chdir(README.parent)
    for i, block in enumerate(blocks):
        path = tmp_path / f"readme{i}.yaml"
        path.write_text(block)
        sweep = load_sweep(path)
        assert type(plan_for(sweep)) is (Variants, Search)[i]


def test_readme_relative_position_example_keeps_every_invariant():
    from ablate.model import POSITIONAL

    blocks = re.findall(r"```python\n(.*?)```", variant_section(), re.S)
    assert len(blocks) == 2
    with restoring(POSITIONAL):
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


def test_readme_plugin_commands_import_the_file_it_says_to_save(tmp_path, monkeypatch):
    from ablate import plugins
    from ablate.config import load_config

    section = variant_section()
    name = re.search(r"Save this as `(\w+\.py)`", section).group(1)
    (tmp_path / name).write_text(re.search(r"```python\n(.*?)```", section, re.S).group(1))
    commands = [shlex.split(line) for block in re.findall(r"```bash\n(.*?)```", section, re.S) for line in block.splitlines()]
    train, evaluate = (next(c for c in commands if c[:2] == ["ablate", verb]) for verb in ("train", "evaluate"))
    assert evaluate[evaluate.index("--plugins") + 1] == name
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(plugins, "_imported", {})
    try:
        with restoring(ATTENTION):
            cfg = load_config(overrides=[arg for arg in train[2:] if "=" in arg])
            assert cfg.plugins == [str(tmp_path / name)] and cfg.model.attention == "cosine"
    finally:
        sys.modules.pop(plugins.module_name(tmp_path / name), None)

"""A model's first training step and decoding steps, taken before its run's folder holds anything."""

from __future__ import annotations

import sys
import textwrap

import pytest
import torch
from helpers import tiny_model

from ablate import plugins
from ablate.config import ConfigError, ExperimentConfig
from ablate.registry import restoring
from ablate.training.first_pass import first_pass

HEADER = """
import torch
from ablate.model.attention import ATTENTION, AttentionKernel
from ablate.model.positional import POSITIONAL, PositionalEncoding
from ablate.registry import register
"""
UNPACKS = """
@register(ATTENTION, "fp_unpack")
class Unpack(AttentionKernel):
    def __init__(self, *, heads, d_k, dropout=0.0):
        super().__init__()

    def forward(self, q, k, v, mask, scale):
        b, h, t = q.shape
        return v
"""
SHORT = """
@register(POSITIONAL, "fp_short")
class Short(PositionalEncoding):
    def __init__(self, *, d_model, max_positions):
        super().__init__()

    def forward(self, x, start=0):
        return x[..., :-1]
"""


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(plugins, "_imported", {})
    monkeypatch.setattr(plugins, "_hashes", {})
    modules = set(sys.modules)
    with restoring(*plugins._registries()):
        yield
    for name in set(sys.modules) - modules:
        if name.startswith(plugins.MODULE_PREFIX):
            del sys.modules[name]


def _config(tmp_path, source: str, **model) -> tuple[ExperimentConfig, object]:
    path = tmp_path / "mine.py"
    path.write_text(textwrap.dedent(HEADER + source))
    plugins.load_plugins([str(path)])
    cfg = ExperimentConfig(model=tiny_model(**model))
    cfg.train.accelerator = "cpu"
    return cfg, path


def test_a_plugins_own_error_is_raised_as_it_is_and_names_its_file_and_line(tmp_path):
    cfg, path = _config(tmp_path, UNPACKS, attention="fp_unpack")
    with pytest.raises(ValueError, match="too many values to unpack") as err:
        first_pass(cfg, 40)
    assert plugins.raised_in(err.value) == f"{path}, line 13, in forward: b, h, t = q.shape"


def test_a_plugins_output_of_the_wrong_shape_is_named_by_its_variant_and_file(tmp_path):
    """The failure was a RuntimeError from inside torch's linear layer, a traceback naming no file of the user's."""
    cfg, path = _config(tmp_path, SHORT, positional="fp_short")
    with pytest.raises(ConfigError) as err:
        first_pass(cfg, 40)
    assert str(err.value).startswith(f"the model failed its first training step with model.positional='fp_short' ({path}): RuntimeError:")
    assert plugins.raised_in(err.value) is None


def test_the_run_trains_as_if_it_had_not_been_taken_and_a_gpu_run_does_not_take_it(tmp_path, monkeypatch):
    """The step runs on a model of its own: the run's random state is as it was (its model, not touched, keeps any
    state a plugin holds). A run on a GPU does not take it: a plugin written for one may not run on the CPU."""
    cfg = ExperimentConfig(model=tiny_model(dropout=0.3))
    cfg.train.accelerator = "cpu"
    before = torch.get_rng_state()
    first_pass(cfg, 40)
    assert torch.equal(torch.get_rng_state(), before)
    cfg, _ = _config(tmp_path, UNPACKS, attention="fp_unpack")
    for accelerator, cuda in (("gpu", False), ("cuda", False), ("auto", True)):
        cfg.train.accelerator = accelerator
        monkeypatch.setattr(torch.cuda, "is_available", lambda cuda=cuda: cuda)
        first_pass(cfg, 40)  # would raise, as above, on the CPU


def test_python_and_numpy_draws_are_kept_and_a_model_of_three_positions_takes_it(monkeypatch):
    """The fixes review: a plugin drawing from Python's or numpy's generator had its stream advanced; and the step's
    fixed length of 4 refused a valid config with learned positions and max_positions=3."""
    import random

    import numpy as np

    from ablate.training import first_pass as module

    steps = module._steps
    monkeypatch.setattr(module, "_steps", lambda *a, **k: (random.random(), np.random.random_sample(), steps(*a, **k)))
    for max_positions in (3, 1):
        cfg = ExperimentConfig(model=tiny_model(positional="learned", max_positions=max_positions))
        cfg.train.accelerator = "cpu"
        random.seed(7), np.random.seed(7)
        first_pass(cfg, 40)  # a plugin's draws inside
        after = random.random(), np.random.random_sample()
        random.seed(7), np.random.seed(7)
        assert after == (random.random(), np.random.random_sample())

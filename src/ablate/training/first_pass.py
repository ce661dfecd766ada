"""One tiny training step's forward and backward, and two cached decoding steps, of the run's model, before its folder
holds anything.

A variant's bug (a plugin's, mostly: a wrong unpacking, an output of the wrong shape) surfaced at Lightning's first
step, after config.yaml was written: the folder then refused the corrected command. Found here, the run leaves no
folder behind, and the error names the plugin's file and line, or the variants that come from plugins.

The step runs on a model of its own, built from the run's model section on the CPU's forked generator, so the run's
model (its weights, buffers, any state a plugin keeps, a compiled forward) and random state are untouched: it trains
as it would have without this. Only a run that trains on the CPU takes it: a plugin written for a GPU (its own CUDA or
Triton kernels) may not run here at all, and a large model is built once more on the host.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator

import numpy as np
import torch

from ablate import plugins
from ablate.config import ExperimentConfig, to_dict
from ablate.evaluation.search import greedy_decode
from ablate.messages.errors import ConfigError
from ablate.model import build_transformer
from ablate.model.tokens import BOS_ID, EOS_ID, PAD_ID
from ablate.training.device import trains_on_cpu


def first_pass(cfg: ExperimentConfig, vocab_size: int) -> None:
    """Raise what the run's first steps would raise: an error from a plugin's code as it is (the CLI names its file and
    line), one from ablate's code while a plugin's variant is in the model as a ConfigError naming those variants."""
    if not trains_on_cpu(cfg.train):
        return
    with torch.random.fork_rng(devices=[]), _python_and_numpy_kept():  # a plugin may draw from either
        try:
            _steps(build_transformer(cfg.model, vocab_size), length=min(4, cfg.model.max_positions))
        except Exception as e:
            named = plugins.from_plugins(to_dict(cfg.model))
            if plugins.raised_in(e) or not named:
                raise
            raise ConfigError(
                f"the model failed its first training step with {', '.join(named)}: {type(e).__name__}: {e}; check what "
                "the plugin's forward returns (docs/variants.md gives each variant's shapes); nothing was written"
            ) from e


@contextlib.contextmanager
def _python_and_numpy_kept() -> Iterator[None]:
    state = random.getstate(), np.random.get_state()
    try:
        yield
    finally:
        random.setstate(state[0])
        np.random.set_state(state[1])


def _steps(model: torch.nn.Module, length: int) -> None:
    """Two sentences of `length` tokens (one padded) at most: a model with learned positions may take no more."""
    vocab, words = model.vocab_size, max(length - 1, 1)
    word = [min(4 + i, vocab - 1) for i in range(words)]
    src = torch.tensor([[*word, EOS_ID], [*word[:-1], EOS_ID, PAD_ID]])[:, :length]
    tgt_in = torch.tensor([[BOS_ID, *word], [BOS_ID, *word[:-1], PAD_ID]])[:, :length]
    model.train()
    model(src, tgt_in).float().sum().backward()
    model.eval()
    with torch.no_grad():
        greedy_decode(model, src, max_len_a=0.0, max_len_b=min(2, length - 1) or 1)

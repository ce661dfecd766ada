"""One tiny training step's forward and backward, and two cached decoding steps, of a model just built, before its
run's folder holds anything.

A variant's bug (a plugin's, mostly: a wrong unpacking, an output of the wrong shape) surfaced at Lightning's first
step, after config.yaml was written: the folder then refused the corrected command. Found here, the run leaves no
folder behind, and the error names the plugin's file and line, or the variants that come from plugins. The CPU's
random state is restored and the gradients are dropped, so the run trains exactly as it would have without this.
"""

from __future__ import annotations

import torch

from ablate import plugins
from ablate.evaluation.search import greedy_decode
from ablate.messages.errors import ConfigError
from ablate.model.tokens import BOS_ID, EOS_ID, PAD_ID
from ablate.model.transformer import Transformer


def first_pass(model: Transformer, model_section: dict) -> None:
    """Raise what the model's first step would raise; one from a plugin's code as it is (the CLI names its file and
    line), one from ablate's code while a plugin's variant is in the model as a ConfigError naming those variants."""
    training = model.training
    try:
        with torch.random.fork_rng(devices=[]):  # built on the CPU: its generator is the one dropout draws from
            _steps(model)
    except Exception as e:
        named = plugins.from_plugins(model_section)
        if plugins.raised_in(e) or not named:
            raise
        raise ConfigError(
            f"the model failed its first training step with {', '.join(named)}: {type(e).__name__}: {e}; "
            "check what the plugin's forward returns (docs/variants.md gives each variant's shapes); nothing was written"
        ) from e
    finally:
        model.zero_grad(set_to_none=True)
        model.train(training)


def _steps(model: Transformer) -> None:
    vocab = model.vocab_size
    word = [min(4 + i, vocab - 1) for i in range(3)]
    src = torch.tensor([[*word, EOS_ID], [*word[:2], EOS_ID, PAD_ID]])
    tgt_in = torch.tensor([[BOS_ID, *word], [BOS_ID, *word[:2], PAD_ID]])
    model.train()
    model(src, tgt_in).float().sum().backward()
    model.eval()
    with torch.no_grad():
        greedy_decode(model, src, max_len_a=0.0, max_len_b=2)

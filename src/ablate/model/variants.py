"""What the registered variants allow together, read from the facts their classes declare (never from their names):
which attention kernels and positional encodings combine, and the longest sequence a model config can take.
"""

from __future__ import annotations

from ablate.config.schema import ModelConfig
from ablate.model.attention import ATTENTION
from ablate.model.positional import POSITIONAL, bias_free_positionals
from ablate.registry import lookup


def compatible(attention: str, positional: str) -> bool:
    """Whether kernel `attention` can take the logit biases a `positional` encoding adds (linear attention cannot)."""
    return ATTENTION[attention].takes_bias or not POSITIONAL[positional].adds_bias


def compatible_positionals(attention: str) -> list[str]:
    """The registered positional encodings that kernel `attention` works with, sorted."""
    return sorted(POSITIONAL) if ATTENTION[attention].takes_bias else bias_free_positionals()


def max_length(cfg: ModelConfig) -> int | None:
    """The longest source or target (in tokens, EOS included) a model built from `cfg` can encode or decode;
    None when any length works."""
    positional = lookup(POSITIONAL, cfg.positional, "model.positional")
    return cfg.max_positions if positional.bounded_length else None

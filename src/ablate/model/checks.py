"""The model section checked against what the registries hold: variant names (with the one "did you mean" hint),
which attention kernels take which positional encodings, and whether the longest training sequence fits the
positions the chosen encoding accepts. Lives with the registries, so the config package below asks none of them."""

from __future__ import annotations

from ablate.config.schema import DataConfig, ModelConfig
from ablate.config.validation import choice
from ablate.model.activations import ACTIVATIONS
from ablate.model.attention import ATTENTION
from ablate.model.positional import POSITIONAL
from ablate.model.scaling import SCALING
from ablate.model.variants import compatible, compatible_positionals, max_length


def model_problems(m: ModelConfig, d: DataConfig) -> list[str]:
    """What `m` (and data.max_len, which the positions must cover) asks that the registered variants cannot do."""
    p: list[str] = []
    for key, table in (("attention", ATTENTION), ("attention_scaling", SCALING), ("positional", POSITIONAL), ("activation", ACTIVATIONS)):
        choice(p, f"model.{key}", getattr(m, key), table)
    if m.attention in ATTENTION and m.positional in POSITIONAL and not compatible(m.attention, m.positional):
        p.append(
            f"model.attention='{m.attention}' cannot add the position biases of model.positional='{m.positional}'; "
            f"choose one of {compatible_positionals(m.attention)}"
        )
    if m.attention in ATTENTION and m.attention_dropout > 0 and not ATTENTION[m.attention].takes_dropout:
        p.append(
            f"model.attention_dropout={m.attention_dropout} does nothing with model.attention='{m.attention}', which "
            "forms no attention weights to drop: set it to 0 (model.dropout still drops sub-layer outputs)"
        )
    longest = max_length(m) if m.positional in POSITIONAL else None
    if longest is not None and d.max_len > longest:
        p.append(
            f"data.max_len={d.max_len} exceeds model.max_positions={m.max_positions}, "
            f"the longest sequence model.positional='{m.positional}' accepts"
        )
    elif longest is not None and d.pad_multiple >= 1 and -(-d.max_len // d.pad_multiple) * d.pad_multiple > longest:
        p.append(
            f"data.max_len={d.max_len} padded to data.pad_multiple={d.pad_multiple} makes batches of "
            f"{-(-d.max_len // d.pad_multiple) * d.pad_multiple}, more than model.max_positions={m.max_positions} "
            f"(model.positional='{m.positional}') accepts; lower data.max_len or data.pad_multiple, or raise model.max_positions"
        )
    return p

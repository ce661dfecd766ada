"""Which runs may train together as members of one model (ablate.model.members), and what may differ between them.

A member model has one architecture, one data pipeline and one optimizer family; what each member may set for itself
is the seed and the scalar knobs the member code applies per member. Everything else must be equal, and a group
that differs elsewhere is refused naming the key. Where a run writes and how it is logged (`out_dir`, `logging.*`,
`sweep.*`) is each member's own.
"""

from __future__ import annotations

from typing import Any

from ablate.config.dicts import flatten, to_dict
from ablate.config.schema import ExperimentConfig
from ablate.messages.errors import ConfigError

# The keys each member may set to its own value: what the member model and MemberAdam apply per member.
# model.attention_dropout is not one: torch's fused attention takes one dropout rate for the whole batch.
MEMBER_KEYS = ("seed", "model.dropout", "train.lr_scale", "train.warmup", "train.label_smoothing", "train.clip_grad")
# Each member's own bookkeeping: where it writes, how it is named and logged, which study trial it is.
OWN_PREFIXES = ("out_dir", "logging.", "sweep.")


def _own(key: str) -> bool:
    return key in MEMBER_KEYS or any(key == p or key.startswith(p) for p in OWN_PREFIXES)


def member_values(configs: list[ExperimentConfig]) -> dict[str, list[Any]]:
    """Each member-able key's values, one per member; ConfigError naming the first other key in which members differ,
    or a setting members cannot train under."""
    if not configs:
        raise ConfigError("members: a group needs at least one run")
    flat = [flatten(to_dict(c)) for c in configs]
    for key in flat[0]:
        if _own(key):
            continue
        values = [f.get(key) for f in flat]
        if any(v != values[0] for v in values[1:]):
            shown = " vs ".join(dict.fromkeys(map(repr, values)))
            raise ConfigError(f"members: {key} differs between members ({shown}); members may differ only in {', '.join(MEMBER_KEYS)}")
    if len(configs) > 1 and configs[0].train.precision == "16-mixed":
        raise ConfigError(
            "members: train.precision=16-mixed scales the loss of the whole batch by one factor; use bf16-mixed or 32 with members"
        )
    if len(configs) > 1 and configs[0].train.accumulate != 1:
        raise ConfigError("members: train.accumulate must be 1 with members (each step is one batch per member)")
    return {key: [f[key] for f in flat] for key in MEMBER_KEYS}

"""Which runs may train together as members of one model (ablate.model.members), and what may differ between them.

A member model has one architecture, one data pipeline and one optimizer family; what each member may set for itself
is the seed and the scalar knobs the member code applies per member. Everything else must be equal, and a group
that differs elsewhere is refused naming the key. Where a run writes and how it is logged (`out_dir`, `logging.*`,
`sweep.*`) is each member's own.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ablate.config.dicts import flatten, to_dict
from ablate.config.saved import rebuild
from ablate.config.schema import ExperimentConfig
from ablate.messages.errors import ConfigError

# The keys each member may set to its own value: what the member model and MemberAdam apply per member.
# model.attention_dropout is not one: torch's fused attention takes one dropout rate for the whole batch.
MEMBER_KEYS = ("seed", "model.dropout", "train.lr_scale", "train.warmup", "train.label_smoothing", "train.clip_grad")
# Each member's own bookkeeping: where it writes, how it is named and logged, which study trial it is.
OWN_PREFIXES = ("out_dir", "logging.", "sweep.", "members.index")


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
    problem = setting_problem(configs[0]) if len(configs) > 1 else None
    if problem:
        raise ConfigError(problem)
    return {key: [f[key] for f in flat] for key in MEMBER_KEYS}


def setting_problem(cfg: ExperimentConfig) -> str | None:
    """Why no group of `cfg`'s runs can train as members, if a setting forbids it: checked where a group trains and
    by `ablate sweep` once `--members` is applied (ablate.sweep.member_checks), so a study is refused before its first
    trial rather than failing every one."""
    t = cfg.train
    if t.precision == "16-mixed":
        return "members: train.precision=16-mixed scales the loss of the whole batch by one factor; use bf16-mixed or 32 with members"
    if t.accumulate != 1:
        return "members: train.accumulate must be 1 with members (each step is one batch per member)"
    if t.devices != 1:
        return "members: train.devices must be 1 with members (a group trains on one device; run groups side by side)"
    return None


def member_configs(cfg: ExperimentConfig, values: dict[str, list[Any]] | None = None) -> list[ExperimentConfig]:
    """The `cfg.members.size` runs of a group config: member k has seed `cfg.seed + k` and the k-th of each list in
    `values` (member-able key -> one value per member), its own out_dir inside the group's (named by what sets it
    apart) and W&B name, and `members.group` / `members.index` / `members.schedule` saying where it trained."""
    values = dict(values or {})
    size = cfg.members.size
    for key, listed in values.items():
        if key not in MEMBER_KEYS:
            raise ConfigError(
                f"members: {key} cannot differ between members; only {', '.join(MEMBER_KEYS)} can be given one value per member"
            )
        if len(listed) != size:
            raise ConfigError(f"members: {key} lists {len(listed)} values for members.size={size}; give one per member")
    values = {"seed": values.pop("seed", [cfg.seed + k for k in range(size)]), **values}
    members = []
    for k in range(size):
        data = to_dict(cfg)
        for key, vals in values.items():
            *path, leaf = key.split(".")
            node = data
            for part in path:
                node = node[part]
            node[leaf] = vals[k]
        members.append(rebuild(data, "members"))  # the schema's types: a value of the wrong type is refused naming the key
    flat = [flatten(to_dict(m)) for m in members]
    shown = [key for key in values if key == "seed" or len({f[key] for f in flat}) > 1]
    names = [",".join(f"{key.rsplit('.', 1)[-1]}={f[key]}" for key in shown) for f in flat]
    if len(set(names)) < size:
        raise ConfigError(f"members: two members would train the same run ({', '.join(names)}); give each its own seed or value")
    base = cfg.logging.name or cfg.out_dir.rstrip("/").rsplit("/", 1)[-1]
    out = []
    for k, (member, name) in enumerate(zip(members, names)):
        member.out_dir = f"{cfg.out_dir.rstrip('/')}/{name}"
        # W&B: the group's runs side by side (a sweep's trials keep the study's group)
        member.logging = dataclasses.replace(member.logging, name=f"{base}/{name}", group=cfg.logging.group or base)
        member.members = dataclasses.replace(member.members, group=cfg.out_dir, index=k, schedule=cfg.seed)
        out.append(member)
    member_values(out)
    return out


def as_own_run(cfg: ExperimentConfig, given: set[str]) -> None:
    """A member's config trained alone (`members.size=1`): a run of its own, which claims neither the group it does
    not train in nor the W&B names `member_configs` gave the member (it showed in W&B as that member, in its group),
    but keeps a name or group the command line (`given`, its keys) sets."""
    names = {cfg.members.group.rstrip("/").rsplit("/", 1)[-1]} if cfg.members.group else set()
    if "logging.name" not in given:
        names |= {cfg.logging.name.rsplit("/", 1)[0]} if cfg.logging.name else set()  # the group's, as member_configs made
        cfg.logging.name = None
    if "logging.group" not in given and cfg.logging.group in names:
        cfg.logging.group = None  # the group's own name, not one the user chose (a sweep's study, say)
    cfg.members.group = cfg.members.index = cfg.members.schedule = None

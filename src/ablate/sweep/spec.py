"""A sweep file's content (`sweeps/*.yaml`): the study's name, base experiment, objective, budget and its trials,
either as named `variants` (rows of config overrides, run as a grid times `seeds`, the form Table 3 needs) or as
an Optuna `search` space with a sampler and a pruner. Parsing and validating the file is ablate.sweep.load.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, is_dataclass
from pathlib import Path
from typing import Any

from ablate.config import ConfigError, ExperimentConfig
from ablate.config.leaves import with_leaves
from ablate.experiment import load_config, validate
from ablate.sweep.basis import Basis

SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass
class Objective:
    terms: dict[str, float]  # metric -> weight; the objective is their weighted sum
    direction: str = "maximize"

    @property
    def metric(self) -> str:
        """The metric reported for pruning: the first (main) term."""
        return next(iter(self.terms))


@dataclass
class Sweep:
    name: str
    path: Path
    base: list[str]
    objective: Objective
    overrides: dict[str, Any] = field(default_factory=dict)
    variants: dict[str, dict[str, Any]] = field(default_factory=dict)
    search: dict[str, dict] = field(default_factory=dict)
    seeds: list[int] = field(default_factory=list)
    row_seeds: dict[str, list[int]] = field(default_factory=dict)  # rows with seeds of their own (e.g. more for the base)
    n_trials: int | None = None
    timeout: float | None = None
    sampler: dict = field(default_factory=lambda: {"name": "tpe"})
    pruner: dict = field(default_factory=lambda: {"name": "none"})
    storage: str | None = None
    out_dir: Path = Path("runs/sweeps")
    workers: int = 1
    gpus_per_trial: int = 1
    trials_per_gpu: int | str = 1  # workers pinned to each GPU, or "auto" (ablate.sweep.probe); with GPUs only
    basis: Basis | None = None  # the comparison basis every row (but its exceptions) is held to
    members_auto: bool = False  # `members: auto`: ablate sweep sets members.size from a GPU memory probe (ablate.sweep.probe)
    members_forced: bool = False  # `ablate sweep --members`: its K holds for every row, over a row's own members.size
    _composed: dict[str, ExperimentConfig] = field(default_factory=dict, repr=False, compare=False)

    def set_members(self, size: int, force: bool | None = None) -> None:
        """Every row trains K trials at once as members of one model (as `members: K`); `force` (`ablate sweep
        --members K`, which overrides the file's members) holds K over a row's own members.size too."""
        if force is not None:
            self.members_forced = force
        self.overrides["members.size"] = size
        self._composed.clear()

    def _members_held(self, overrides: dict[str, Any]) -> dict[str, Any]:
        if self.members_forced and "members.size" in overrides:
            return {**overrides, "members.size": self.overrides["members.size"]}
        return overrides

    @property
    def trials_root(self) -> Path:
        """OUT_DIR/trials, resolved: every trial's run directory is directly inside it."""
        return (self.out_dir / "trials").resolve()

    def trial_dir(self, number: int, name: str) -> Path:
        """OUT_DIR/trials/NNNN-NAME: where trial `number` (named for its row, or its sampled values) trains."""
        return _unused(self.trials_root, f"{number:04d}-{safe_name(name)}")

    def group_dir(self, number: int, row: str) -> Path:
        """OUT_DIR/groups/NNNN-ROW: a member group's own folder, named for its first member's trial and row."""
        return _unused((self.out_dir / "groups").resolve(), f"{number:04d}-{safe_name(row)}")

    def rows(self) -> list[tuple[str, int | None]]:
        """(row name, seed) of every grid trial: the row's own seeds, else the sweep's; None when neither lists any."""
        return [(row, s) for row in self.variants for s in (self.row_seeds.get(row) or self.seeds or [None])]

    def config_for(
        self, overrides: dict[str, Any], seed: int | None = None, trial_dir: Path | None = None, extra: dict[str, Any] | None = None
    ) -> ExperimentConfig:
        """The base experiment, then the sweep-wide overrides, then the row's (or sampled) overrides."""
        # merged by nest, in order: a row's `model: {...}` adds to the sweep's `model: {...}`, as its dotted keys would
        last = {"seed": seed} if seed is not None else {}
        last |= {"out_dir": str(trial_dir)} if trial_dir is not None else {}
        return load_config(self.base, named_in="sweep", **nest(self.overrides, self._members_held(overrides), extra or {}, last))

    def row_config(self, overrides: dict[str, Any]) -> ExperimentConfig:
        """config_for(overrides) as loading, checking and describing the sweep read it: each set of overrides composed
        once, on the base composed once (ablate.config.leaves; in full where that cannot), so a 5,000-row file loads in
        seconds. Shared: read it, never change it. A trial's worker composes its own config afresh (config_for), from
        the base files as they are then."""
        overrides = self._members_held(overrides)
        key = repr(list(overrides.items()))
        if key not in self._composed:
            self._composed[key] = self._compose_row(overrides)
        return self._composed[key]

    def _compose_row(self, overrides: dict[str, Any]) -> ExperimentConfig:
        if not overrides:
            return self.config_for({})
        cfg = with_leaves(self.row_config({}), overrides)  # the base holds the sweep-wide overrides
        if cfg is not None:
            try:
                validate(cfg)
                return cfg
            except ConfigError:
                pass  # composed in full below, whose error says how to register an unknown variant
        return self.config_for(overrides)


def nest(*dotted: dict[str, Any]) -> dict:
    """{'model.heads': 4} -> {'model': {'heads': 4}}, for each mapping in turn. A section given whole ({'model': {'d_ff':
    64}}) merges with the keys given dotted or whole before it (a later key wins), and is copied: the sweep's own
    overrides are never written into."""
    out: dict = {}
    for key, value in (item for mapping in dotted for item in mapping.items()):
        parts = str(key).split(".")
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override '{key}' goes below '{p}', which is not a section")
        _put(node, parts[-1], value)
    return out


def _put(node: dict, key: str, value: Any) -> None:
    if isinstance(value, Mapping) and isinstance(node.get(key), dict):
        for k, v in value.items():
            _put(node[key], k, v)
    else:
        node[key] = copy.deepcopy(value)


def _inside(root: Path, name: str) -> Path:
    path = root / name
    assert path.parent == root  # safe_name() keeps every trial and group inside the sweep's out_dir
    return path


def _unused(root: Path, name: str) -> Path:
    """ROOT/NAME, or ROOT/NAME-2 (-3, ...) where that folder already holds files: a study restored from an older copy
    numbers its new trials as the lost ones were, and their run folders are kept, not trained into."""
    path, n = _inside(root, name), 1
    while path.is_dir() and any(path.iterdir()):
        n += 1
        path = _inside(root, f"{name}-{n}")
    return path


def safe_name(name: str) -> str:
    """A path component that cannot leave its parent directory ('../x', '/abs', '..' all become harmless)."""
    cleaned = SAFE_NAME.sub("_", str(name)).strip("._") or "trial"
    return cleaned[:80]


def diff_from_base(sweep: Sweep, cfg: ExperimentConfig) -> dict[str, tuple[Any, Any]]:
    """Keys whose value differs from the base experiment with the sweep-wide overrides: key -> (base, trial).

    out_dir and sweep/logging bookkeeping are left out."""
    found = _differences(sweep.row_config({}), cfg, "")
    return {k: found[k] for k in sorted(found) if not k.startswith(("out_dir", "sweep.", "logging."))}


def _differences(before: Any, after: Any, prefix: str) -> dict[str, tuple[Any, Any]]:
    """ablate.config.diff of two configs, read off the dataclasses: sections that compare equal are skipped whole (a
    dry run diffs every row, and flattening both configs costs more than the rest of its work)."""
    out = {}
    for name, a in vars(before).items():
        b = getattr(after, name)
        if a is b or a == b:
            continue
        if is_dataclass(a):
            out.update(_differences(a, b, f"{prefix}{name}."))
        else:
            out[f"{prefix}{name}"] = (a, b)
    return out

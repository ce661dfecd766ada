"""Sweep files (`sweeps/*.yaml`): their schema, validation, and the trials they describe.

A sweep names a base experiment, an objective, a budget and its trials, either as named
`variants` (rows of config overrides, run as a grid times `seeds`, the form Table 3 needs) or
as an Optuna `search` space with a sampler and a pruner. Loading validates everything, each
row's overrides included, so a typo fails before any trial starts, naming the row and key.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ablate.config import ConfigError, ExperimentConfig, flatten, load_config, to_dict

TOP_KEYS = {"name", "base", "overrides", "objective", "n_trials", "timeout", "seeds", "variants", "search", "sampler", "pruner",
            "storage", "out_dir", "workers", "gpus_per_trial"}
PARAM_TYPES = {"categorical", "int", "float"}
SAMPLERS = {"tpe", "random", "grid", "cmaes"}
PRUNERS = {"none", "median", "successive_halving", "hyperband"}
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
    n_trials: int | None = None
    timeout: float | None = None
    sampler: dict = field(default_factory=lambda: {"name": "tpe"})
    pruner: dict = field(default_factory=lambda: {"name": "none"})
    storage: str | None = None
    out_dir: Path = Path("runs/sweeps")
    workers: int = 1
    gpus_per_trial: int = 1

    @property
    def mode(self) -> str:
        return "variants" if self.variants else "search"

    def rows(self) -> list[tuple[str, int | None]]:
        """(row name, seed) of every grid trial; the seed is None when the sweep lists no seeds."""
        return [(row, s) for row in self.variants for s in (self.seeds or [None])]

    def config_for(self, overrides: dict[str, Any], seed: int | None = None, trial_dir: Path | None = None,
                   extra: dict[str, Any] | None = None) -> ExperimentConfig:
        """The base experiment, then the sweep-wide overrides, then the row's (or sampled) overrides."""
        merged = {**self.overrides, **overrides, **(extra or {})}
        if seed is not None:
            merged["seed"] = seed
        if trial_dir is not None:
            merged["out_dir"] = str(trial_dir)
        return load_config(self.base, **nest(merged))


def nest(dotted: dict[str, Any]) -> dict:
    """{'model.heads': 4} -> {'model': {'heads': 4}}."""
    out: dict = {}
    for key, value in dotted.items():
        parts = str(key).split(".")
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override '{key}' goes below '{p}', which is not a section")
        node[parts[-1]] = value
    return out


def safe_name(name: str) -> str:
    """A path component that cannot leave its parent directory ('../x', '/abs', '..' all become harmless)."""
    cleaned = SAFE_NAME.sub("_", str(name)).strip("._") or "trial"
    return cleaned[:80]


def row_group(row: str) -> str:
    """Table 3 letter of a row name: 'A-h1' -> 'A', 'base' -> 'base'."""
    return row.split("-", 1)[0]


def _fail(path: Path, msg: str) -> ConfigError:
    return ConfigError(f"{path}: {msg}")


def _check_keys(path: Path, where: str, got: dict, allowed: set[str]) -> None:
    for key in got:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), sorted(allowed), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise _fail(path, f"unknown key '{key}' in {where}{hint} (allowed: {sorted(allowed)})")


def _objective(path: Path, raw: Any) -> Objective:
    raw = raw or {"metric": "val/bleu", "direction": "maximize"}
    if isinstance(raw, str):
        raw = {"metric": raw}
    _check_keys(path, "objective", raw, {"metric", "terms", "direction"})
    if "terms" in raw and "metric" in raw:
        raise _fail(path, "objective has both 'metric' and 'terms'; give one")
    terms = raw.get("terms") or {raw.get("metric", "val/bleu"): 1.0}
    if not isinstance(terms, dict) or not all(isinstance(w, (int, float)) for w in terms.values()):
        raise _fail(path, "objective.terms must map metric names to numeric weights, e.g. {val/bleu: 1.0, speed/tokens_per_s: 0.001}")
    direction = raw.get("direction", "maximize")
    if direction not in ("maximize", "minimize"):
        raise _fail(path, f"objective.direction='{direction}' is not one of ['maximize', 'minimize']")
    return Objective({str(k): float(v) for k, v in terms.items()}, direction)


def _search(path: Path, raw: dict) -> dict[str, dict]:
    for key, spec in raw.items():
        where = f"search.'{key}'"
        if not isinstance(spec, dict) or spec.get("type") not in PARAM_TYPES:
            raise _fail(path, f"{where} needs type: one of {sorted(PARAM_TYPES)}")
        _check_keys(path, where, spec, {"type", "choices", "low", "high", "log", "step"})
        if spec["type"] == "categorical" and not spec.get("choices"):
            raise _fail(path, f"{where} (categorical) needs a non-empty 'choices' list")
        if spec["type"] != "categorical":
            if "low" not in spec or "high" not in spec or not spec["low"] < spec["high"]:
                raise _fail(path, f"{where} ({spec['type']}) needs low < high, got low={spec.get('low')} high={spec.get('high')}")
            if spec.get("log") and spec["low"] <= 0:
                raise _fail(path, f"{where} has log: true, so low must be > 0 (got {spec['low']})")
            if spec.get("log") and spec.get("step") and (spec["type"] == "float" or spec["step"] != 1):
                raise _fail(path, f"{where}: Optuna cannot combine log: true with step: {spec['step']}; drop one of them")
    return raw


def _component(path: Path, raw: Any, kind: str, names: set[str], default: str) -> dict:
    raw = raw or {"name": default}
    if isinstance(raw, str):
        raw = {"name": raw}
    if raw.get("name") not in names:
        raise _fail(path, f"{kind}.name='{raw.get('name')}' is not one of {sorted(names)}")
    return dict(raw)


def load_sweep(path: str | Path) -> Sweep:
    """Parse and validate a sweep file; every row (and the search space's bounds) is checked against the schema."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"sweep file not found: {path}") from None
    except yaml.YAMLError as e:
        raise _fail(path, f"not valid (safe) YAML: {e}") from None
    if not isinstance(raw, dict):
        raise _fail(path, "must be a mapping (name, base, objective, variants or search, ...)")
    _check_keys(path, "the sweep file", raw, TOP_KEYS)
    if bool(raw.get("variants")) == bool(raw.get("search")):
        raise _fail(path, "give exactly one of 'variants' (named rows of overrides) or 'search' (an Optuna space)")
    base = raw.get("base") or []
    base = [base] if isinstance(base, str) else list(base)
    # Base configs are named relative to the project root (the usual cwd) or to the sweep file.
    base = [b if Path(b).exists() or not (path.parent / b).exists() else str(path.parent / b) for b in base]
    name = str(raw.get("name") or path.stem)
    sweep = Sweep(
        name=name, path=path, base=base, objective=_objective(path, raw.get("objective")),
        overrides=dict(raw.get("overrides") or {}), variants=dict(raw.get("variants") or {}),
        search=_search(path, dict(raw.get("search") or {})), seeds=[int(s) for s in raw.get("seeds") or []],
        n_trials=raw.get("n_trials"), timeout=raw.get("timeout"),
        sampler=_component(path, raw.get("sampler"), "sampler", SAMPLERS, "tpe"),
        pruner=_component(path, raw.get("pruner"), "pruner", PRUNERS, "none"),
        storage=raw.get("storage"), out_dir=Path(raw.get("out_dir") or f"runs/sweeps/{safe_name(name)}"),
        workers=int(raw.get("workers") or 1), gpus_per_trial=int(raw.get("gpus_per_trial") or 1),
    )
    _validate_trials(sweep)
    return sweep


def _validate_trials(sweep: Sweep) -> None:
    path = sweep.path
    for row, overrides in sweep.variants.items():
        if not isinstance(row, str):
            raise _fail(path, f"variant name {row!r} must be a string (quote it in YAML)")
        if not isinstance(overrides, dict):
            raise _fail(path, f"variant '{row}' must map config keys to values, got {overrides!r}")
        try:
            sweep.config_for(overrides)
        except ConfigError as e:
            raise _fail(path, f"variant '{row}': {e}") from None
    for key, spec in sweep.search.items():
        probe = spec["choices"][0] if spec["type"] == "categorical" else spec["low"]
        try:
            sweep.config_for({key: int(probe) if spec["type"] == "int" else probe})
        except ConfigError as e:
            raise _fail(path, f"search.'{key}': {e}") from None
    if not sweep.variants and sweep.sampler["name"] == "grid" and any(s["type"] != "categorical" for s in sweep.search.values()):
        raise _fail(path, "sampler 'grid' needs every search parameter to be categorical")
    if sweep.mode == "search" and not sweep.n_trials and not sweep.timeout and sweep.sampler["name"] != "grid":
        raise _fail(path, "a search sweep needs a budget: n_trials or timeout (a grid search is bounded by its grid)")
    if "val/bleu" in sweep.objective.terms and not sweep.config_for({}).train.val_bleu:
        raise _fail(path, "the objective uses val/bleu but train.val_bleu is false (no BLEU is computed); "
                          "set train.val_bleu: true or use val/loss (direction: minimize)")
    if sweep.workers < 1 or sweep.gpus_per_trial < 1:
        raise _fail(path, "workers and gpus_per_trial must be >= 1")


def diff_from_base(sweep: Sweep, cfg: ExperimentConfig) -> dict[str, tuple[Any, Any]]:
    """Keys whose value differs from the base experiment with the sweep-wide overrides: key -> (base, trial).

    out_dir and sweep/logging bookkeeping are left out."""
    base = flatten(to_dict(sweep.config_for({})))
    trial = flatten(to_dict(cfg))
    skip = ("out_dir", "sweep.", "logging.")
    return {k: (base.get(k), v) for k, v in trial.items() if base.get(k) != v and not k.startswith(skip)}

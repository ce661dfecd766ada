"""Loading a sweep file: parse, then validate everything, each row's overrides included, so a typo fails before
any trial starts, naming the file, the row and the key."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

from ablate import plugins
from ablate.config import ConfigError
from ablate.config.validation import MAX_PARALLEL
from ablate.files.yaml_file import read_yaml
from ablate.run.summary_fields import metric_doubt, metric_problem, metric_unlogged
from ablate.sweep import fields
from ablate.sweep.basis import parse_basis
from ablate.sweep.components import PRUNERS, SAMPLERS, make_pruner, make_sampler
from ablate.sweep.devices import combination_problem, parse_trials_per_gpu
from ablate.sweep.options import component_problem, is_number
from ablate.sweep.plan import plan_for
from ablate.sweep.search_space import STUDY_SET, check_search, probes, search_override, value_problem
from ablate.sweep.spec import Objective, Sweep, safe_name

log = logging.getLogger(__name__)

TOP_KEYS = {
    "name", "base", "overrides", "objective", "n_trials", "timeout", "seeds",
    "row_seeds", "variants", "search", "sampler", "pruner", "storage", "out_dir",
    "workers", "gpus_per_trial", "trials_per_gpu", "basis", "members", "member_data",
}  # fmt: skip


def _with_plugin_paths(path: Path, overrides):
    """Plugin files named in the sweep-wide overrides or a row are relative to the sweep file, as in any config file
    (a row's were relative to the cwd: the file loaded from its own folder only). Anything else is checked later."""
    if not isinstance(overrides, dict) or "plugins" not in overrides:
        return overrides
    named = overrides["plugins"]
    named = [named] if isinstance(named, str) else [] if named is None else named
    if not isinstance(named, list) or not all(isinstance(p, str) for p in named):
        return overrides
    return {**overrides, "plugins": [plugins.resolve(p, path.parent) for p in named]}


def _base(path: Path, raw: dict, to_run: bool = True) -> list[str]:
    """The base experiment files, each an existing file named relative to the cwd (the project root, usually) or to
    the sweep file."""
    base = fields.given(raw, "base", [])
    base = [base] if isinstance(base, str) else base
    if not isinstance(base, list) or not all(isinstance(b, str) for b in base):
        raise fields.fail(path, f"base must be an experiment file or a list of them, got {raw['base']!r}")
    if not base and to_run:  # every trial would train the schema's defaults: the paper's base model for 100,000 steps
        raise fields.fail(path, "base is missing: name the experiment file(s) every trial starts from (base: experiments/X.yaml)")
    found = []
    for b in base:
        where = Path(b) if Path(b).exists() or not (path.parent / b).exists() else path.parent / b
        if where.is_dir():
            raise fields.fail(path, f"base '{b}' is a directory ({where.resolve()}), not an experiment file")
        if not where.is_file():
            looked = " and in ".join(map(str, dict.fromkeys([Path.cwd(), path.parent.resolve()])))
            raise fields.fail(path, f"base '{b}' is not a file (looked in {looked})")
        found.append(str(where))
    return found


def _objective(path: Path, raw: Any) -> Objective:
    raw = raw or {"metric": "val/bleu", "direction": "maximize"}
    if isinstance(raw, str):
        raw = {"metric": raw}
    if not isinstance(raw, dict):
        raise fields.fail(path, f"objective must be a metric name or a mapping (metric or terms, direction), got {raw!r}")
    fields.check_keys(path, "objective", raw, {"metric", "terms", "direction"}, at="objective")
    if "terms" in raw and "metric" in raw:
        raise fields.fail(path, "objective has both 'metric' and 'terms'; give one")
    if not isinstance(raw.get("metric", ""), str):  # a list or mapping stopped the load on a TypeError (unhashable)
        raise fields.fail(path, f"objective.metric must be one metric name, e.g. val/bleu; got {raw['metric']!r:.60}")
    terms = raw.get("terms") or {raw.get("metric", "val/bleu"): 1.0}
    if not isinstance(terms, dict) or not all(isinstance(w, (int, float)) for w in terms.values()):
        raise fields.fail(path, "objective.terms must map metric names to numeric weights, e.g. {val/bleu: 1.0, speed/tokens_per_s: 0.001}")
    for metric, weight in terms.items():
        if problem := metric_problem(str(metric)):
            raise fields.fail(path, f"objective: {problem}")
        # A negative weight is a penalty (maximize BLEU - 0.001 * step_ms); zero, NaN or a bool is no weight at all.
        if not is_number(weight) or not math.isfinite(weight) or weight == 0:
            raise fields.fail(path, f"objective.terms: the weight of '{metric}' is {weight!r}; it must be a finite number other than 0")
    direction = raw.get("direction", "maximize")
    if direction not in ("maximize", "minimize"):
        raise fields.fail(path, f"objective.direction='{direction}' is not one of ['maximize', 'minimize']")
    return Objective({str(k): float(v) for k, v in terms.items()}, direction)


def _component(path: Path, raw: Any, kind: str, names, default: str) -> dict:
    raw = raw or {"name": default}
    if isinstance(raw, str):
        raw = {"name": raw}
    if not isinstance(raw, dict):
        raise fields.fail(path, f"{kind} must be a name or a mapping with a name and settings, e.g. {{name: {default}}}; got {raw!r}")
    if raw.get("name") not in names:
        raise fields.fail(path, f"{kind}.name='{raw.get('name')}' is not one of {sorted(names)}")
    return dict(raw)


def load_sweep(path: str | Path, to_run: bool = True) -> Sweep:
    """Parse and validate a sweep file; every row (and the search space's bounds) is checked against the schema.
    `to_run=False`: the file is read only to find its study (name, storage, out_dir), by `ablate status`, `table` and
    `archive`, and its trials are not checked: a study run before a check was added (a key since refused) still reads."""
    path = Path(path)
    raw = read_yaml(path, "sweep file")
    if not isinstance(raw, dict):
        raise fields.fail(path, "must be a mapping (name, base, objective, variants or search, ...)")
    fields.check_keys(path, "the sweep file", raw, TOP_KEYS, at="")
    variants = fields.mapping(path, raw, "variants", "{base: {}, A-h1: {model.heads: 1}}")
    search = fields.mapping(path, raw, "search", "{train.lr_scale: {type: float, low: 0.5, high: 2}}")
    if bool(variants) == bool(search):
        raise fields.fail(path, "give exactly one of 'variants' (named rows of overrides) or 'search' (an Optuna space)")
    name = fields.given(raw, "name", path.stem)
    if not isinstance(name, (str, int)) or isinstance(name, bool):
        raise fields.fail(path, f"name must be a string, got {name!r}")
    name = str(name)
    sweep = Sweep(
        name=name,
        path=path,
        base=_base(path, raw, to_run),
        objective=_objective(path, raw.get("objective")),
        overrides=_with_plugin_paths(
            path, {**dict(fields.mapping(path, raw, "overrides", "{train.max_steps: 1000}")), **_members(path, raw)}
        ),
        variants={row: _with_plugin_paths(path, o) for row, o in variants.items()},
        search=check_search(path, dict(search)),
        seeds=fields.seeds(path, "seeds", raw.get("seeds")),
        row_seeds=fields.row_seeds(path, raw),
        n_trials=fields.count(path, "n_trials", raw.get("n_trials")),
        timeout=fields.seconds(path, "timeout", raw.get("timeout")),
        sampler=_component(path, raw.get("sampler"), "sampler", SAMPLERS, "tpe"),
        pruner=_component(path, raw.get("pruner"), "pruner", PRUNERS, "none"),
        storage=fields.text(path, "storage", raw.get("storage"), secret=True),
        out_dir=Path(fields.text(path, "out_dir", raw.get("out_dir")) or f"runs/sweeps/{safe_name(name)}").expanduser(),
        workers=fields.count(path, "workers", fields.given(raw, "workers", 1), MAX_PARALLEL),
        gpus_per_trial=fields.count(path, "gpus_per_trial", fields.given(raw, "gpus_per_trial", 1)),
        trials_per_gpu=parse_trials_per_gpu(fields.given(raw, "trials_per_gpu", 1), f"{path}: trials_per_gpu"),
        members_auto=str(raw.get("members", "")).strip().lower() == "auto",
    )
    try:
        sweep.basis = parse_basis(raw.get("basis"), set(map(str, sweep.variants)))
    except ValueError as e:
        raise fields.fail(path, str(e)) from None
    if to_run:
        _validate_trials(sweep)
    return sweep


def _members(path: Path, raw: dict) -> dict:
    """`members: K` and `member_data: own|shared`: the study-wide members.size and members.data (a row sets its own
    with `members.size` among its overrides)."""
    out = {}
    if "members" in raw and str(raw["members"]).strip().lower() != "auto":  # auto: set by `ablate sweep` on GPUs
        out["members.size"] = fields.count(path, "members", raw["members"])
    if "member_data" in raw:
        if raw["member_data"] not in ("own", "shared"):  # said here, not as every row's or search key's error
            raise fields.fail(path, f"member_data={raw['member_data']!r} is not one of ['own', 'shared']")
        out["members.data"] = raw["member_data"]
    return out


def _row_problem(sweep: Sweep, row: Any, overrides: Any) -> str | None:
    """Why a variant row cannot be run (its name, its overrides, or the config they make), or None."""
    if not isinstance(row, str):
        return f"variant name {row!r} must be a string (quote it in YAML)"
    if not isinstance(overrides, dict):
        empty = " (a row that changes nothing is written {})" if overrides is None else ""
        return f"variant '{row}' must map config keys to values, got {overrides!r}{empty}"
    if set_by_study := [str(k) for k in overrides if str(k).startswith(STUDY_SET)]:
        return f"variant '{row}': {', '.join(set_by_study)} is the study's to set for each trial, so the row's would change nothing"
    if problem := fields.seed_overridden(f"variant '{row}'", overrides, sweep.row_seeds.get(row) or sweep.seeds, row):
        return problem
    try:
        sweep.row_config(overrides)
    except ConfigError as e:
        return f"variant '{row}': {e}"
    return None


SHOWN_ROWS = 20  # bad rows named in one error; the rest counted


def _validate_trials(sweep: Sweep) -> None:
    path = sweep.path
    if problem := fields.seed_overridden("overrides", sweep.overrides, sweep.seeds if sweep.variants else []):
        raise fields.fail(path, problem)
    try:  # the base with the sweep-wide overrides first: a bad value there is not every row's or search key's error
        base = sweep.row_config({})
    except ConfigError as e:
        raise fields.fail(path, f"base {', '.join(map(str, sweep.base))} with the sweep's overrides: {e}") from None
    problems = [problem for row, overrides in sweep.variants.items() if (problem := _row_problem(sweep, row, overrides))]
    if len(problems) == 1:
        raise fields.fail(path, problems[0])
    if problems:  # every bad row at once: a file fixed row by row took a run of the command per row
        more = f"\n  ... and {len(problems) - SHOWN_ROWS} more" if len(problems) > SHOWN_ROWS else ""
        listed = "\n".join("  - " + p.replace("\n", "\n    ") for p in problems[:SHOWN_ROWS])
        raise fields.fail(path, f"{len(problems)} variants cannot be run:\n{listed}{more}")
    for key, spec in sweep.search.items():  # every choice and both bounds: a trial drawing another failed as it ran
        if problem := value_problem(sweep, key, spec):
            raise fields.fail(path, problem)
    _check_objective_is_logged(sweep, base)
    _check_basis(sweep)
    problem = plan_for(sweep).check()
    if problem:
        raise fields.fail(path, problem)
    problem = component_problem("sampler", sweep.sampler, lambda spec: make_sampler(spec, sweep.search)) or component_problem(
        "pruner", sweep.pruner, make_pruner
    )
    if problem:
        raise fields.fail(path, problem)
    train = base.train
    if "val/bleu" in sweep.objective.terms and not (train.val_bleu or train.eval_record):
        raise fields.fail(
            path,
            "the objective uses val/bleu but train.val_bleu and train.eval_record are both false (no BLEU is computed); "
            "set one of them true or use val/loss (direction: minimize)",
        )
    problem = combination_problem(sweep.trials_per_gpu, sweep.gpus_per_trial)
    if problem:
        raise fields.fail(path, problem)


def _check_objective_is_logged(sweep: Sweep, base) -> None:
    """A val/* metric ablate does not report can only come from a plugin's callback: with no plugin named or installed,
    every trial trained to its end and then failed on it (refused); with one, a near miss of ablate's own is said."""
    unlogged = [problem for metric in sweep.objective.terms if (problem := metric_unlogged(metric))]
    rows = (sweep.row_config(o) for o in sweep.variants.values())  # asked only of an objective ablate does not report
    if unlogged and not (base.plugins or any(row.plugins for row in rows) or plugins.installed()):
        raise fields.fail(sweep.path, f"objective: {unlogged[0]}")
    for metric in sweep.objective.terms:
        if doubt := metric_doubt(metric):
            log.warning("warning: %s: objective: %s", sweep.path, doubt)


def _check_basis(sweep: Sweep) -> None:
    """The base experiment on the stated basis, and every row (or the search at its bounds) stopping and scoring as
    the base does, save the rows the basis excepts."""
    if sweep.basis is None:
        return
    base = sweep.row_config({})
    problem = sweep.basis.base_problem(base)
    if problem:
        raise fields.fail(
            sweep.path, f"the base experiment is off the study's basis ({sweep.basis.describe()}): {problem}; change the base or the basis"
        )
    checked = {f"variant '{row}'": o for row, o in sweep.variants.items() if row not in sweep.basis.exempt}
    for key, spec in sweep.search.items():
        for probe in probes(spec):
            checked[f"search.'{key}'={probe!r}"] = search_override(key, spec, probe)
    for where, overrides in checked.items():
        problem = sweep.basis.row_problem(sweep.row_config(overrides), base)
        if problem:
            hint = "list the row under basis.except" if where.startswith("variant") else "search another key"
            raise fields.fail(sweep.path, f"{where} is off the study's basis ({sweep.basis.describe()}): {problem}; change it, or {hint}")

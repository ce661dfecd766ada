"""What a run trained, as two runs are compared by it: a row's seeds must agree on it (`ablate table`), and a sweep
row that finished on another config than its file gives now is named (`ablate sweep`). The config sections, less the
keys that say where and how a run ran or what it kept, with a key added to the schema since a run was trained counted
at its default (a study continued on a newer checkout); a config's own bookkeeping (a W&B run's) is not compared."""

from __future__ import annotations

from ablate.config.dicts import flatten, to_dict
from ablate.config.schema import ExperimentConfig, TrainConfig

TRAINED = ("model.", "data.", "train.")
RUN_SPECIFIC = tuple(f"data.{k}" for k in ("dir", "cache_dir", "num_workers", "train_prefix", "valid_prefix", "test_prefix"))
RUN_SPECIFIC += tuple(
    f"train.{k}"
    for k in ("accelerator", "devices", "strategy", "num_threads", "log_every_steps", "peak_tflops", "compile", "keep_last", "eval_record")
)
_DEFAULTS = flatten(to_dict(ExperimentConfig()))


def trained_differences(a: dict, b: dict) -> dict[str, tuple]:
    """The keys in which two runs' configs (flattened) trained differently -> (a's value, b's value), sorted."""
    # A key the schema no longer has (retired: ablate.config.retired) trains nothing now, whatever a run recorded.
    keys = sorted(k for k in a.keys() | b.keys() if k in _DEFAULTS and k.startswith(TRAINED) and not k.startswith(RUN_SPECIFIC))
    ours, theirs = ({k: config.get(k, _DEFAULTS.get(k)) for k in keys} for config in (a, b))
    return {k: (ours[k], theirs[k]) for k in keys if not same_value(k, ours[k], theirs[k])}


def same_value(key: str, a, b) -> bool:
    """Whether two recorded values of `key` train alike: a time budget by its seconds (`01:00:00` and `3600`; an
    earlier ablate read the first as base-60 and saved 3600), the rest as written. The one rule for a resume's check
    (ablate.run.rundir) and for comparing runs (`ablate table`, `ablate sweep`)."""
    return a == b or (key == "train.max_time" and _seconds(a) == _seconds(b))


def _seconds(max_time):
    try:
        return TrainConfig(max_time=None if max_time is None else str(max_time)).max_time_seconds
    except ValueError:
        return max_time  # not a budget: compared as written

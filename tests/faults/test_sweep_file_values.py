"""Issue 32 item 7: a sweep file (or an `ablate sweep` flag) with a value no study can run is an error naming the file
and the key (or the flag) before anything starts: `base:` naming a directory was "[Errno 21] Is a directory" naming
neither; `seeds: []`, `n_trials: -3`, `timeout: -1` or `.nan` ran an empty study and exited 0; `workers: 0` was
quietly 1; a negative pruner setting or a NaN objective weight surfaced, if at all, inside a trial."""

from __future__ import annotations

import math

import pytest
import yaml
from helpers import run_cli

from ablate.config import ConfigError
from ablate.sweep.load import load_sweep

SEARCH = {"variants": None, "search": {"train.lr_scale": {"type": "float", "low": 0.5, "high": 2.0}}, "n_trials": 2}


def write(tmp_path, **fields):
    """TMP/sweep.yaml over TMP/base.yaml (one row, `base`), with `fields` replacing the defaults (None: left out)."""
    (tmp_path / "base.yaml").write_text("model: {d_model: 32, heads: 4}\n")
    (tmp_path / "adir").mkdir(exist_ok=True)
    raw = {"name": "v", "base": "base.yaml", "out_dir": str(tmp_path / "out"), "variants": {"base": {}}, **fields}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in raw.items() if v is not None}))
    return path


def case(fields: dict, *named: str):
    return pytest.param(fields, named, id=",".join(f"{k}={v!r}" for k, v in fields.items())[:60])


CASES = [
    case({"base": "adir"}, "base", "adir", "directory"),
    case({"base": ["base.yaml", "adir"]}, "base", "adir", "directory"),
    case({"base": "nope.yaml"}, "nope.yaml"),
    case({"base": 5}, "base"),
    case({"seeds": []}, "seeds"),
    case({"seeds": [-1]}, "seeds", "-1"),
    case({"seeds": [2**32]}, "seeds", str(2**32)),
    case({"seeds": [1, 1]}, "seeds", "twice"),
    case({"row_seeds": {"base": []}}, "row_seeds.'base'"),
    case({"n_trials": -3}, "n_trials", "-3"),
    case({"n_trials": 0}, "n_trials"),
    case({"n_trials": True}, "n_trials"),
    case({"n_trials": 2.5}, "n_trials"),
    case({"n_trials": "5"}, "n_trials"),
    case({"timeout": -1}, "timeout", "-1"),
    case({"timeout": 0}, "timeout"),
    case({"timeout": math.nan}, "timeout", "nan"),
    case({"timeout": math.inf}, "timeout", "inf"),
    case({"timeout": True}, "timeout"),
    case({"timeout": "1h"}, "timeout"),
    case({"workers": 0}, "workers"),
    case({"workers": -2}, "workers", "-2"),
    case({"workers": 2.5}, "workers"),
    case({"workers": "abc"}, "workers"),
    case({"workers": True}, "workers"),
    case({"gpus_per_trial": 0}, "gpus_per_trial"),
    case({"gpus_per_trial": 1.5}, "gpus_per_trial"),
    case({"trials_per_gpu": 0}, "trials_per_gpu"),
    case({"trials_per_gpu": -1}, "trials_per_gpu"),
    case({"trials_per_gpu": True}, "trials_per_gpu"),
    case({"objective": {"terms": {"val/loss": math.nan}, "direction": "minimize"}}, "objective.terms", "val/loss"),
    case({"objective": {"terms": {"val/loss": math.inf}, "direction": "minimize"}}, "objective.terms", "val/loss"),
    case({"objective": {"terms": {"val/loss": True}, "direction": "minimize"}}, "objective.terms", "val/loss"),
    case({"objective": {"terms": {"val/loss": 0}, "direction": "minimize"}}, "objective.terms", "val/loss"),
    case({"objective": {"terms": {"val/loss": "1"}, "direction": "minimize"}}, "objective.terms"),
    case({"objective": 5}, "objective"),
    case({"overrides": [1]}, "overrides"),
    case({"variants": ["base"]}, "variants"),
    case({"variants": {"base": {}, "E-learned": None}}, "variant 'E-learned'", "a row that changes nothing is written {}"),
    case({"out_dir": [1]}, "out_dir"),
    case({"storage": 5}, "storage"),
    case({"pruner": 5}, "pruner"),
    case({"pruner": {"name": "median", "n_startup_trials": -1}}, "pruner", "n_startup_trials"),
    case({"pruner": {"name": "median", "n_warmup_steps": math.inf}}, "pruner", "n_warmup_steps"),
    case({"pruner": {"name": "median", "interval_steps": True}}, "pruner", "interval_steps"),
    case({"pruner": {"name": "median", "interval_steps": 0}}, "pruner", "interval_steps"),
    case({"pruner": {"name": "median", "n_startup_trials": 2.5}}, "pruner", "n_startup_trials"),
    case({"pruner": {"name": "median", "n_startup_trail": 1}}, "pruner", "n_startup_trail"),
    case({"pruner": {"name": "hyperband", "reduction_factor": 1}}, "pruner", "reduction_factor"),
    case({"pruner": {"name": "hyperband", "min_resource": -1}}, "pruner", "min_resource"),
    case({"sampler": {"name": "tpe", "seed": -1}}, "sampler", "seed"),
    case({"sampler": {"name": "tpe", "seed": True}}, "sampler", "seed"),
    case({"sampler": {"name": "tpe", "n_startup_trials": -5}}, "sampler", "n_startup_trials"),
    case({**SEARCH, "search": {"train.lr_scale": {"type": "float", "low": True, "high": 2.0}}}, "train.lr_scale", "low"),
    case({**SEARCH, "search": {"train.lr_scale": {"type": "float", "low": math.nan, "high": 2.0}}}, "train.lr_scale", "low"),
    case({**SEARCH, "search": {"train.lr_scale": {"type": "float", "low": 0.5, "high": 2.0, "step": 0}}}, "train.lr_scale", "step"),
    case({**SEARCH, "search": {"train.max_steps": {"type": "int", "low": 10, "high": 20, "step": -2}}}, "train.max_steps", "step"),
    case({**SEARCH, "search": {"train.max_steps": {"type": "int", "low": 10.5, "high": 20}}}, "train.max_steps", "low"),
    case({**SEARCH, "search": ["train.lr_scale"]}, "search"),
]


@pytest.mark.parametrize("fields, named", CASES)
def test_a_value_no_study_can_run_is_an_error_naming_the_file_and_key(tmp_path, fields, named):
    path = write(tmp_path, **fields)
    with pytest.raises(ConfigError) as err:
        load_sweep(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: "), msg
    for word in named:
        assert word in msg, (word, msg)


@pytest.mark.parametrize(
    "fields",
    [
        {"seeds": [0, 2**32 - 1], "workers": 2, "gpus_per_trial": 1},
        {"objective": {"terms": {"val/loss": 1, "speed/tokens_per_s": -0.001}, "direction": "minimize"}},  # a negative weight is a penalty
        {"pruner": {"name": "hyperband", "min_resource": 1, "max_resource": "auto", "reduction_factor": 3}},
        {"pruner": {"name": "successive_halving", "min_resource": "auto"}, "sampler": {"name": "tpe", "seed": 0, "multivariate": True}},
        {**SEARCH, "n_trials": 1, "timeout": 3600},
        {**SEARCH, "n_trials": None, "timeout": 0.5},
        {**SEARCH, "search": {"train.max_steps": {"type": "int", "low": 10, "high": 20, "step": 5}}},
    ],
)
def test_values_a_study_can_run_are_accepted(tmp_path, fields):
    """Guards: the checks refuse no value a study can use."""
    load_sweep(write(tmp_path, **fields))


def test_cli_names_the_file_and_key_of_a_base_that_is_a_directory(tmp_path, capsys):
    path = write(tmp_path, base="adir")
    rc, out = run_cli(capsys, "sweep", str(path))
    assert rc == 2 and f"{path}: base 'adir'" in out and "directory" in out, out
    assert "Traceback" not in out and "Errno" not in out


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--n-trials", "0"),
        ("--n-trials", "-3"),
        ("--workers", "0"),
        ("--workers", "-2"),
        ("--trials-per-gpu", "0"),
        ("--trials-per-gpu", "-1"),
    ],
)
def test_cli_flags_below_one_are_an_error_naming_the_flag(tmp_path, capsys, flag, value):
    """Checked before --dry-run too: a plan printed for `--workers 0` would promise a study that never runs."""
    rc, out = run_cli(capsys, "sweep", str(write(tmp_path, **SEARCH)), flag, value, "--dry-run")
    assert rc == 2 and flag in out and value in out and (">= 1" in out or "from 1 to" in out), out
    assert "Traceback" not in out

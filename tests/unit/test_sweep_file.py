"""Sweep files are validated on load (naming the row and key), plan the right trials, and keep names inside out_dir."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from ablate.cli import main
from ablate.config import ConfigError
from ablate.study import enqueue_rows, objective_value, open_study, redact, storage_url
from ablate.sweep import diff_from_base, load_sweep, nest, row_group, safe_name

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "base.yaml").write_text("model:\n  d_model: 64\n  heads: 4\n  d_ff: 128\n")
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    return path


VARIANTS = """
name: demo
base: base.yaml
objective: {metric: val/bleu, direction: maximize}
seeds: [1, 2]
variants:
  base: {}
  A-h1: {model.heads: 1, model.d_k: 64, model.d_v: 64}
  E-learned: {model.positional: learned}
"""


def test_variants_expand_to_rows_times_seeds_with_their_differences(tmp_path):
    sweep = load_sweep(write(tmp_path, VARIANTS + f"out_dir: {tmp_path}/out\n"))
    assert sweep.mode == "variants" and sweep.name == "demo"
    assert sweep.rows() == [("base", 1), ("base", 2), ("A-h1", 1), ("A-h1", 2), ("E-learned", 1), ("E-learned", 2)]
    cfg = sweep.config_for(sweep.variants["A-h1"], seed=2)
    assert (cfg.model.heads, cfg.model.d_k, cfg.model.d_model, cfg.seed) == (1, 64, 64, 2)
    assert diff_from_base(sweep, cfg) == {"model.heads": (4, 1), "model.d_k": (None, 64), "model.d_v": (None, 64), "seed": (1, 2)}
    assert diff_from_base(sweep, sweep.config_for({})) == {}


@pytest.mark.parametrize(
    "body, named",
    [
        ("variants:\n  A-h1: {model.haeds: 1}\n", ["A-h1", "model.haeds", "model.heads"]),  # typo in a row: row, key, suggestion
        ("variants:\n  bad: {model.heads: 3}\n", ["bad", "heads"]),  # d_model 64 not divisible by 3 heads
        ("variants:\n  bad: {model.attention: nope}\n", ["bad", "nope", "scaled_dot_product"]),
        ("variants:\n  base: {}\nseedz: [1]\n", ["seedz", "seeds"]),  # unknown top-level key
        ("variants:\n  base: {}\noverrides: {train.val_bleu: false}\n", ["val/bleu", "train.val_bleu is false"]),
        ("variants:\n  base: {}\nsearch:\n  model.heads: {type: categorical, choices: [2]}\n", ["exactly one"]),
        ("search:\n  model.heads: {type: categorical, choices: [2, 4]}\n", ["n_trials or timeout"]),
        ("search:\n  train.lr_scale: {type: float, low: 2, high: 1}\nn_trials: 2\n", ["train.lr_scale", "low < high"]),
        ("search:\n  train.lr_scale: {type: float, low: 0, high: 1, log: true}\nn_trials: 2\n", ["log", "> 0"]),
        ("search:\n  model.nope: {type: int, low: 1, high: 2}\nn_trials: 2\n", ["model.nope"]),
        ("search:\n  x: {type: uniform, low: 1, high: 2}\nn_trials: 2\n", ["'x'", "categorical"]),
        ("variants:\n  base: {}\nsampler: annealing\n", ["sampler.name", "annealing", "tpe"]),
        ("variants:\n  base: {}\npruner: {name: medain}\n", ["pruner.name", "medain", "median"]),
        ("variants:\n  base: {}\nobjective: {metric: val/bleu, direction: up}\n", ["direction", "up"]),
        ("variants:\n  base: !!python/object/apply:os.system ['echo owned']\n", ["safe", "YAML"]),
    ],
)
def test_broken_sweep_files_fail_before_any_trial_naming_what_is_wrong(tmp_path, body, named):
    path = write(tmp_path, f"name: demo\nbase: base.yaml\n{body}")
    with pytest.raises(ConfigError) as err:
        load_sweep(path)
    msg = str(err.value)
    assert str(path) in msg
    for word in named:
        assert word in msg, (word, msg)


def test_missing_sweep_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="sweep file not found: .*nope.yaml"):
        load_sweep(tmp_path / "nope.yaml")


def test_dry_run_prints_trials_and_differences_and_starts_nothing(tmp_path, capsys):
    path = write(tmp_path, VARIANTS + f"out_dir: {tmp_path}/out\n")
    assert main(["sweep", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "6 trials" in out and "A-h1" in out and "model.heads: 4 -> 1" in out and "model.positional: sinusoidal -> learned" in out
    assert not (tmp_path / "out").exists()


def test_cli_reports_a_broken_sweep_with_exit_code_2(tmp_path, capsys):
    path = write(tmp_path, "name: demo\nbase: base.yaml\nvariants:\n  A: {model.heads: 0}\n")
    assert main(["sweep", str(path)]) == 2
    assert "variant 'A'" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["../../etc/passwd", "/abs/path", "..", "a/../../b", "row with spaces", "", "x" * 300])
def test_safe_name_cannot_leave_its_directory(tmp_path, name):
    cleaned = safe_name(name)
    assert cleaned and "/" not in cleaned and not cleaned.startswith(".") and len(cleaned) <= 80
    assert (tmp_path / cleaned).resolve().parent == tmp_path.resolve()


def test_helpers():
    assert nest({"model.heads": 4, "model.d_k": 8, "seed": 1}) == {"model": {"heads": 4, "d_k": 8}, "seed": 1}
    assert (row_group("A-h1"), row_group("base"), row_group("big")) == ("A", "base", "big")
    assert redact("postgresql://ablate:s3cret@127.0.0.1:5432/db") == "postgresql://ablate:***@127.0.0.1:5432/db"
    assert redact("sqlite:////tmp/x.db") == "sqlite:////tmp/x.db"


def test_objective_combines_terms_from_the_run_summary(tmp_path):
    path = write(tmp_path, "name: d\nbase: base.yaml\nvariants: {base: {}}\n"
                           "objective: {terms: {val/bleu: 1.0, speed/tokens_per_s: 0.001}, direction: maximize}\n")
    sweep = load_sweep(path)
    summary = {"best": {"metric": "val/bleu", "value": 30.0}, "last": {"val/bleu": 29.0, "val/ppl": 5.0}, "speed/tokens_per_s": 2000.0}
    assert objective_value(sweep, summary) == pytest.approx(32.0)
    sweep.objective.terms = {"val/nope": 1.0}
    with pytest.raises(KeyError, match="val/nope"):
        objective_value(sweep, summary)


def test_enqueue_rows_is_idempotent_and_only_requeues_dead_rows(tmp_path):
    sweep = load_sweep(write(tmp_path, VARIANTS + f"out_dir: {tmp_path}/out\n"))
    study = open_study(sweep, f"sqlite:///{tmp_path}/study.db")
    assert enqueue_rows(study, sweep) == 6
    assert enqueue_rows(study, sweep) == 0  # every row is already queued
    waiting = study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert sorted(t.user_attrs["row"] for t in waiting) == sorted(r for r, _ in sweep.rows())
    # A row whose trial died with its worker (no fail_reason) is queued again; one that failed by itself is not.
    died, broke = study.ask(), study.ask()
    study.tell(died, state=optuna.trial.TrialState.FAIL)
    broke.set_user_attr("fail_reason", "FloatingPointError: train/loss is nan")
    study.tell(broke, state=optuna.trial.TrialState.FAIL)
    assert enqueue_rows(study, sweep, only_dead=True) == 1
    assert enqueue_rows(study, sweep) == 1  # re-running the sweep retries the broken row too


def test_shipped_sweep_files_pass_validation(monkeypatch):
    monkeypatch.chdir(ROOT)
    files = sorted((ROOT / "sweeps").glob("*.yaml"))
    assert files
    for path in files:
        load_sweep(path)


@pytest.mark.parametrize("sampler", ["tpe", "random", "grid", "cmaes"])
def test_every_sampler_and_pruner_drives_the_search_space(tmp_path, sampler):
    from ablate.study import _suggest, grid_size, make_pruner, tell

    space = ("search:\n  train.lr_scale: {type: categorical, choices: [0.5, 1.0]}\n  model.heads: {type: categorical, choices: [2, 4]}\n"
             if sampler == "grid" else
             "search:\n  train.lr_scale: {type: float, low: 0.1, high: 10, log: true}\n  train.warmup: {type: int, low: 10, high: 100, step: 10}\n")
    sweep = load_sweep(write(tmp_path, f"name: s\nbase: base.yaml\nn_trials: 4\nsampler: {{name: {sampler}, seed: 0}}\n{space}"))
    study = open_study(sweep, f"sqlite:///{tmp_path}/study.db")
    for pruner in ("none", "median", "successive_halving", "hyperband"):
        assert make_pruner(load_sweep(write(tmp_path, f"name: s\nbase: base.yaml\nn_trials: 1\npruner: {pruner}\n{space}"))) is not None
    seen = []
    for _ in range(4):
        trial = study.ask()
        params = {k: _suggest(trial, k, spec) for k, spec in sweep.search.items()}
        sweep.config_for(params)  # every sample is a valid config
        seen.append(tuple(params.values()))
        tell(study, trial, sum(float(v) for v in params.values()))
    if sampler == "grid":
        assert grid_size(sweep) == 4
        assert sorted(seen) == [(0.5, 2), (0.5, 4), (1.0, 2), (1.0, 4)]  # the grid, each point once
    else:
        assert all(0.1 <= lr <= 10 and warmup % 10 == 0 for lr, warmup in seen) and len(set(seen)) == 4


@pytest.mark.parametrize("storage", ["journal.log", "/tmp/optuna-journal.log", "redis://:pw@127.0.0.1/0"])
def test_storage_that_is_not_a_database_url_is_refused_naming_it(tmp_path, storage):
    sweep = load_sweep(write(tmp_path, f"name: s\nbase: base.yaml\nstorage: '{storage}'\nvariants: {{base: {{}}}}\n"))
    with pytest.raises(ValueError, match="neither a database URL nor a journal file") as err:
        storage_url(sweep)
    assert "pw" not in str(err.value)  # a password in the URL is redacted even here
    assert storage_url(sweep, "sqlite:////tmp/x.db") == "sqlite:////tmp/x.db"
    assert storage_url(sweep, "postgresql+psycopg2://u:p@127.0.0.1/db").startswith("postgresql+psycopg2://")


def _attempt_dir(root: Path, name: str, step: int | None) -> Path:
    """A trial's run directory as a killed attempt leaves it: a readable checkpoint at `step`, or none."""
    import torch

    run = root / name
    (run / "checkpoints").mkdir(parents=True)
    if step is not None:
        torch.save({"state_dict": {}, "hyper_parameters": {}, "global_step": step}, run / "checkpoints" / "last.ckpt")
    return run


@pytest.mark.parametrize("case", ["died after a checkpoint", "failed by itself", "died before a checkpoint"])
@pytest.mark.parametrize("mode", ["variants", "search"])
def test_a_rerun_continues_only_an_attempt_that_died_with_a_checkpoint(tmp_path, mode, case):
    """The retry of a row (variants) or of a trial re-queued by Optuna's retry callback (search) continues the
    earlier attempt only if that one stopped with no reason of its own and left a readable checkpoint."""
    from ablate.study import _continuable

    text = VARIANTS if mode == "variants" else "name: s\nbase: base.yaml\nn_trials: 4\nsearch:\n  train.warmup: {type: int, low: 10, high: 100}\n"
    sweep = load_sweep(write(tmp_path, text + f"out_dir: {tmp_path}/out\n"))
    study = open_study(sweep, f"sqlite:///{tmp_path}/study.db")
    root = (sweep.out_dir / "trials").resolve()
    if mode == "variants":
        enqueue_rows(study, sweep)
    first = study.ask()
    first.set_user_attr("out_dir", str(_attempt_dir(root, "0000-first", None if case == "died before a checkpoint" else 12)))
    if case == "failed by itself":
        first.set_user_attr("fail_reason", "FloatingPointError: train/loss is nan")
    study.tell(first, state=optuna.trial.TrialState.FAIL)
    failed = study._storage.get_trial(first._trial_id)
    seed = None
    if mode == "variants":
        enqueue_rows(study, sweep)  # re-queues the failed row (a re-run of the sweep)
        row = failed.system_attrs["fixed_params"]
        seed = row.get("seed")
        while True:  # take queued trials until the failed row's
            again = study.ask()
            if study._storage.get_trial_system_attrs(again._trial_id).get("fixed_params") == row:
                break
            study.tell(again, state=optuna.trial.TrialState.FAIL)
            again = None
    else:
        optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=2)(study, failed)
        again = study.ask()
    found = _continuable(study, again, sweep, seed, root)
    assert (found.number if found else None) == (first.number if case == "died after a checkpoint" else None)

"""Runs that stop for a reason a researcher can state, and say what their scores are on: seconds-long real
training runs stopped by early stopping (whose state survives a resume), a FLOPs budget (counted on after a
resume), a wall-clock budget; the evaluation record they write, and the average of their last K checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from helpers import tiny_experiment

from ablate.data.subset import fixed_subset
from ablate.evaluation.records import read_eval_file
from ablate.run import resume_checkpoint
from ablate.run.train import train
from ablate.training.flops import train_flops

pytestmark = pytest.mark.slow  # real training runs: seconds each

FAST = {"val_bleu": False, "num_threads": 1, "eval_record": False}


def stop_state(out: Path) -> dict:
    return torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)["callbacks"]["StopRules"]


def test_early_stopping_stops_and_its_state_survives_a_resume(tmp_path):
    # Each validation must beat the best by more than 50%: a few validations in, none does.
    rules = {"early_stop_metric": "val/loss", "patience": 2, "min_delta": 0.5, "val_every_steps": 5}
    cfg = tiny_experiment(tmp_path, train={**FAST, **rules, "max_steps": 10})
    first = train(cfg)
    assert first["stop_reason"] == "max_steps" and first["steps"] == 10
    state = stop_state(tmp_path / "run")["early"]
    assert state["bad"] == 1 and len(stop_state(tmp_path / "run")["ppl"]) == 2  # step 10 was no 50% better than step 5

    cfg.train.max_steps = 200  # continue the run (a changed config: --force)
    resumed = train(cfg, resume=True, force=True)
    assert resumed["stop_reason"] == "early_stopping"
    assert resumed["steps"] == 15  # one more validation without improvement; a fresh count would have gone to step 25
    assert resumed["convergence"]["validations"] == 3 and resumed["wall_seconds"] >= first["wall_seconds"]

    again = train(cfg, resume=True)  # a finished run resumed: the rule still holds, so it stops at once
    assert again["stop_reason"] == "early_stopping" and again["steps"] == 15


def test_flops_budget_stops_at_the_budget_and_counts_on_after_a_resume(tmp_path):
    cfg = tiny_experiment(tmp_path, train={**FAST, "max_steps": 500, "val_every_steps": 10})
    batch = {"src": torch.zeros(16, 10, dtype=torch.long), "tgt_in": torch.zeros(16, 10, dtype=torch.long),
             "src_tokens": 100, "tgt_tokens": 100}  # fmt: skip
    budget = 60 * train_flops(cfg.model, 64, batch)  # a dozen or so steps of the tiny corpus's batches (512 tokens)
    cfg.train.max_flops = budget
    summary = train(cfg)
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["stop_reason"] == "max_flops" and saved["flops"] >= budget and 0 < saved["steps"] < 500
    assert saved["basis"] == f"equal compute (max_flops {budget:.3g}), at most max_steps 500, final weights"
    assert (tmp_path / "run" / "checkpoints" / f"step={summary['steps']}.ckpt").exists()  # validated and saved at the stop

    cfg.train.max_flops = 2 * budget
    more = train(cfg, resume=True, force=True)
    assert more["stop_reason"] == "max_flops" and more["flops"] >= 2 * budget
    # Counted on from the first attempt's FLOPs: about as many steps again, not twice as many more.
    assert summary["steps"] < more["steps"] <= 2 * summary["steps"] + 2


def test_wall_clock_budget_stops(tmp_path):
    cfg = tiny_experiment(tmp_path, train={**FAST, "max_steps": 100_000, "val_every_steps": 50, "max_time": "3"})
    summary = train(cfg)
    assert summary["stop_reason"] == "max_time" and 3 <= summary["wall_seconds"] < 60 and summary["steps"] < 100_000


def test_eval_record_nll_sums_to_the_logged_validation_nll(tmp_path):
    cfg = tiny_experiment(tmp_path, train={"max_steps": 30, "val_every_steps": 15, "num_threads": 1, "max_len_b": 10})
    summary = train(cfg)
    assert summary["eval_record"] == "eval/valid.json" and summary["selected"] == "final weights"
    assert summary["val/split"] == "valid" and summary["val/sentences"] == summary["val/bleu_sentences"] == 40
    record = read_eval_file(tmp_path / "run" / "eval" / "valid.json", "valid")
    assert record.sentences == len(record.hypotheses) == len(record.nll) == len(record.tokens) == 40
    assert record.indices == list(range(40)) and record.subset == "all" and record.checkpoint == "final weights"
    # The last validation was at the final step: same weights, same sentences, same decoding.
    assert sum(record.nll) / sum(record.tokens) == pytest.approx(summary["last"]["val/nll"], rel=1e-4)
    assert record.bleu == pytest.approx(summary["last"]["val/bleu"], abs=1e-6)


def test_a_run_ending_between_validations_reports_and_saves_its_final_weights(tmp_path):
    """max_steps 10 with a validation every 4 steps: the last one in fit is at step 8, so the run validates the
    weights of step 10 itself; the summary's metrics and last.ckpt are of those, and the record agrees with them."""
    cfg = tiny_experiment(tmp_path, train={"max_steps": 10, "val_every_steps": 4, "num_threads": 1, "max_len_b": 10})
    summary = train(cfg)
    assert summary["steps"] == 10 and summary["selected"] == "final weights"
    assert torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 10
    record = read_eval_file(tmp_path / "run" / "eval" / "valid.json", "valid")
    assert sum(record.nll) / sum(record.tokens) == pytest.approx(summary["last"]["val/nll"], rel=1e-4)
    assert record.bleu == pytest.approx(summary["last"]["val/bleu"], abs=1e-6)


def test_with_gradient_accumulation_every_validation_is_on_the_step_grid(tmp_path):
    """accumulate 3 over epochs of a batch count that is no multiple of 3: validations every 2 optimizer steps land
    on steps 2, 4, 6, ... across epoch ends (they drifted into accumulation windows when an epoch's last window was
    short), and the epochs are counted in whole windows."""
    cfg = tiny_experiment(tmp_path, train={**FAST, "accumulate": 3, "val_every_steps": 2, "max_steps": 16})
    summary = train(cfg)
    lines = (tmp_path / "run" / "metrics.csv").read_text().splitlines()
    head = lines[0].split(",")
    # Lightning logs a validation at global_step - 1 (its last batch's step), as metrics.csv shows for every run.
    steps = [int(row[head.index("step")]) + 1 for row in (ln.split(",") for ln in lines[1:]) if row[head.index("val/loss")]]
    assert summary["epochs"] > 1 and steps == list(range(2, 17, 2)), steps


def test_final_average_on_a_random_subset_is_what_the_run_reports(tmp_path):
    cfg = tiny_experiment(tmp_path, train={"max_steps": 30, "val_every_steps": 10, "keep_last": 3, "final_average": 2,
                                           "val_max_sentences": 12, "num_threads": 1, "max_len_b": 10},
                          logging={"wandb": True, "mode": "offline"})  # fmt: skip
    summary = train(cfg)
    ckpts = tmp_path / "run" / "checkpoints"
    assert summary["selected"] == "avg of last 2" and summary["averaged_from"] == ["step=20.ckpt", "step=30.ckpt"]
    assert summary["basis"] == "equal steps (max_steps 30), last-2 average"
    assert (ckpts / "avg.ckpt").is_file() and "optimizer_states" not in torch.load(ckpts / "avg.ckpt", weights_only=True)
    last = torch.load(ckpts / "last.ckpt", weights_only=True)
    assert last["global_step"] == 30 and last["optimizer_states"]  # untouched: still the run's training state
    assert resume_checkpoint(tmp_path / "run").name != "avg.ckpt"
    assert summary["val/bleu_sentences"] == 12 and summary["val/bleu_subset"] == "random 12 of 40 (seed 0)"

    record = read_eval_file(tmp_path / "run" / "eval" / "valid.json")
    assert record.checkpoint == "avg.ckpt" and record.indices == fixed_subset(40, 12, 0)
    assert record.bleu == pytest.approx(summary["last"]["val/bleu"], abs=1e-6)  # `last` is the average's validation

    import wandb

    from ablate.evaluation.wandb_records import read_records
    from ablate.files.wandb_offline import find_runs, read_run

    wandb.teardown()  # finish() returns before W&B's service has written the run's file
    run = read_run(find_runs(tmp_path / "run")[0])
    carried = read_records(run.summary, run.files, str(run.path))["eval/valid"]  # its sentences as a W&B table
    assert carried["indices"] == record.indices and carried["hypotheses"] == record.hypotheses
    assert run.summary["selected"] == "avg of last 2"

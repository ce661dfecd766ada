"""`ablate train` end to end on a corpus the test writes: metrics, checkpoints, W&B offline files, CLIs."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import pytest
import torch
from helpers import TRANSLATE, tiny_experiment

from ablate.cli import main
from ablate.experiment import load_config
from ablate.files.wandb_offline import find_runs, read_run
from ablate.run.summary_fields import FIGURES, VALIDATION_METRICS
from ablate.training.checkpoint import CheckpointError, average_checkpoints, load_checkpoint, model_from_checkpoint, step_checkpoints

pytestmark = pytest.mark.slow  # real training runs, sweeps or subprocesses: seconds to a minute each


def test_run_dir_holds_config_metrics_checkpoints_and_summary(trained_run):
    cfg, summary, _ = trained_run
    out = Path(cfg.out_dir)
    assert load_config([out / "config.yaml"]) == cfg  # the resolved config reproduces the run
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    assert any(r.get("val/bleu") for r in rows) and any(r.get("train/loss") for r in rows)
    assert any(r.get("speed/tokens_per_s") for r in rows)
    assert any(float(r.get("speed/model_tflops") or 0) > 0 for r in rows)  # model FLOPs/s; speed/mfu needs a known peak
    names = sorted(p.name for p in (out / "checkpoints").glob("*.ckpt"))
    assert names == ["best.ckpt", "last.ckpt", "step=120.ckpt", "step=80.ckpt"]  # keep_last=2 bounds the periodic ones
    saved = json.loads((out / "summary.json").read_text())
    assert saved["steps"] == 120 and saved["params"]["total"] > 0
    # Which code trained it: the commit, whether the tree differed from it, the libraries' versions (run/provenance.py).
    assert {"git_sha", "git_dirty"} <= saved.keys() and saved["versions"]["torch"] == torch.__version__
    assert set(saved["versions"]) == {"ablate", "torch", "lightning", "sentencepiece", "sacrebleu"}
    assert json.loads((out / "progress.json").read_text())["epochs"] == saved["epochs"]  # epochs counted one way
    assert saved["speed/tokens_per_s"] > 0 and saved["speed/step_ms"] > 0 and saved["speed/model_tflops"] > 0
    assert "speed/mfu" not in saved  # a CPU's peak is not in Lightning's table and the config gives none
    assert saved["bleu_signature"].startswith("nrefs:1|case:mixed")
    # What a sweep's objective may name (checked on a sweep file's load) is what a run reports
    numbers = {
        k for k, v in saved.items() if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in ("vocab_size", "val/sentences")
    }
    assert set(VALIDATION_METRICS) <= set(saved["last"]) <= set(VALIDATION_METRICS + FIGURES), saved["last"]
    assert numbers <= set(FIGURES), numbers - set(FIGURES)
    # It learned: validation perplexity far below the uniform vocabulary's 64.
    assert saved["last"]["val/ppl"] < 8


def test_wandb_offline_files_hold_config_metrics_and_summary(trained_run):
    cfg, summary, _ = trained_run
    runs = find_runs(cfg.out_dir)
    assert len(runs) == 1 and runs[0].name.startswith("offline-run-")
    run = read_run(runs[0])
    assert (run.group, run.name, run.job_type, sorted(run.tags)) == ("tests", "tiny", "train", ["e2e", "unit"])
    assert run.config["model.d_model"] == 32 and run.config["params/total"] == summary["params"]["total"]
    logged = {k for row in run.history for k in row}
    assert {"train/loss", "val/loss", "val/ppl", "val/bleu", "speed/tokens_per_s", "speed/step_ms"} <= logged
    assert run.summary["val/bleu"] == pytest.approx(summary["last"]["val/bleu"])
    assert run.summary["speed/tokens_per_s"] == pytest.approx(summary["speed/tokens_per_s"])


def test_translate_cli_file_to_file(trained_run, tmp_path, capsys):
    cfg, _, _ = trained_run
    src = tmp_path / "in.txt"
    src.write_text("the dog runs\nthe big cat sleeps\n\n")
    out = tmp_path / "out.txt"
    assert main(["translate", f"{cfg.out_dir}/checkpoints/best.ckpt", "-i", str(src), "-o", str(out), "--beam", "4"]) == 0
    lines = out.read_text().split("\n")
    assert len(lines) == 4 and lines[-1] == ""  # one output line per input line, the empty one included
    vocab = set(TRANSLATE.values())
    assert any(w in vocab for w in lines[0].split())


def test_evaluate_cli_split_and_any_gzipped_test_set(trained_run, tmp_path, capsys):
    cfg, _, tmp = trained_run
    ckpt = f"{cfg.out_dir}/checkpoints/best.ckpt"
    assert main(["evaluate", ckpt, "--split", "test", "--beam", "2"]) == 0
    split = json.loads(capsys.readouterr().out)
    assert split["sentences"] == 40 and split["bleu_signature"].startswith("nrefs:1") and 0 <= split["bleu"] <= 100
    assert "chrf" in split
    corpus = tmp / "corpus"
    for lang in ("en", "de"):
        (tmp_path / f"t.{lang}.gz").write_bytes(gzip.compress((corpus / f"test.{lang}").read_bytes()))
    assert main(["evaluate", ckpt, "--src", str(tmp_path / "t.en.gz"), "--ref", str(tmp_path / "t.de.gz"), "--beam", "2"]) == 0
    other = json.loads(capsys.readouterr().out)
    assert other["bleu"] == split["bleu"]  # same sentences, same decoding


def test_evaluate_save_eval_writes_the_record_the_table_tests_with(trained_run, tmp_path, capsys):
    """`ablate evaluate CKPT --split test --save-eval` leaves RUN/eval/test.json: the same BLEU as printed, and
    per-sentence NLLs for `ablate table --split test`."""
    from ablate.evaluation.records import read_eval_file

    cfg, _, _ = trained_run
    assert main(["evaluate", f"{cfg.out_dir}/checkpoints/best.ckpt", "--split", "test", "--save-eval"]) == 0
    printed = json.loads(capsys.readouterr().out)
    record = read_eval_file(printed["record"], "test")
    assert printed["record"] == f"{cfg.out_dir}/eval/test.json" and record.checkpoint == "best.ckpt"
    assert len(record.hypotheses) == len(record.nll) == len(record.tokens) == printed["sentences"] == 40
    assert record.bleu == pytest.approx(printed["bleu"], abs=0.01) and all(n > 0 for n in record.nll)
    assert main(["evaluate", str(tmp_path / "elsewhere.ckpt"), "--save-eval"]) == 2  # not a run's checkpoint (nor a file)


def test_evaluate_rejects_misaligned_files(trained_run, tmp_path, capsys):
    cfg, _, _ = trained_run
    (tmp_path / "s.en").write_text("a\nb\n")
    (tmp_path / "r.de").write_text("a\n")
    assert main(["evaluate", f"{cfg.out_dir}/checkpoints/best.ckpt", "--src", str(tmp_path / "s.en"), "--ref", str(tmp_path / "r.de")]) == 2
    assert "s.en has 2 lines" in capsys.readouterr().err


def test_average_cli_means_the_last_k(trained_run, tmp_path):
    cfg, _, _ = trained_run
    out = tmp_path / "avg.ckpt"
    assert main(["average", "--run-dir", cfg.out_dir, "--last", "2", "-o", str(out)]) == 0
    paths = step_checkpoints(cfg.out_dir)
    a, b = (load_checkpoint(p)["state_dict"] for p in paths)
    avg = load_checkpoint(out)["state_dict"]
    key = "model.encoder.0.ff.net.0.weight"
    torch.testing.assert_close(avg[key], (a[key] + b[key]) / 2)
    model, _, _ = model_from_checkpoint(out)  # an averaged checkpoint decodes like any other
    assert model.vocab_size == 64


def test_average_refuses_to_overwrite_an_input(trained_run):
    cfg, _, _ = trained_run
    last = step_checkpoints(cfg.out_dir)[-1]
    before = last.read_bytes()
    assert main(["average", str(last), "-o", str(last)]) == 2
    assert last.read_bytes() == before


def test_corrupt_and_malicious_checkpoints_are_refused(trained_run, tmp_path):
    cfg, _, _ = trained_run
    good = Path(cfg.out_dir, "checkpoints", "best.ckpt").read_bytes()
    truncated = tmp_path / "truncated.ckpt"
    truncated.write_bytes(good[: len(good) // 2])
    with pytest.raises(CheckpointError, match="truncated.ckpt"):
        load_checkpoint(truncated)

    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self):
            return (Path.touch, (marker,))

    evil = tmp_path / "evil.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": Exploit()}, evil)
    with pytest.raises(CheckpointError, match="evil.ckpt"):
        load_checkpoint(evil)
    assert not marker.exists()
    with pytest.raises(CheckpointError):
        average_checkpoints([truncated])


def test_training_refuses_an_out_dir_holding_a_run(trained_run):
    cfg, _, tmp = trained_run
    before = sorted(p.stat().st_mtime_ns for p in Path(cfg.out_dir, "checkpoints").iterdir())
    with pytest.raises(ValueError, match="already holds a run"):
        from ablate.run.train import train

        train(cfg)
    assert sorted(p.stat().st_mtime_ns for p in Path(cfg.out_dir, "checkpoints").iterdir()) == before


def test_cli_train_with_overrides(tmp_path):
    cfg = tiny_experiment(tmp_path, train={"max_steps": 4, "val_every_steps": 4}, logging={"wandb": False})
    yaml_path = tmp_path / "exp.yaml"
    from ablate.config import to_yaml

    yaml_path.write_text(to_yaml(cfg))
    assert main(["train", str(yaml_path), "train.max_steps=6", "train.val_every_steps=3", f"out_dir={tmp_path}/cli"]) == 0
    assert json.loads(Path(tmp_path, "cli", "summary.json").read_text())["steps"] == 6
    assert main(["train", str(yaml_path), "model.haeds=2"]) == 2


@pytest.mark.parametrize(
    "train_overrides",
    [
        {"precision": "bf16-mixed", "accumulate": 2, "clip_grad": 1.0},
        {"val_bleu": False, "label_smoothing": 0.0, "max_epochs": 1, "max_steps": 1000},
    ],
    ids=["bf16-accumulate-clip", "no-bleu-one-epoch"],
)
def test_training_options(tmp_path, train_overrides):
    from ablate.run.train import train

    cfg = tiny_experiment(tmp_path, train={"max_steps": 6, "val_every_steps": 3, **train_overrides}, logging={"wandb": False})
    summary = train(cfg)
    if "max_epochs" in train_overrides:
        assert summary["epochs"] == 1 and 0 < summary["steps"] < 1000  # one pass over the data, not max_steps
        assert summary["best"]["metric"] == "val/loss"
        # No validation decoded, so val/bleu is the end-of-run record's: the reported weights on the same sentences.
        record = json.loads(Path(cfg.out_dir, "eval", "valid.json").read_text())
        assert summary["last"]["val/bleu"] == record["bleu"]
        assert summary["bleu_signature"] == record["bleu_signature"] and summary["bleu_signature"].startswith("nrefs:1|")
    else:
        assert summary["steps"] == 6 and summary["speed/step_ms"] > 0  # 6 optimizer steps = 12 batches
    assert summary["last"]["val/ppl"] > 1


@pytest.mark.parametrize("positional", ["sinusoidal", "alibi"])
def test_length_extrapolation_eval_after_training(tmp_path, positional, capsys):
    """Trained on pairs of at most 6 tokens, scored on validation sentences longer than that (summary + CLI)."""
    from ablate.run.train import train

    cfg = tiny_experiment(
        tmp_path,
        model={"positional": positional},
        data={"max_len": 6, "max_dropped_share": 1.0},
        train={"max_steps": 20, "val_every_steps": 20, "eval_longer_than": 6},
        logging={"wandb": False},
    )
    summary = train(cfg)
    assert summary["val_long/sentences"] > 0 and summary["val_long/min_src_tokens"] == 7
    assert 0.0 <= summary["val_long/bleu"] <= 100.0
    ckpt = f"{cfg.out_dir}/checkpoints/last.ckpt"
    assert main(["evaluate", ckpt, "--split", "valid", "--longer-than", "6", "--beam", "1"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["sentences"] == summary["val_long/sentences"] and "sources > 6 tokens" in result["test_set"]
    assert main(["evaluate", ckpt, "--split", "valid", "--longer-than", "500"]) == 2


def test_a_forced_resume_refused_for_its_data_changes_no_file_of_the_run(tmp_path):
    """The data review: `--resume --force` wrote config.yaml (and kept the old one as config.before-resume-1.yaml) as
    the resume was checked; refused then for its data (every pair dropped), the run's config.yaml held settings it
    never trained with, the plain resume was refused as a config change, and the next forced one overwrote the copy."""
    from ablate.run.train import train

    cfg = tiny_experiment(tmp_path, train={"max_steps": 4, "val_every_steps": 2, "warmup": 2})
    train(cfg)
    run = Path(cfg.out_dir)
    kept = lambda: {p.name: p.read_bytes() for p in run.iterdir() if p.is_file() and p.name not in ("train.log", "tokenizer.model")}  # noqa: E731
    before = kept()  # (a resume restores the checkpoint's tokenizer beside the run first: an addition, which it reads)
    cfg.data.max_len = 1  # every pair longer: refused as the data is read
    cfg.train.max_steps = 6
    with pytest.raises(ValueError):
        train(cfg, resume=True, force=True)
    assert kept() == before
    cfg.data.max_len = 32
    train(cfg, resume=True, force=True)  # a forced resume that trains: the new config is the run's, the old one kept
    assert (run / "config.before-resume-1.yaml").read_bytes() == before["config.yaml"]
    assert load_config([run / "config.yaml"]).train.max_steps == 6

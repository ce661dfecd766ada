"""Members as runs, end to end (ablate.run.members): a group trains its members as one model and leaves each an
ordinary run directory; a member trains as its own run would, a diverged member changes nothing in the others, and a
killed group resumes every member exactly."""

from __future__ import annotations

import csv
import json
import math
import signal
from pathlib import Path

import pytest
import torch
from fault_injection import fault_plugin
from helpers import ablate, run_cli, write_experiment

from ablate.config import to_dict
from ablate.config.members import member_configs
from ablate.data.member_data import MemberDataModule
from ablate.experiment import from_dict, load_config
from ablate.run import FAILED_FILE as FAILED
from ablate.run.member_runs import MemberRuns
from ablate.run.members import train_members
from ablate.run.train import train
from ablate.training.checkpoint import average_checkpoints, load_checkpoint, model_from_checkpoint, step_checkpoints
from ablate.training.member_module import MemberModule

pytestmark = pytest.mark.slow

TRAIN = {"max_steps": 30, "val_every_steps": 15, "log_every_steps": 5, "keep_last": 2, "precision": "64", "val_bleu": True}


def _group(path: Path, values: dict, data: str = "own", *overrides: str):
    cfg = load_config([path], [f"members.size={len(next(iter(values.values())))}", f"members.data={data}", *overrides])
    return cfg, [from_dict(to_dict(m)) for m in member_configs(cfg, values)]


def _rows(run: Path) -> list[dict]:
    with open(run / "metrics.csv") as f:
        return [{k: float(v) for k, v in row.items() if v != "" and (k.startswith(("train/loss", "train/ppl", "train/lr", "val/")) or k == "step")}
                for row in csv.DictReader(f)]  # fmt: skip


def _close(a: float, b: float, rel: float) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


def test_a_member_trains_as_its_own_run_would_and_leaves_an_ordinary_run(tmp_path, capsys):
    path = write_experiment(tmp_path, "exp", **TRAIN)
    longer = "train.eval_longer_than=5"  # and the length-extrapolation BLEU, which a member's summary reports too
    cfg, members = _group(path, {"train.lr_scale": [1.0, 2.0]}, "shared", longer)  # member 0 sees its own seed's batches
    summaries = train_members(cfg, members)
    alone = train(load_config([path], [f"out_dir={tmp_path / 'alone'}", "train.lr_scale=1.0", "seed=1", longer]))
    member = Path(members[0].out_dir)
    ours, theirs = _rows(member), [r for r in _rows(tmp_path / "alone") if len(r) > 1]
    assert [r["step"] for r in ours] == [r["step"] for r in theirs] == [4, 9, 14, 14, 19, 24, 29, 29]
    for a, b in zip(ours, theirs):  # every logged loss, perplexity, rate and validation metric, float64
        assert a.keys() == b.keys() and all(_close(a[k], b[k], 1e-6) for k in a), (a, b)
    s = summaries[0]
    assert s["steps"] == alone["steps"] == 30 and s["stop_reason"] == alone["stop_reason"] == "max_steps"
    assert all(_close(s["last"][k], alone["last"][k], 1e-6) for k in ("val/loss", "val/ppl"))
    assert s["last"]["val/bleu"] == pytest.approx(alone["last"]["val/bleu"], abs=1e-6)
    assert s["members"]["group"] == cfg.out_dir and s["members"]["index"] == 0 and s["members"]["size"] == 2
    # Every key a run's summary has, but a peak memory of its own (the group's is under members.speed).
    assert set(alone) - set(s) == {"speed/peak_mem_mb"} and s["members"]["speed"]["speed/peak_mem_mb"] > 0
    same = ("git_sha", "git_dirty", "versions", "params/total", "vocab_size")
    assert [s[k] for k in same] == [alone[k] for k in same] and s["versions"]["ablate"]
    assert s["speed/step_ms"] == s["members"]["speed"]["speed/step_ms"] > 0  # a group step is a step of each member
    assert s["val_long/sentences"] == alone["val_long/sentences"] > 0
    assert s["val_long/bleu"] == pytest.approx(alone["val_long/bleu"], abs=1e-6)
    # Its checkpoints are an ordinary run's: the weights its own run ends with, loaded by what reads any run.
    ours_w = load_checkpoint(member / "checkpoints" / "last.ckpt")["state_dict"]
    theirs_w = load_checkpoint(tmp_path / "alone" / "checkpoints" / "last.ckpt")["state_dict"]
    assert ours_w.keys() == theirs_w.keys()
    for k in ours_w:  # atol: the key projection's bias, whose gradient is rounding only (docs/members.md)
        torch.testing.assert_close(ours_w[k], theirs_w[k], rtol=1e-6, atol=1e-7)
    model, saved, _ = model_from_checkpoint(member / "checkpoints" / "best.ckpt")
    assert saved.train.lr_scale == 1.0 and saved.members.group == cfg.out_dir and saved.members.index == 0
    assert [p.name for p in step_checkpoints(member)] == ["step=15.ckpt", "step=30.ckpt"]
    assert average_checkpoints(step_checkpoints(member))["state_dict"].keys() == ours_w.keys()
    record = json.loads((member / "eval" / "valid.json").read_text())
    assert record["bleu"] == pytest.approx(s["last"]["val/bleu"], abs=1e-9)
    rc, out = run_cli(capsys, "average", "--run-dir", str(member), "--last", "2", "--output", str(tmp_path / "avg.ckpt"))
    assert rc == 0 and "averaged 2 checkpoints" in out
    rc, out = run_cli(capsys, "evaluate", str(member / "checkpoints" / "last.ckpt"), "--split", "valid")
    assert rc == 0 and json.loads(out)["sentences"] == 40 and "bleu" in json.loads(out)
    # Member 1 trains at its own learning rate: a run of its own, not a copy of member 0.
    assert summaries[1]["last"]["val/loss"] != s["last"]["val/loss"]
    assert (Path(cfg.out_dir) / "checkpoints" / "last.ckpt").is_file()  # the group's own, which resumes it
    # Each member's checkpoints carry the group's run id (with its index, which run it is), not that of a run apart.
    group_id = load_checkpoint(Path(cfg.out_dir) / "checkpoints" / "last.ckpt")["run_id"]
    assert load_checkpoint(member / "checkpoints" / "step=15.ckpt")["run_id"] == group_id
    assert load_checkpoint(tmp_path / "alone" / "checkpoints" / "last.ckpt")["run_id"] not in (group_id, None)


def test_a_diverged_member_fails_alone_and_changes_nothing_in_the_others(tmp_path):
    path = write_experiment(tmp_path, "exp", **TRAIN)
    # In float32, lr_scale 1e37 puts the logits past float32's range within a few steps on any CPU. At 1e5 in float64
    # the loss reached 1e9, and whether it became NaN within the 30 steps was the CPU's rounding (on AMD, not Intel).
    cfg, members = _group(path, {"train.lr_scale": [1.0, 1e37]}, "own", f"out_dir={tmp_path / 'a'}", "train.precision=32")
    bad = train_members(cfg, members)
    cfg, members_b = _group(path, {"train.lr_scale": [1.0, 2.0]}, "own", f"out_dir={tmp_path / 'b'}", "train.precision=32")
    good = train_members(cfg, members_b)
    assert bad[1] is None and good[1] is not None
    failed = (Path(members[1].out_dir) / FAILED).read_text()
    assert "training diverged" in failed and "is nan at step" in failed
    assert not (Path(members[1].out_dir) / "summary.json").exists()
    # Member 0 trained on the same batches beside a diverging member as beside a healthy one: the same run.
    assert bad[0]["steps"] == good[0]["steps"] == 30
    for key in ("val/loss", "val/ppl", "val/bleu"):
        assert _close(bad[0]["last"][key], good[0]["last"][key], 1e-9), key


@pytest.mark.parametrize("at, signame, code", [(20, "TERM", 75), (20, "INT", 130), (5, "TERM", 75)])  # 5: before any validation
def test_a_killed_group_resumes_every_member_exactly(tmp_path, at, signame, code):
    whole = write_experiment(tmp_path, "whole", **TRAIN)
    assert ablate("train", str(whole), "--members", "2").returncode == 0
    killed = write_experiment(tmp_path, "killed", plugins=[fault_plugin(tmp_path / "faults", signal_at=f"{at}:{signame}")], **TRAIN)
    # SIGINT's default disposition back: under xdist a worker ignores SIGINT, and its children would inherit that
    first = ablate("train", str(killed), "--members", "2", preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert first.returncode == code, first.stderr[-2000:]  # saved every member at a step boundary, then exited
    assert "continue with: ablate train" in first.stderr
    again = ablate("train", str(killed), "--members", "2", "--resume")
    assert again.returncode == 0, again.stderr[-2000:]
    for name in ("seed=1", "seed=2"):
        a = json.loads((tmp_path / "whole" / name / "summary.json").read_text())
        b = json.loads((tmp_path / "killed" / name / "summary.json").read_text())
        assert a["steps"] == b["steps"] == 30
        assert all(_close(a["last"][k], b["last"][k], 1e-9) for k in ("val/loss", "val/ppl", "val/bleu")), (a["last"], b["last"])
        resumed = _rows(tmp_path / "killed" / name / "resume-1")
        assert resumed and resumed[-1]["step"] == 29  # the resumed attempt logs beside the first, from where it stopped


def test_a_group_with_dropout_killed_in_an_epochs_last_step_resumes_exactly(tmp_path):
    # An epoch of this corpus is 13 steps: killed at step 25, the resumed group starts a new epoch's iterator at once,
    # which must not draw from torch's global generator (dropout's), or every later mask differs from the whole run's.
    # Nor must building the members' decoders, which the resumed process does at its first validation (step 30) and
    # the whole run did at step 10: their weights' initialisation drew from it.
    train, dropout = (
        {"max_steps": 40, "val_every_steps": 10, "log_every_steps": 5, "keep_last": 2, "val_bleu": True, "val_max_sentences": 8},
        "model.dropout=[0.1,0.1]",
    )
    whole = write_experiment(tmp_path, "whole", **train)
    assert ablate("train", str(whole), dropout, "--members", "2").returncode == 0
    killed = write_experiment(tmp_path, "killed", plugins=[fault_plugin(tmp_path / "faults", signal_at="25:TERM")], **train)
    assert ablate("train", str(killed), dropout, "--members", "2").returncode == 75
    again = ablate("train", str(killed), dropout, "--members", "2", "--resume")
    assert again.returncode == 0, again.stderr[-2000:]
    for name in ("seed=1", "seed=2"):
        a = json.loads((tmp_path / "whole" / name / "summary.json").read_text())["last"]["val/loss"]
        b = json.loads((tmp_path / "killed" / name / "summary.json").read_text())["last"]["val/loss"]
        assert a == b, (name, a, b)


def test_a_group_signalled_during_its_members_ends_exits_to_resume_them(tmp_path):
    # The final weights' validation after training (25 steps, validations every 10) is where SIGTERM arrives: the
    # group exits 75 saying to resume, with no member's summary yet, and the resume ends every member as a whole run.
    train = {**TRAIN, "max_steps": 25, "val_every_steps": 10}
    whole = write_experiment(tmp_path, "whole", **train)
    assert ablate("train", str(whole), "--members", "2").returncode == 0
    cut = write_experiment(tmp_path, "cut", plugins=[fault_plugin(tmp_path / "faults", signal_at="25@val:TERM")], **train)
    first = ablate("train", str(cut), "--members", "2")
    assert first.returncode == 75, first.stderr[-2000:]
    assert "after training, before the end of" in first.stderr and "--members 2 --resume" in first.stderr
    assert not any((tmp_path / "cut" / name / "summary.json").exists() for name in ("seed=1", "seed=2"))
    again = ablate("train", str(cut), "--members", "2", "--resume")
    assert again.returncode == 0, again.stderr[-2000:]
    for name in ("seed=1", "seed=2"):
        a = json.loads((tmp_path / "whole" / name / "summary.json").read_text())
        b = json.loads((tmp_path / "cut" / name / "summary.json").read_text())
        assert a["steps"] == b["steps"] == 25 and _close(a["last"]["val/loss"], b["last"]["val/loss"], 1e-9)


def test_the_member_data_and_module_pieces_fit_together(tmp_path):
    """The loader gives one batch per member and step, of the group's length schedule; the module's validation
    scores every member on the same sentences; MemberRuns names each member's checkpoint as its own run's."""
    path = write_experiment(tmp_path, "exp", **TRAIN)
    cfg, members = _group(path, {"seed": [1, 2, 3]})
    dm = MemberDataModule(cfg, [m.seed for m in members])
    dm.prepare_data()
    dm.setup("fit")

    class Trainer:
        current_epoch = 0

    dm.trainer = Trainer()
    loader = dm.train_dataloader()
    batches = list(loader)
    assert len(batches) == len(loader.batch_sampler) == len(loader)
    seen = [sorted(i for b in batches for i in b["idx"][k].tolist()) for k in range(3)]
    assert seen[0] == seen[1] == seen[2] == sorted(dm.encoded("train").idx.tolist())  # each member: every pair once
    assert [b["idx"][0].tolist() for b in batches] != [b["idx"][1].tolist() for b in batches]  # in an order of its own
    module = MemberModule.from_configs(members, dm.tokenizer.vocab_size)
    assert module.params == MemberModule.from_configs(members[:1], dm.tokenizer.vocab_size).params  # one member's count
    runs = MemberRuns(members, [Path(m.out_dir) for m in members], Path(cfg.out_dir), dm.tokenizer.vocab_size, b"", 0, {})
    assert runs.monitor == "val/bleu" and runs.padded == 0.0


def test_each_member_reports_the_average_of_its_own_last_checkpoints(tmp_path):
    path = write_experiment(tmp_path, "exp", **{**TRAIN, "val_every_steps": 10, "final_average": 2, "precision": "32"})
    cfg, members = _group(path, {"seed": [1, 2]})
    summaries = train_members(cfg, members)
    for member, summary in zip(members, summaries):
        out = Path(member.out_dir)
        assert summary["selected"] == "avg of last 2" and summary["averaged_from"] == ["step=20.ckpt", "step=30.ckpt"]
        averaged = load_checkpoint(out / "checkpoints" / "avg.ckpt")
        assert averaged["averaged_from"] == [str(out / "checkpoints" / n) for n in summary["averaged_from"]]
        record = json.loads((out / "eval" / "valid.json").read_text())
        assert record["checkpoint"] == "avg.ckpt" and record["bleu"] == pytest.approx(summary["last"]["val/bleu"], abs=1e-9)
    assert summaries[0]["last"]["val/loss"] != summaries[1]["last"]["val/loss"]  # each member's own average


def test_a_member_that_ends_off_the_validation_grid_ends_as_its_own_run(tmp_path):
    # 25 steps, validated every 10: the final weights' validation (step 25) saves last.ckpt alone, as a run's does, so
    # the average takes steps 10 and 20, best stays a validation's during training, and metrics.csv has the same rows.
    path = write_experiment(tmp_path, "exp", **{**TRAIN, "max_steps": 25, "val_every_steps": 10, "final_average": 2})
    cfg, members = _group(path, {"train.lr_scale": [1.0, 2.0]}, "shared")
    summaries = train_members(cfg, members)
    alone = train(load_config([path], [f"out_dir={tmp_path / 'alone'}", "train.lr_scale=1.0", "seed=1", "train.final_average=2"]))
    member, theirs_dir = Path(members[0].out_dir), tmp_path / "alone"
    s = summaries[0]
    assert s["averaged_from"] == alone["averaged_from"] == ["step=10.ckpt", "step=20.ckpt"]
    assert sorted(p.name for p in (member / "checkpoints").iterdir()) == sorted(p.name for p in (theirs_dir / "checkpoints").iterdir())
    assert _close(s["best"]["value"], alone["best"]["value"], 1e-6)
    ours, theirs = _rows(member), [r for r in _rows(theirs_dir) if len(r) > 1]
    assert [r["step"] for r in ours] == [r["step"] for r in theirs] == [4, 9, 9, 14, 19, 19, 24, 25, 25]
    for a, b in zip(ours, theirs):  # the final weights' row and the average's, each at step 25
        assert a.keys() == b.keys() and all(_close(a[k], b[k], 1e-6) for k in a), (a, b)

"""Each member's progress.json (ablate.run.member_progress): its own tokens and validation, not the group's, and once
its rules stop it, "finished" (or "stopped" when it diverged) with its step count held while the group trains on."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from ablate.run import progress as progress_module
from ablate.run.member_progress import MemberProgress
from ablate.run.progress_file import read_progress, write_progress


@pytest.fixture
def clock(monkeypatch):
    now = SimpleNamespace(t=1000.0)
    monkeypatch.setattr(progress_module.time, "perf_counter", lambda: now.t)
    monkeypatch.setattr(progress_module.time, "time", lambda: now.t)
    return now


def group_step(cbs, tr, clock):
    for cb in cbs:
        cb.on_train_batch_start(tr, None, {}, 0)
    clock.t += 1.0
    tr.global_step += 1
    batch = {"tgt_tokens": 1200, "member_tgt_tokens": [300, 700, 200], "member_tokens": torch.tensor([300, 700, 200])}
    for cb in cbs:
        cb.on_train_batch_end(tr, None, None, batch, 0)


def test_each_member_shows_its_own_tokens_and_validation_and_its_own_end(tmp_path, clock):
    tr = SimpleNamespace(estimated_stepping_batches=100, max_epochs=-1, global_step=0, current_epoch=0, is_global_zero=True,
                         sanity_checking=False, callback_metrics={"val/loss": torch.tensor(9.0)}, num_training_batches=100,
                         accumulate_grad_batches=1)  # fmt: skip
    runs = SimpleNamespace(stops=SimpleNamespace(reason=[None, None, None]))
    module = SimpleNamespace(member_metrics=[{"val/loss": 3.0}, {"val/loss": 4.0, "val/bleu": 7.5}, {"val/loss": 5.0}])
    outs = [tmp_path / f"m{k}" for k in range(3)]
    for out in outs:
        out.mkdir()
    cbs = [MemberProgress(out, k, runs) for k, out in enumerate(outs)]
    for cb in cbs:
        cb.every_s = 0
        cb.on_train_start(tr, module)
    for _ in range(4):
        group_step(cbs, tr, clock)
    assert [read_progress(o)["tokens_per_s"] for o in outs] == [300.0, 700.0, 200.0]  # its own, not the group's 1,200
    for cb in cbs:
        cb.on_validation_start(tr, module)
    clock.t += 1.0
    runs.stops.reason[1], runs.stops.reason[2] = "converged", "diverged"  # what MemberRuns made of this validation
    for cb in cbs:
        cb.on_validation_end(tr, module)
    p = [read_progress(o) for o in outs]
    assert [(x["val/loss"], x["val/bleu"]) for x in p] == [(3.0, None), (4.0, 7.5), (5.0, None)]
    assert [x["phase"] for x in p] == ["training", "finished", "stopped"]
    for _ in range(3):
        group_step(cbs, tr, clock)
    p = [read_progress(o) for o in outs]
    assert [x["step"] for x in p] == [7, 4, 4]  # a stopped member's steps stay where it stopped
    assert [x["phase"] for x in p] == ["training", "finished", "stopped"]
    for cb in cbs:
        cb.on_train_end(tr, module)
    assert [read_progress(o)["phase"] for o in outs] == ["finished", "finished", "stopped"]


def test_a_stopped_member_keeps_its_file_fresh_and_a_resumed_group_keeps_the_file_it_left(tmp_path, clock):
    tr = SimpleNamespace(estimated_stepping_batches=100, max_epochs=-1, global_step=0, current_epoch=0, is_global_zero=True,
                         sanity_checking=False, callback_metrics={}, num_training_batches=100, accumulate_grad_batches=1)  # fmt: skip
    runs = SimpleNamespace(stops=SimpleNamespace(reason=["converged"]))
    module = SimpleNamespace(member_metrics=[{"val/loss": 3.0}])
    left = {"phase": "finished", "step": 40, "max_steps": 100, "val/loss": 2.5, "val_step": 40, "updated": clock.t}
    write_progress(tmp_path, left)
    cb = MemberProgress(tmp_path, 0, runs)
    tr.global_step = 60  # the group resumes at 60, after member 0 stopped at 40
    cb.on_train_start(tr, module)
    tr.sanity_checking = True  # the resumed fit's sanity check: not this member's validation
    cb.on_validation_start(tr, module)
    cb.on_validation_end(tr, module)
    tr.sanity_checking = False
    p = read_progress(tmp_path)
    assert (p["phase"], p["step"], p["val/loss"], p["val_step"]) == ("finished", 40, 2.5, 40)
    for _ in range(5):
        group_step([cb], tr, clock)
    p = read_progress(tmp_path)
    assert (p["phase"], p["step"]) == ("finished", 40) and p["updated"] == clock.t  # fresh: not taken for a hung run


def test_a_groups_bar_shows_the_groups_progress_not_its_first_members(tmp_path, clock):
    """Member 0's MemberProgress came first among the callbacks: the bar showed its step, ETA and validation, frozen at
    its own end while the group trained on."""
    from ablate.run.progress import ProgressFile, shown_fields

    member, group = MemberProgress(tmp_path, 0, None), ProgressFile(tmp_path)
    member.state.update(step=20, max_steps=40, **{"val/loss": 6.651})
    group.state.update(step=40, max_steps=40, **{"val/loss": 5.6})
    shown = shown_fields(SimpleNamespace(callbacks=[member, group]), {"train/loss": 5.0})
    assert (shown["step"], shown["val/loss"]) == ("40/40", 5.6)

"""Which checkpoint `--resume` continues from (ablate.run.resume_point): by the global step inside, skipping the
unreadable, the damaged and the weights-only, and never a member's own."""

from __future__ import annotations

import os

import pytest
import torch

from ablate.run import resume_point
from ablate.run.resume_point import resume_checkpoint


def checkpoint(out, name: str, step: int, weights_only: bool = False, weights: torch.Tensor | None = None):
    path = out / "checkpoints" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    ckpt = {"state_dict": {} if weights is None else {"model.w": weights}, "hyper_parameters": {}, "global_step": step}
    if not weights_only:
        ckpt["optimizer_states"] = [{}]
    torch.save(ckpt, path)
    return path


def test_resume_checkpoint_goes_by_the_global_step_inside_not_names_or_mtimes(tmp_path):
    paths = [
        checkpoint(tmp_path, "step=10.ckpt", 10),
        checkpoint(tmp_path, "step=99.ckpt", 5),
        checkpoint(tmp_path, "last.ckpt", 20),
        checkpoint(tmp_path, "step=20.ckpt", 30),
    ]
    for age, path in enumerate(reversed(paths)):  # the furthest one is the oldest file
        os.utime(path, ns=(10**18 - age * 10**9, 10**18 - age * 10**9))
    assert resume_checkpoint(tmp_path).name == "step=20.ckpt"


def test_resume_checkpoint_prefers_last_on_a_tie_and_a_step_checkpoint_when_last_is_behind(tmp_path):
    checkpoint(tmp_path, "step=20.ckpt", 20)
    checkpoint(tmp_path, "last.ckpt", 20)
    assert resume_checkpoint(tmp_path).name == "last.ckpt"
    checkpoint(tmp_path, "last.ckpt", 15)  # a kill between the step save and the last save
    assert resume_checkpoint(tmp_path).name == "step=20.ckpt"


def test_a_best_checkpoint_alone_resumes_and_is_never_taken_over_a_step_or_last_at_its_step(tmp_path):
    """A validation saves best.ckpt before step=N.ckpt and last.ckpt: a kill between them at the first validation left
    only best.ckpt, a full training state, which --resume and --auto-resume refused for good ("none found")."""
    checkpoint(tmp_path, "best.ckpt", 10)
    assert resume_checkpoint(tmp_path).name == "best.ckpt"
    checkpoint(tmp_path, "step=10.ckpt", 10)
    assert resume_checkpoint(tmp_path).name == "step=10.ckpt"  # saved after it
    checkpoint(tmp_path, "last.ckpt", 20)
    assert resume_checkpoint(tmp_path).name == "last.ckpt"


def test_resume_checkpoint_skips_unreadable_and_weights_only_files(tmp_path, caplog):
    checkpoint(tmp_path, "step=10.ckpt", 10)
    good = checkpoint(tmp_path, "step=30.ckpt", 30)
    cut = tmp_path / "checkpoints" / "last.ckpt"
    cut.write_bytes(good.read_bytes()[:100])  # killed mid-save
    (tmp_path / "checkpoints" / "step=40.ckpt").write_bytes(b"")
    checkpoint(tmp_path, "step=50.ckpt", 50, weights_only=True)  # `ablate average` output
    checkpoint(tmp_path, "best.ckpt", 60, weights_only=True)  # a resume candidate where it holds the training state
    resume_point.log.addHandler(caplog.handler)
    try:
        assert resume_checkpoint(tmp_path) == good
    finally:
        resume_point.log.removeHandler(caplog.handler)
    assert "last.ckpt" in caplog.text and "step=40.ckpt" in caplog.text


def test_resume_checkpoint_with_nothing_usable_says_why_for_each_file(tmp_path):
    with pytest.raises(ValueError, match="no checkpoint in .* can be resumed from: none found"):
        resume_checkpoint(tmp_path)
    checkpoint(tmp_path, "step=5.ckpt", 5, weights_only=True)
    (tmp_path / "checkpoints" / "last.ckpt").write_text("garbage")
    with pytest.raises(ValueError) as e:
        resume_checkpoint(tmp_path)
    assert "step=5.ckpt: holds weights only" in str(e.value) and "last.ckpt: not a readable checkpoint" in str(e.value)


def test_a_members_checkpoints_are_not_resumed_as_a_run_and_say_to_resume_the_group(tmp_path):
    for name, step in (("step=10.ckpt", 10), ("last.ckpt", 10)):
        path = checkpoint(tmp_path, name, step)
        torch.save({**torch.load(path, weights_only=True), "member_of": {"group": "runs/g", "member": 1, "members": 4}}, path)
    with pytest.raises(ValueError) as e:
        resume_checkpoint(tmp_path)
    assert str(e.value).count("member 1 of the member group runs/g") == 1  # said once, not once a checkpoint
    assert "resume the group with the `ablate train ... --members K` command that started it, adding --resume" in str(e.value)
    (tmp_path / "checkpoints" / "step=10.ckpt").unlink()
    path = checkpoint(tmp_path, "last.ckpt", 10)  # a sweep's member
    swept = {"config": {"sweep": {"study": "s"}}}
    torch.save({**torch.load(path, weights_only=True), "hyper_parameters": swept, "member_of": {"group": "g", "member": 0}}, path)
    with pytest.raises(ValueError, match="rerun its sweep"):
        resume_checkpoint(tmp_path)


def test_resume_checkpoint_skips_one_whose_bytes_changed_since_it_was_written(tmp_path, caplog):
    """Damage in place (same size) loaded as NaN weights, and the resumed run "diverged": its checksum names it."""
    good = checkpoint(tmp_path, "step=10.ckpt", 10, weights=torch.randn(50_000))
    last = checkpoint(tmp_path, "last.ckpt", 20, weights=torch.randn(50_000))
    data = bytearray(last.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 4096] = b"\xff" * 4096
    last.write_bytes(bytes(data))
    resume_point.log.addHandler(caplog.handler)
    try:
        assert resume_checkpoint(tmp_path) == good
    finally:
        resume_point.log.removeHandler(caplog.handler)
    assert f"{last}: damaged: its part" in caplog.text and "fails its checksum" in caplog.text


def model_checkpoint(out, name: str, step: int, model: dict):
    """A checkpoint holding the weights of the small Transformer `model` (a model section) builds, as a run saves it."""
    from ablate.config import ModelConfig
    from ablate.model import build_transformer

    weights = {f"model.{k}": v for k, v in build_transformer(ModelConfig(**model), 40).state_dict().items()}
    path = checkpoint(out, name, step)
    hp = {"vocab_size": 40, "config": {"model": model}}
    torch.save({**torch.load(path, weights_only=True), "state_dict": weights, "hyper_parameters": hp}, path)
    return path


def test_a_checkpoint_of_another_model_is_skipped_naming_the_file_and_the_keys(tmp_path, caplog):
    """One copied in from another run, or config.yaml edited since: Lightning's load_state_dict stopped the resume
    with a size-mismatch traceback of a hundred lines. The furthest checkpoint that fits is taken; none: each named."""
    from ablate.config import ModelConfig, to_dict

    ours = {**to_dict(ModelConfig())} | {"d_model": 16, "d_ff": 32, "heads": 2, "enc_layers": 1, "dec_layers": 1}
    good = model_checkpoint(tmp_path, "step=10.ckpt", 10, ours)
    last = model_checkpoint(tmp_path, "last.ckpt", 20, {**ours, "d_model": 8, "d_ff": 16})
    resume_point.log.addHandler(caplog.handler)
    try:
        assert resume_checkpoint(tmp_path, ours) == good
        assert resume_checkpoint(tmp_path) == last  # no model to fit: a sweep's worker asks only whether one is there
    finally:
        resume_point.log.removeHandler(caplog.handler)
    said = (
        f"{last}: weights of another model (model.d_model: 8 in it, 16 in the run's config; model.d_ff: 16 in it, 32 in the run's config)"
    )
    assert said in caplog.text
    good.unlink()
    with pytest.raises(
        ValueError, match=r"no checkpoint in .* can be resumed from: .*last\.ckpt: weights of another model \(model\.d_model: 8"
    ):
        resume_checkpoint(tmp_path, ours)

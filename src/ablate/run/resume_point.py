"""Which checkpoint `--resume` continues a run from: the one furthest into training that loads, whose checksums hold
and whose weights are the run's model's, never a member's own (its group resumes it) nor a weights-only average."""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)


def member_resume_hint(out: Path, ckpt: dict) -> str:
    """What continues a member's run: its group, by the command that started the group (its config.yaml keeps no
    listed seeds or values), or in a sweep the sweep, which continues its groups."""
    member, group = ckpt["member_of"].get("member"), ckpt["member_of"].get("group")
    study = ((ckpt.get("hyper_parameters") or {}).get("config") or {}).get("sweep", {}).get("study")
    how = (
        "rerun its sweep (ablate sweep ...), which continues the group's members from its checkpoint"
        if study
        else "resume the group with the `ablate train ... --members K` command that started it, adding --resume"
    )
    return f"{out} is member {member} of the member group {group}; its checkpoints hold its weights, not the group's training state: {how}"


def other_model(path: Path, ckpt: dict, model: dict) -> str | None:
    """Why `ckpt`'s weights are not those of the model section `model` builds (a checkpoint copied in from another run,
    a config.yaml edited since), naming the keys in which its saved config differs; None where they fit, or where
    either side is too damaged to tell (the load that follows names the damage). Built on the meta device."""
    import torch

    from ablate.config import ModelConfig
    from ablate.model import build_transformer
    from ablate.training.checkpoint import CheckpointError, weights

    hp = ckpt.get("hyper_parameters") if isinstance(ckpt.get("hyper_parameters"), dict) else {}
    try:
        with torch.device("meta"):
            want = {f"model.{k}": tuple(v.shape) for k, v in build_transformer(ModelConfig(**model), hp["vocab_size"]).state_dict().items()}
        have = {k: tuple(v.shape) for k, v in weights(ckpt, path).items() if k.startswith("model.")}
    except (TypeError, ValueError, KeyError, CheckpointError):
        return None
    if have == want:
        return None
    theirs = hp["config"].get("model") if isinstance(hp.get("config"), dict) else None
    keys = [k for k in model if isinstance(theirs, dict) and theirs.get(k, model[k]) != model[k]]
    said = [f"model.{k}: {theirs[k]!r} in it, {model[k]!r} in the run's config" for k in keys]
    if not said:  # a saved config that does not say how: the parameters that differ
        said = [
            f"{k}: {have.get(k)} in it, {want.get(k)} for the run's config"
            for k in sorted(k for k in have.keys() | want.keys() if have.get(k) != want.get(k))[:3]
        ]
    return f"{path}: weights of another model ({'; '.join(said)}), which cannot continue this run"


def resume_checkpoint(out: Path, model: dict | None = None) -> Path:
    """The checkpoint furthest into training that loads: last.ckpt or a step checkpoint (a kill between the two
    saves leaves last.ckpt behind; a preemption save leaves it ahead), skipping any that is unreadable (killed
    mid-save, truncated) and, given the run's model section `model`, any holding another model's weights. Ordered by
    the global_step inside each file, not by mtime: file timestamps come from a coarse clock, and two saves a few
    milliseconds apart can carry the same one."""
    from ablate.training.checkpoint import CheckpointError, check_intact, load_checkpoint  # torch: not needed by a worker's other questions

    candidates, problems = [], []

    def refused(path: Path, e: CheckpointError | str) -> None:
        problems.append(str(e))
        log.warning("cannot resume from %s: %s", path, e)

    # best.ckpt too: a validation saves it first, so a kill before step=N.ckpt and last.ckpt of the run's first
    # validation left it the only full training state, and the run could never be resumed.
    for path in [*(out / "checkpoints").glob("step=*.ckpt"), *(out / "checkpoints" / n for n in ("last.ckpt", "best.ckpt"))]:
        if not path.exists():
            continue
        try:
            ckpt = load_checkpoint(path, mmap=True)
        except CheckpointError as e:
            refused(path, e)
            continue
        if ckpt.get("member_of"):  # a member's weights and moments, without the group's loops, schedule and data order
            raise ValueError(f"--resume: {member_resume_hint(out, ckpt)}")
        if not ckpt.get("optimizer_states"):  # weights only (`ablate average` writes these): no training state
            problems.append(f"{path}: holds weights only (averaged or exported), no optimizer state to resume")
            continue
        if model is not None and (misfit := other_model(path, ckpt, model)):
            refused(path, misfit)
            continue
        rank = (path.name == "last.ckpt", path.name != "best.ckpt", path.stat().st_mtime_ns)  # at one step: last, a step's, best
        candidates.append(((int(ckpt.get("global_step", -1)), *rank), path))
    for _, path in sorted(candidates, reverse=True):  # the furthest whose checksums hold: read whole, so one at a time
        try:
            check_intact(path)
            return path
        except CheckpointError as e:
            refused(path, e)
    raise ValueError(f"--resume: no checkpoint in {out / 'checkpoints'} can be resumed from: " + "; ".join(problems or ["none found"]))

"""What `ablate train --members K --resume` checks before any file changes (ablate.run.members): the group resumes with
the members it started with, and the group's config and each member's are checked as a run's resume checks its own
(ablate.run.resume_checks)."""

from __future__ import annotations

from pathlib import Path

from ablate.config import ExperimentConfig
from ablate.run.resume_checks import prepare_resume
from ablate.run.rundir import saved_config


def check_same_members(cfg: ExperimentConfig, configs: list[ExperimentConfig], group: Path) -> None:
    """A group resumes with the members it started with: as many, in the same folders (the same seeds and listed
    values), even with --force."""
    saved = saved_config(group).get("members", {}).get("size") if (group / "config.yaml").is_file() else None
    if saved is not None and saved != cfg.members.size:
        raise ValueError(
            f"--resume: the group {group} trains {saved} members and this command asks for {cfg.members.size} "
            f"({group / 'config.yaml'}); a group resumes with the members it started with, even with --force; nothing was changed"
        )
    strangers = [c.out_dir for c in configs if not Path(c.out_dir, "config.yaml").is_file()]
    if strangers:
        raise ValueError(
            f"--resume: {strangers[0]} holds no config.yaml, so it is not a member of the group {group}: a group resumes "
            "with the members it started with (the same seeds and listed values), even with --force; nothing was changed"
        )
    for k, c in enumerate(configs):  # the group checkpoint's slot k is member k: another order would swap their weights
        path = Path(c.out_dir, "config.yaml")
        mine = saved_config(Path(c.out_dir))
        index, seed = mine.get("members", {}).get("index"), mine.get("seed")
        if (index, seed) != (k, c.seed):
            raise ValueError(
                f"--resume: {c.out_dir} trained as member {index} of the group {group} with seed {seed} ({path}), and this "
                f"command makes it member {k} with seed {c.seed}: give the seeds and listed values in the order the group "
                "started with, even with --force (another order would swap the members' weights); nothing was changed"
            )


def prepare_group_resume(
    cfg: ExperimentConfig, configs: list[ExperimentConfig], group: Path, force: bool, accept_data_change: bool
) -> tuple:
    """Check that the group can continue with `cfg` and these members as a run's resume is checked, for the group's
    config and each member's, refusing before any file changes; (checkpoint, attempt, tokenizer, fingerprint or None)."""
    ckpt_path = group / "checkpoints" / "last.ckpt"
    if not ckpt_path.is_file():
        raise ValueError(f"--resume: {group} holds no group checkpoint (checkpoints/last.ckpt) to resume from")
    from ablate.training.checkpoint import CheckpointError, check_intact  # torch: imported where a group resumes

    try:
        check_intact(ckpt_path)  # Lightning loads it unchecked: damaged weights would train as garbage, then "diverge"
    except CheckpointError as e:
        raise ValueError(f"--resume: {e}") from None
    runs = [(group, cfg), *((Path(c.out_dir), c) for c in configs)]
    fingerprinted = Path(configs[0].out_dir)  # one corpus: each member records it, the group does not
    return ckpt_path, *prepare_resume(ckpt_path, runs, fingerprinted, group, force, accept_data_change)

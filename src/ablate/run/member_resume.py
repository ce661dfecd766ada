"""What `ablate train --members K --resume` checks before any file changes (ablate.run.members): the group resumes with
the members it started with, and the group's config and each member's are checked as a run's resume checks its own
(ablate.run.resume_checks)."""

from __future__ import annotations

import logging
from pathlib import Path

from ablate.config import ExperimentConfig
from ablate.run.fingerprint import checkpoint_tokenizer, run_tokenizer
from ablate.run.resume_checks import (
    checked_config_changes,
    checked_data,
    fingerprint_to_record,
    keep_forced_config,
    remove_interrupted_saves,
    resume_attempt,
)  # fmt: skip
from ablate.run.rundir import saved_config

log = logging.getLogger(__name__)


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


def prepare_group_resume(
    cfg: ExperimentConfig, configs: list[ExperimentConfig], group: Path, force: bool, accept_data_change: bool
) -> tuple:
    """Check that the group can continue with `cfg` and these members as a run's resume is checked, for the group's
    config and each member's, refusing before any file changes; (checkpoint, attempt, tokenizer, fingerprint or None)."""
    ckpt_path = group / "checkpoints" / "last.ckpt"
    if not ckpt_path.is_file():
        raise ValueError(f"--resume: {group} holds no group checkpoint (checkpoints/last.ckpt) to resume from")
    changes = [(group, cfg, checked_config_changes(group, cfg, force))]
    changes += [(Path(c.out_dir), c, checked_config_changes(Path(c.out_dir), c, force)) for c in configs]
    proto = checkpoint_tokenizer(ckpt_path)
    data_changed = checked_data(Path(configs[0].out_dir), cfg.data, proto, ckpt_path, accept_data_change)  # one corpus
    attempt = resume_attempt(group)
    for out, config, changed in changes:
        remove_interrupted_saves(out)
        keep_forced_config(out, config, changed, attempt)
    tokenizer = run_tokenizer(group, proto, ckpt_path) if proto is not None else None
    log.warning("resuming the group %s from %s", group, ckpt_path)
    return ckpt_path, attempt, tokenizer, fingerprint_to_record(data_changed, attempt)

"""What `--resume` checks before any file changes, for one run (ablate.run.train) and for a member group and each of its
members (ablate.run.members) alike: the config against the run's saved config.yaml, and the corpus files against its
fingerprint.json, and the plugins' files against the sha256 the checkpoint records. A config change is refused unless
forced, and always where it changes the model's shapes; a plugin file edited since the checkpoint was saved is refused
unless forced (the config names the same path); a corpus edited in place is refused unless accepted (a config change
shows in the command, an edited file does not)."""

from __future__ import annotations

import logging
from pathlib import Path

from ablate import plugins
from ablate.config import ExperimentConfig, to_dict, to_yaml
from ablate.data.tokenizer import SETTINGS_KEYS
from ablate.files import signals
from ablate.files.atomic import write_file
from ablate.run.exits import FAILED_FILE
from ablate.run.fingerprint import checkpoint_tokenizer, data_changes, run_tokenizer
from ablate.run.rundir import FINGERPRINT, changes_from_saved_config, saved_config

log = logging.getLogger(__name__)


def checked_config_changes(out: Path, cfg: ExperimentConfig, force: bool) -> dict[str, tuple]:
    """The keys in which `cfg` differs from the run's saved config (key -> (saved, now)), once they may go on."""
    changes = changes_from_saved_config(out, cfg)
    listed = ", ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in changes.items())
    if changes and not force:
        raise ValueError(
            f"--resume: the config differs from the run's saved one in {listed} ({out / 'config.yaml'}); use --force to resume anyway"
        )
    reshaped = shape_changes(out, cfg, changes) if changes else []
    if reshaped:
        raise ValueError(
            f"--resume: {', '.join(reshaped)} change the shapes of the model's parameters, so no checkpoint "
            f"of {out} can continue with them, even with --force; nothing was changed. Start a new run "
            "(another out_dir) for that config"
        )
    return changes


def checked_plugins(ckpt_path: Path, cfgs: list[ExperimentConfig], force: bool) -> None:
    """Refuse, unless forced, a plugin file defining a variant the configs' models use whose contents are not those
    `ckpt_path` was trained with (its record; a checkpoint from before records passes): the config names the same
    path, so its check sees nothing. A plugin none of whose variants the model uses may change (a sweep's plugin file
    given a new row's variant)."""
    from ablate.training.checkpoint import load_checkpoint

    record = load_checkpoint(ckpt_path, mmap=True).get(plugins.PLUGIN_HASHES)
    changed = list(dict.fromkeys(change for cfg in cfgs for change in plugins.edited(record, to_dict(cfg)["model"])))
    listed = "; ".join(f"{s} (sha256 {a[:12]} -> {b[:12]})" for s, a, b in changed)
    how = (  # a sweep's trial resumes without --force, and a rerun sweep starts a failed trial's row over
        "a sweep takes no --force: rerunning it starts the row over in a new folder"
        if any(cfg.sweep.study for cfg in cfgs)
        else "use --force to resume anyway with it as it is now"
    )
    if changed and not force:
        raise ValueError(f"--resume: plugin {listed} changed since {ckpt_path} was saved, whose weights trained with it as it was; {how}")
    if changed:
        log.warning("resuming with plugin %s as it is now, changed since %s was saved", listed, ckpt_path)


def shape_changes(out: Path, cfg: ExperimentConfig, changes: dict[str, tuple]) -> list[str]:
    """The changed keys that change the shapes of the model's parameters, so no checkpoint of the run can load:
    each changed model key is applied alone to the saved model config and both are built on the meta device."""
    import torch

    from ablate.config import ModelConfig
    from ablate.model import build_transformer

    saved = saved_config(out)
    vocab = cfg.data.vocab_size

    def shapes(model: dict) -> dict[str, tuple]:
        with torch.device("meta"):
            return {k: tuple(v.shape) for k, v in build_transformer(ModelConfig(**model), vocab).state_dict().items()}

    try:
        before = shapes(saved["model"])
    except (TypeError, ValueError, KeyError):
        return [k for k in changes if k.startswith("model.")]  # an unreadable saved model: every model change counts
    found = ["data.vocab_size"] if "data.vocab_size" in changes else []
    for key in (k for k in changes if k.startswith("model.")):
        try:
            if shapes({**saved["model"], key.split(".", 1)[1]: changes[key][1]}) != before:
                found.append(key)
        except (TypeError, ValueError):
            found.append(key)
    return found


def checked_data(out: Path, data_cfg, tokenizer: bytes | None, ckpt_path: Path, accept: bool) -> list[str] | None:
    """How the corpus files differ from the run's fingerprint (None: it has none), once the run may go on over them."""
    changed = data_changes(out, data_cfg, tokenizer, ckpt_path)
    if changed and not accept:
        raise ValueError(
            f"--resume: the run's data changed since it started (as {out / FINGERPRINT} records it): {'; '.join(changed)}. "
            "Its checkpoints learned from the files as they were; restore them, start a new run (another out_dir), or pass "
            "--accept-data-change to go on over the files as they are now with the run's own tokenizer; nothing was changed"
        )
    if changed is None:
        log.warning("%s has no fingerprint of its corpus and tokenizer to check (it predates them); recording them as they are now", out)
    return changed


def keep_forced_config(out: Path, cfg: ExperimentConfig, changes: dict[str, tuple], attempt: int) -> None:
    """A forced change: the new config is the run's from now on, the old one kept beside it."""
    if not changes:
        return
    with signals.held():  # both or neither: the config the run trained with is never lost
        write_file(out / f"config.before-resume-{attempt}.yaml", (out / "config.yaml").read_text())
        write_file(out / "config.yaml", to_yaml(cfg))
    if kept := [k for k in changes if k in SETTINGS_KEYS]:
        log.warning("the resumed run keeps its tokenizer: %s apply to a new run only", ", ".join(kept))


def set_aside_results(out: Path, attempt: int, cfg: ExperimentConfig | None = None) -> None:
    """A resumed run's earlier results (summary.json, eval/SPLIT.json, a divergence's FAILED.txt) describe weights it is about to train further: each
    is kept as NAME.before-resume-N.json, so until the resume writes its own the run reads as unfinished (`ablate
    table` leaves it out, naming it) rather than done at its old step count, should the resume be stopped. Called as
    training starts, after every check that may still refuse the resume (disk space, data, the trainer); so is a
    forced config written (`keep_forced_config`): written as the resume was checked, a resume then refused for its
    data left config.yaml with settings the run never trained with, and the next forced one overwrote the kept copy."""
    if cfg is not None:
        keep_forced_config(out, cfg, changes_from_saved_config(out, cfg), attempt)
    with signals.held():  # all or none: a summary set aside beside its record still read as done
        for path in [out / "summary.json", out / FAILED_FILE, *sorted((out / "eval").glob("*.json"))]:
            if path.is_file() and ".before-resume-" not in path.name:
                path.rename(path.with_name(f"{path.stem}.before-resume-{attempt}{path.suffix}"))


def remove_interrupted_saves(out: Path) -> None:
    """Checkpoint saves a kill interrupted (see AtomicCheckpointIO): temporary files nothing reads."""
    for stale in (out / "checkpoints").glob(".*.tmp"):
        stale.unlink()


def resume_attempt(out: Path) -> int:
    """This resume's number: 1 + the resumes before it (each left a resume-N metrics file)."""
    return 1 + sum(1 for _ in out.glob("resume-*"))


def fingerprint_to_record(changed: list[str] | None, attempt: int) -> str | None:
    """Recorded anew (after the data is read) when none was or a change was accepted; else the start's record stands."""
    return f"resume-{attempt}" if changed is None or changed else None


def prepare_resume(
    ckpt_path: Path, runs: list[tuple[Path, ExperimentConfig]], fingerprinted: Path, home: Path, force: bool, accept_data_change: bool
) -> tuple[int, object, str | None]:
    """A resume from `ckpt_path`, checked before any file changes: each run directory's config in `runs` against its
    saved one, the plugins' files against the checkpoint's record, the corpus against `fingerprinted`'s fingerprint.
    Then stale saves go and the checkpoint's tokenizer is restored in `home` (the directory
    that resumes: a run's, a group's). Returns (attempt number, that tokenizer or None, the fingerprint record to write
    or None)."""
    changes = [(out, cfg, checked_config_changes(out, cfg, force)) for out, cfg in runs]
    checked_plugins(ckpt_path, [cfg for _, cfg in runs], force)
    proto = checkpoint_tokenizer(ckpt_path)
    data_changed = checked_data(fingerprinted, runs[0][1].data, proto, ckpt_path, accept_data_change)
    attempt = resume_attempt(home)
    for out, _, _ in changes:
        remove_interrupted_saves(out)  # a forced config is written as training starts (set_aside_results)
    tokenizer = run_tokenizer(home, proto, ckpt_path) if proto is not None else None
    log.warning("resuming %s from %s", home, ckpt_path)
    return attempt, tokenizer, fingerprint_to_record(data_changed, attempt)

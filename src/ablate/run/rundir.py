"""A run directory (`out_dir`) and the services it offers: created and proven writable before any work, held by
one training process at a time, its saved config compared with the present one (the checkpoint to resume from:
ablate.run.resume_point; its data fingerprint: ablate.run.fingerprint). A sweep continues a dead trial through
these, so they know nothing of sweeps.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from pathlib import Path

from ablate.config import ExperimentConfig, diff, to_dict, with_defaults
from ablate.config.compose import DATA_PATHS
from ablate.config.saved import read_run_config
from ablate.config.trained import same_value
from ablate.files import signals
from ablate.run.exits import FAILED_FILE
from ablate.run.progress_file import PROGRESS_FILE
from ablate.run.run_lock import RUN_LOCK, lock_run_dir, other_rank, unlock_run_dir

log = logging.getLogger(__name__)


FINGERPRINT = "fingerprint.json"  # the corpus files and tokenizer the run trains on (see record_fingerprint)
RUN_TOKENIZER = "tokenizer.model"  # the run's own tokenizer, from its checkpoint, which a resume encodes with
# The files training writes in out_dir by name, replaced whole: one already there is an earlier run's (or a user's, moved
# aside with it, never written over), and a link at one is refused before anything is written (ablate.files.atomic
# refused it only at the write, mid-run, after the config and the lock were written).
WRITTEN_FILES = ("config.yaml", "hparams.yaml", "metrics.csv", "summary.json", FINGERPRINT, RUN_TOKENIZER, PROGRESS_FILE, FAILED_FILE)
RUN_FILES = (*WRITTEN_FILES, "checkpoints", "eval", "wandb")
# + resume-N/ and the NAME.before-resume-N.EXT a resume keeps of what it replaced


def earlier_run(out: Path) -> list[Path]:
    """What an earlier run left in `out`, checkpoints or not (a run that died before its first save leaves its
    config and metrics); files a sweep writes before its trial starts (trial.yaml, train.log) are not a run."""
    found = [out / name for name in RUN_FILES if os.path.lexists(out / name)]  # a link to nothing too
    # An empty folder holds nothing to lose; a *file* named checkpoints is no run either (prepare_out_dir refuses it).
    found = [p for p in found if (any(p.iterdir()) if p.is_dir() else p.name != "checkpoints")]
    return found + sorted(out.glob("resume-*")) + sorted(out.glob("*.before-resume-*")) + _members_in(out)


def _members_in(group: Path) -> list[Path]:
    """The run folders inside `group` of the member group trained there (`ablate train --members`: each member's
    config.yaml names it in members.group), which belong to that group's run: moved aside with it, never split off."""
    members, size = [], _group_size(group)
    for folder in sorted(p for p in group.iterdir() if p.is_dir() and (p / "config.yaml").is_file()):
        try:
            own = saved_config(folder).get("members", {})
        except (ValueError, OSError):  # a damaged member config: not ours to judge here
            continue
        named = own.get("group")
        # The group as it was named when it trained: relative to that command's working directory, maybe not this one's;
        # or, the group's folder copied or renamed since, a member of a group of this one's size.
        by_name = named and (Path(named).resolve() == group.resolve() or Path(named).name == group.resolve().name)
        if by_name or (size > 1 and own.get("index") is not None and own.get("size") == size):
            members.append(folder)
    return members


def _group_size(folder: Path) -> int:
    """members.size of the config saved in `folder` (1 where none is, or it does not read)."""
    try:
        return int(saved_config(folder).get("members", {}).get("size") or 1) if (folder / "config.yaml").is_file() else 1
    except (ValueError, OSError, TypeError):
        return 1


def move_aside(out: Path) -> Path:
    """Move all `out` holds into a new sibling folder NAME.earlier-K (K one past the largest there), so a new run starts
    clean and the old one is kept whole: its files, its members' folders, and what was put beside them (an `ablate
    average -o OUT/avg5.ckpt` left there would be scored as the new run's). The run lock, which this command holds,
    stays, as does a file this command's own output goes to (a job script's `> OUT/train.log`)."""
    out = out.resolve()  # out_dir=. has no name of its own: NAME.earlier-K would be made inside it, then moved into itself
    prefix = f"{out.name}.earlier-"
    k = 1 + max((int(n) for p in out.parent.iterdir() if (n := p.name.removeprefix(prefix)).isdigit() and n != p.name), default=0)
    while True:  # a number taken meanwhile (another folder's move) is skipped, not an error
        aside = out.parent / f"{out.name}.earlier-{k}"
        try:
            aside.mkdir()
            break
        except FileExistsError:
            k += 1
    own = []
    for fd in (1, 2):  # a closed stdout has no file to keep
        with contextlib.suppress(OSError):
            own.append(os.fstat(fd))
    with signals.held():  # a Ctrl-C here split the run between the two folders (and the advice then misread it)
        for path in sorted(out.iterdir()):
            if path.name != RUN_LOCK and not any(os.path.samestat(path.lstat(), st) for st in own):
                path.rename(aside / path.name)
    return aside


def _probe_writable(folder: Path, key: str) -> None:
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{key}={folder} is a file, not a folder; move it away or choose another out_dir")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-test-")  # a name of its own: never a file already there
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise ValueError(f"{key}={folder} is not a writable folder: {e.strerror or e}") from None


def prepare_out_dir(cfg: ExperimentConfig, resume: bool = False, aside: bool = False) -> Path:
    """Create out_dir and prove it and its checkpoints/ writable before any work starts; never train over an
    earlier run's files (with `aside`, move them to a sibling folder first)."""
    out = Path(cfg.out_dir)
    # DDP ranks other than 0 re-run the command after rank 0 has started the run: its files are not an earlier run.
    earlier = earlier_run(out) if out.is_dir() and not other_rank() else []
    if earlier and not resume:
        if not aside:
            saved = any((out / "checkpoints").glob("*.ckpt"))  # none where the folder is not there
            # a run that ended before its first checkpoint (a crash, a bug in a plugin) has nothing to resume from
            log_said = ", its train.log saying how it ended" if (out / "train.log").exists() else ""  # a sweep trial's
            how = (
                "resume it with --resume, move it aside with --move-aside"
                if saved
                else f"it saved no checkpoint, so nothing resumes: start again with --move-aside (keeps it as {out.name}.earlier-K{log_said})"
            )
            raise ValueError(
                f"out_dir={cfg.out_dir} already holds a run ({', '.join(p.name for p in earlier)}); {how}, or choose "
                "another out_dir; nothing of it was changed"
            )
        log.warning("moved the earlier run in %s to %s", out, move_aside(out))
    if resume and not any((out / "checkpoints").glob("*.ckpt")):
        raise ValueError(f"--resume: out_dir={cfg.out_dir} holds no checkpoint to resume from")
    _probe_writable(out, "out_dir")
    if (out / "checkpoints").exists():  # one made unwritable inside a writable out_dir fails here, not at the first save
        _probe_writable(out / "checkpoints", "out_dir's checkpoints")
    return out


def empty_or_absent(out: Path) -> bool:
    """Whether `out` holds nothing (or is not there): all it holds after a command is that command's."""
    return not out.exists() or (out.is_dir() and not any(out.iterdir()))


def remove_if_untouched(out: Path, stopped: bool = False, keep_folder: bool = False) -> None:
    """A run directory this command created (or found empty), left before its first write (its config.yaml: a corpus
    refused, a signal while the data was read): its lock and empty folders go, so a refusal leaves no trace; anything
    else in it stays. One that got as far as its config is a run, kept whole, unless a signal (`stopped`) ended it
    before it saved a checkpoint: all in it is this command's and nothing resumes, so it goes, and the same command
    starts it again. `keep_folder`: out_dir itself was there before (empty, made by a scheduler or a user), and stays."""
    if (out / "config.yaml").exists():
        if stopped and not any((out / "checkpoints").glob("*.ckpt")):
            for path in list(out.iterdir()) if keep_folder else [out]:
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
        return
    (out / RUN_LOCK).unlink(missing_ok=True)
    folders = sorted((p for p in out.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
    for folder in folders if keep_folder else [*folders, out]:
        with contextlib.suppress(OSError):  # not empty: someone's files, kept
            folder.rmdir()


def refuse_links(out: Path) -> None:
    """Refuse an out_dir holding a symbolic link where training writes a file (WRITTEN_FILES, its lock): each is
    replaced whole, and a link is never written through, nor its target changed; asked before anything is written."""
    for name in (*WRITTEN_FILES, RUN_LOCK):
        if (out / name).is_symlink():
            raise ValueError(
                f"out_dir={out} holds {name} as a symbolic link (to {os.readlink(out / name)}), where training writes a file "
                "of its own; remove the link or choose another out_dir; nothing was written"
            )


def claim_out_dir(cfg: ExperimentConfig, resume: bool = False, aside: bool = False) -> tuple[Path, int | None]:
    """prepare_out_dir under the run directory's lock, taken before anything moves: a `--move-aside` while another
    process trains in out_dir is refused with the earlier run where it was. Returns out_dir and the lock's descriptor."""
    out = Path(cfg.out_dir)
    lock = None
    refuse_links(out)  # before the lock opens a linked .run.lock, and before prepare_out_dir writes anything
    made_lock = not (out / RUN_LOCK).exists()  # a refusal takes it away again: a user's folder keeps no trace
    if out.is_dir():
        try:
            lock = lock_run_dir(out)
        except PermissionError:  # an unwritable out_dir: prepare_out_dir names it
            lock = None
    try:
        out = prepare_out_dir(cfg, resume, aside)
        if lock is None:
            lock = lock_run_dir(out)
    except BaseException:
        if lock is not None and made_lock:
            (out / RUN_LOCK).unlink(missing_ok=True)  # while held: a process waiting on it sees it gone (lock_run_dir)
        unlock_run_dir(lock)
        raise
    return out, lock


def check_disk_space(out: Path, params: int, keep_last: int) -> None:
    """Fail before training, not hours later at a save, when out_dir cannot hold the checkpoints the run keeps.

    Each checkpoint holds fp32 weights and Adam's two moments (about 12 bytes a parameter); the run keeps
    `keep_last` periodic ones, best.ckpt and last.ckpt, plus one temp file during an atomic save.
    """
    per_checkpoint = 12 * params + (1 << 20)
    need = per_checkpoint * (keep_last + 3)
    # A resumed run replaces checkpoints it already holds: their space counts as available.
    free = shutil.disk_usage(out).free + sum(f.stat().st_size for f in (out / "checkpoints").glob("*.ckpt"))
    if free < need:
        raise ValueError(
            f"out_dir={out} has {free / 2**20:.1f} MiB free, but its checkpoints need about {need / 2**20:.1f} MiB "
            f"({keep_last} kept + best + last + a temp file, {per_checkpoint / 2**20:.1f} MiB each); free space, "
            "lower train.keep_last or choose another out_dir"
        )


# What a resume does not compare: a sweep's bookkeeping; members.schedule, recorded since some groups were saved (their
# schedule was their group config's seed); out_dir, the folder being resumed however it is written (`./runs/x`, an
# absolute path, from another folder: a requeued job needed --force, which lets real changes through too), and so a
# member's members.group, its group's out_dir as written.
NOT_COMPARED = ("sweep.", "members.schedule", "out_dir", "members.group")


def changes_from_saved_config(out: Path, cfg: ExperimentConfig) -> dict[str, tuple]:
    """Keys whose value differs between the run's saved config.yaml (none saved: every key differs) and `cfg`,
    sweep bookkeeping ignored; keys added to the schema since the run was written count at their defaults."""
    if not (out / "config.yaml").exists():
        return diff({}, to_dict(cfg), ignore=NOT_COMPARED)
    changes = diff(saved_config(out), to_dict(cfg), ignore=NOT_COMPARED)
    if cfg.members.size == 1:  # one run: a members.index an earlier ablate left saved after members.size=1 names no group
        changes.pop("members.index", None)
    if (out / FINGERPRINT).exists():  # what the corpus files hold is checked (ablate.run.fingerprint), not where they sit
        for key in DATA_PATHS:
            changes.pop(f"data.{key}", None)
    return {key: change for key, change in changes.items() if not same_value(key, *change)}


def saved_config(out: Path) -> dict:
    """The run's config.yaml completed with today's defaults; a ValueError naming the file when it is not a mapping, or
    is empty (cut short: read as the schema's defaults, a resume named twenty keys changed and --force a new shape)."""
    saved = read_run_config(out / "config.yaml")
    if not saved:
        copy = " (the config: section of hparams.yaml beside it holds a copy)" if (out / "hparams.yaml").is_file() else ""
        raise ValueError(f"{out / 'config.yaml'} is empty (cut short); restore it{copy}, then run the command again; nothing was changed")
    return with_defaults(saved)

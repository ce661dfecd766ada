"""A run directory's services, on run dirs built by hand: refusing or moving an earlier run, the lock, the disk-space
check, comparing with the saved config, spotting shape-changing keys, and the
fingerprint of the corpus files and tokenizer a resume is checked against."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml
from helpers import tiny_sections

from ablate.config import flatten, to_dict, to_yaml
from ablate.experiment import load_config
from ablate.files.destination import check_output
from ablate.run import rundir
from ablate.run.fingerprint import checkpoint_tokenizer, corpus_fingerprint, data_changes, record_fingerprint, run_tokenizer
from ablate.run.run_lock import lock_run_dir, run_dir_in_use
from ablate.run.rundir import (
    FINGERPRINT,
    changes_from_saved_config,
    check_disk_space,
    claim_out_dir,
    earlier_run,
    move_aside,
    prepare_out_dir,
)
from ablate.sweep.member_trial import GROUP_FILE

MODEL = {"enc_layers": 1, "dec_layers": 1, "d_model": 16, "d_ff": 32, "heads": 2, "dropout": 0.0}


def config(out, model: dict | None = None, **sections):
    return load_config(model={**MODEL, **(model or {})}, data={"vocab_size": 64}, out_dir=str(out), **sections)


def save_config(out, cfg) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(to_yaml(cfg))


def checkpoint(out, name: str, step: int, weights_only: bool = False):
    path = out / "checkpoints" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    ckpt = {"state_dict": {}, "hyper_parameters": {}, "global_step": step}
    if not weights_only:
        ckpt["optimizer_states"] = [{}]
    torch.save(ckpt, path)
    return path


@pytest.fixture(autouse=True)
def _rank_zero(monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.delenv("NODE_RANK", raising=False)


# --- earlier runs -------------------------------------------------------------------------------------------------


def test_earlier_run_lists_run_files_but_not_empty_folders_or_sweep_files(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "trial.yaml").write_text("x")  # a sweep writes these before its trial starts
    (out / "train.log").write_text("x")
    (out / "checkpoints").mkdir()  # empty: nothing to lose
    assert earlier_run(out) == []
    (out / "metrics.csv").write_text("step\n")
    (out / "config.yaml").write_text("x")
    (out / "resume-1").mkdir()
    (out / "eval").mkdir()
    (out / "eval" / "test.json").write_text("{}")
    assert [p.name for p in earlier_run(out)] == ["config.yaml", "metrics.csv", "eval", "resume-1"]


def test_move_aside_moves_the_earlier_run_whole_into_numbered_siblings(tmp_path):
    out = tmp_path / "run"
    for k in (1, 2):
        checkpoint(out, "last.ckpt", k)
        (out / "config.yaml").write_text(f"run {k}")
        (out / "trial.yaml").write_text("sweep")
        aside = move_aside(out)
        assert aside == tmp_path / f"run.earlier-{k}"
        assert (aside / "config.yaml").read_text() == f"run {k}" and (aside / "checkpoints" / "last.ckpt").is_file()
        assert list(out.iterdir()) == [] and (aside / "trial.yaml").is_file()  # the earlier trial's description too


def test_a_ctrl_c_during_move_aside_acts_once_the_whole_run_is_moved(tmp_path, monkeypatch):
    """The renames went one by one: a Ctrl-C between them left checkpoints in NAME.earlier-1 and the summary behind,
    and the advice that followed ("saved no checkpoint, start again with --move-aside") scattered it further."""
    out = tmp_path / "run"
    checkpoint(out, "last.ckpt", 1)
    for name in ("config.yaml", "metrics.csv", "summary.json"):
        (out / name).write_text(name)
    rename = Path.rename

    def interrupted(self, target):
        os.kill(os.getpid(), signal.SIGINT)  # arrives while the first entry moves
        monkeypatch.setattr(Path, "rename", rename)
        return rename(self, target)

    monkeypatch.setattr(Path, "rename", interrupted)
    with pytest.raises(KeyboardInterrupt):
        move_aside(out)
    assert list(out.iterdir()) == []
    assert sorted(p.name for p in (tmp_path / "run.earlier-1").iterdir()) == ["checkpoints", "config.yaml", "metrics.csv", "summary.json"]


def test_move_aside_takes_the_number_after_the_largest_not_after_the_count(tmp_path):
    """run.earlier-1 gone (deleted to free space), run.earlier-2 kept: K was 1 + the count, 2, a bare "[Errno 17] File
    exists"."""
    out = tmp_path / "run"
    for name in ("run.earlier-2", "run.earlier-x", "run.earlier-1a", "run.earlier-9.old"):
        (tmp_path / name).mkdir()
    (out / "checkpoints").mkdir(parents=True)
    (out / "config.yaml").write_text("x")
    assert move_aside(out) == tmp_path / "run.earlier-3" and (tmp_path / "run.earlier-3" / "config.yaml").is_file()


def test_move_aside_of_the_working_directory_moves_it_to_a_sibling_named_for_it(tmp_path, monkeypatch):
    """out_dir=. has no name: the aside folder was made inside it (./.earlier-1) and then moved into itself."""
    out = tmp_path / "run"
    (out / "checkpoints").mkdir(parents=True)
    (out / "config.yaml").write_text("x")
    monkeypatch.chdir(out)
    assert move_aside(Path(".")) == tmp_path / "run.earlier-1"
    assert (tmp_path / "run.earlier-1" / "config.yaml").is_file() and list(out.iterdir()) == []


def test_move_aside_moves_what_was_put_beside_the_run_but_not_the_lock_or_this_commands_own_log(tmp_path):
    """`ablate average --run-dir OUT -o OUT/avg2.ckpt` stayed beside the new run, so `ablate evaluate OUT/avg2.ckpt`
    scored the old model as the new run's. The lock is the new run's; a job script's `> OUT/train.log` is where this
    command writes."""
    out = tmp_path / "run"
    checkpoint(out, "last.ckpt", 5)
    (out / "config.yaml").write_text("x")
    torch.save({"state_dict": {}}, out / "avg2.ckpt")
    (out / "notes").mkdir()
    log = out / "train.log"
    saved = os.dup(1)
    try:
        with open(log, "w") as stdout:
            os.dup2(stdout.fileno(), 1)  # `ablate train ... > OUT/train.log`
        claimed, lock = claim_out_dir(config(out), aside=True)
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    try:
        aside = tmp_path / "run.earlier-1"
        assert sorted(p.name for p in aside.iterdir()) == ["avg2.ckpt", "checkpoints", "config.yaml", "notes"]
        assert sorted(p.name for p in out.iterdir()) == [".run.lock", "train.log"] and run_dir_in_use(out)
    finally:
        os.close(lock)


def test_a_member_groups_members_are_its_earlier_run_and_move_aside_with_it(tmp_path):
    """`ablate train --members` keeps each member's run folder inside the group's: moved aside, the group's files and
    its members go together, so the old group stays whole (resumable) and `ablate table` never sees its members beside
    the new group's. A folder that is no member of this group is no earlier run, but moves with it: the new group
    starts in an empty folder."""
    group = tmp_path / "g"
    cfg = config(group)
    save_config(group, cfg)
    for k, seed in enumerate((1, 2)):
        member = config(group / f"seed={seed}")
        member.members.group, member.members.index, member.seed = str(group), k, seed
        save_config(group / f"seed={seed}", member)
    other = config(group / "notes")
    other.members.group = str(tmp_path / "elsewhere")
    save_config(group / "notes", other)
    (group / "plots").mkdir()
    assert [p.name for p in earlier_run(group)] == ["config.yaml", "seed=1", "seed=2"]
    aside = move_aside(group)
    assert sorted(p.name for p in aside.iterdir()) == ["config.yaml", "notes", "plots", "seed=1", "seed=2"]
    assert list(group.iterdir()) == []


def test_members_named_by_a_relative_group_move_aside_with_it_from_any_working_directory(tmp_path, monkeypatch):
    """`members.group` is the out_dir as given (`out_dir=rel/g`); --move-aside run from another directory split the
    members off the group into folders inside the new group's."""
    group = tmp_path / "rel" / "g"
    save_config(group, config(group))
    member = config(group / "seed=1")
    member.members.group, member.members.index = "rel/g", 0
    save_config(group / "seed=1", member)
    monkeypatch.chdir(tmp_path / "rel")  # rel/g means nothing here
    assert [p.name for p in earlier_run(group)] == ["config.yaml", "seed=1"]


def test_the_members_of_a_group_folder_copied_or_renamed_move_aside_with_it(tmp_path):
    """Copied to g7, the members still name the folder they trained in: they are the group's by their index and size."""
    group = tmp_path / "g7"
    cfg = config(group)
    cfg.members.size = 2
    save_config(group, cfg)
    for k in (0, 1):
        member = config(group / f"seed={k + 1}")
        member.members.group, member.members.index, member.members.size = str(tmp_path / "g4"), k, 2
        save_config(group / f"seed={k + 1}", member)
    stray = config(group / "lone")
    stray.members.group, stray.members.index, stray.members.size = str(tmp_path / "g4"), 0, 3  # another group's
    save_config(group / "lone", stray)
    assert [p.name for p in earlier_run(group)] == ["config.yaml", "seed=1", "seed=2"]
    assert sorted(p.name for p in move_aside(group).iterdir()) == ["config.yaml", "lone", "seed=1", "seed=2"]


def test_earlier_run_counts_the_fingerprint_the_run_tokenizer_and_what_a_resume_kept(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    for name in ("fingerprint.json", "tokenizer.model", "config.before-resume-1.yaml", "fingerprint.before-resume-2.json"):
        (out / name).write_text("x")
    assert {p.name for p in earlier_run(out)} == {
        "fingerprint.json",
        "tokenizer.model",
        "config.before-resume-1.yaml",
        "fingerprint.before-resume-2.json",
    }
    move_aside(out)
    assert list(out.iterdir()) == []


def test_prepare_out_dir_creates_the_folder_and_refuses_an_earlier_run_untouched(tmp_path):
    out = tmp_path / "a" / "b" / "run"
    assert prepare_out_dir(config(out)) == out and out.is_dir() and list(out.iterdir()) == []
    (out / "metrics.csv").write_text("step\n1\n")
    # no checkpoint (a run that crashed before its first): --resume would only say so in turn, so it is not offered
    with pytest.raises(ValueError) as e:
        prepare_out_dir(config(out))
    said = str(e.value)
    assert said.startswith(f"out_dir={out} already holds a run (metrics.csv); it saved no checkpoint, so nothing resumes")
    assert "--move-aside" in said and "--resume" not in said and "train.log" not in said  # `ablate train` writes none
    (out / "train.log").write_text("Traceback ...\n")  # a sweep trial's
    with pytest.raises(ValueError, match="its train.log saying how it ended"):
        prepare_out_dir(config(out))
    (out / "train.log").unlink()
    assert (out / "metrics.csv").read_text() == "step\n1\n"
    checkpoint(out, "step=5.ckpt", 5)
    with pytest.raises(
        ValueError, match=f"out_dir={out} already holds a run \\(.*\\); resume it with --resume, move it aside with --move-aside"
    ):
        prepare_out_dir(config(out))
    assert not list(tmp_path.glob("a/b/run.earlier-*"))


def test_prepare_out_dir_with_aside_moves_the_earlier_run_and_starts_clean(tmp_path, caplog):
    out = tmp_path / "run"
    checkpoint(out, "step=5.ckpt", 5)
    (out / "config.yaml").write_text("old")
    rundir.log.addHandler(caplog.handler)
    try:
        assert prepare_out_dir(config(out), aside=True) == out
    finally:
        rundir.log.removeHandler(caplog.handler)
    assert earlier_run(out) == [] and (tmp_path / "run.earlier-1" / "checkpoints" / "step=5.ckpt").is_file()
    assert "run.earlier-1" in caplog.text


def test_prepare_out_dir_resume_needs_a_checkpoint_and_keeps_the_run(tmp_path):
    out = tmp_path / "run"
    (out / "checkpoints").mkdir(parents=True)
    (out / "config.yaml").write_text("x")
    with pytest.raises(ValueError, match="--resume: out_dir=.* holds no checkpoint to resume from"):
        prepare_out_dir(config(out), resume=True)
    checkpoint(out, "last.ckpt", 3)
    assert prepare_out_dir(config(out), resume=True) == out
    assert (out / "config.yaml").read_text() == "x" and (out / "checkpoints" / "last.ckpt").is_file()
    assert not list(out.glob(".write-test*"))  # the probe cleans up after itself


def test_prepare_out_dir_refuses_a_file_or_an_unwritable_place_naming_the_key(tmp_path):
    blocker = tmp_path / "run"
    blocker.write_text("not a folder")
    with pytest.raises(ValueError, match=f"out_dir={blocker} is a file, not a folder"):
        prepare_out_dir(config(blocker))
    with pytest.raises(ValueError, match=f"out_dir={blocker / 'sub'} is not a writable folder"):
        prepare_out_dir(config(blocker / "sub"))  # below a file: cannot be created even by root


# --- the lock -----------------------------------------------------------------------------------------------------


def test_move_aside_is_refused_while_another_process_holds_the_run_and_nothing_moves(tmp_path):
    """Issue 38 item 1: the lock is checked before the earlier run moves (the live run's files stay where it writes)."""
    out = tmp_path / "run"
    checkpoint(out, "step=5.ckpt", 5)
    (out / "metrics.csv").write_text("step\n1\n")
    live = lock_run_dir(out)
    try:
        with pytest.raises(ValueError, match=f"out_dir={out} is in use by another training process"):
            claim_out_dir(config(out), aside=True)
        assert (out / "metrics.csv").read_text() == "step\n1\n" and (out / "checkpoints" / "step=5.ckpt").is_file()
        assert not list(tmp_path.glob("run.earlier-*"))
    finally:
        os.close(live)
    claimed, lock = claim_out_dir(config(out), aside=True)  # free now: moved, and held by the new run
    try:
        assert claimed == out and (tmp_path / "run.earlier-1" / "metrics.csv").is_file() and run_dir_in_use(out)
    finally:
        os.close(lock)


def test_claim_out_dir_locks_a_new_folder_and_releases_the_lock_when_refused(tmp_path):
    out = tmp_path / "new" / "run"
    claimed, lock = claim_out_dir(config(out))
    os.close(lock)
    (out / "metrics.csv").write_text("x")
    with pytest.raises(ValueError, match="already holds a run"):
        claim_out_dir(config(out))
    assert run_dir_in_use(out) is False  # the refused claim let go of the lock
    assert (out / ".run.lock").is_file()  # the earlier run's lock file, kept


def test_a_claim_refused_in_a_users_folder_leaves_no_lock_file_there(tmp_path):
    """`ablate train --resume out_dir=notes/` on a folder of the user's with no run in it is refused; the lock it
    took to ask stays no trace of it."""
    out = tmp_path / "notes"
    out.mkdir()
    (out / "mine.txt").write_text("the user's\n")
    with pytest.raises(ValueError, match="holds no checkpoint to resume from"):
        claim_out_dir(config(out), resume=True)
    assert os.listdir(out) == ["mine.txt"]


@pytest.mark.parametrize("name", ["progress.json", "FAILED.txt"])
def test_a_file_training_writes_already_in_out_dir_is_an_earlier_run_never_written_over(tmp_path, name):
    """`ablate train` into a folder holding a user's progress.json (and no run) replaced it without a word."""
    out = tmp_path / "run"
    out.mkdir()
    (out / name).write_text("the user's own\n")
    (out / ".write-test").write_text("the user's too\n")  # the writability probe has a name of its own
    with pytest.raises(ValueError, match=f"out_dir={out} already holds a run \\({name}\\)"):
        claim_out_dir(config(out))
    assert (out / name).read_text() == "the user's own\n" and sorted(set(os.listdir(out)) - {".run.lock"}) == [".write-test", name]
    os.unlink(out / name)
    claimed, lock = claim_out_dir(config(out))
    os.close(lock)
    assert (out / ".write-test").read_text() == "the user's too\n"


@pytest.mark.parametrize("name", ["progress.json", "summary.json", "metrics.csv", ".run.lock"])
@pytest.mark.parametrize("resume", [False, True])
def test_a_link_where_training_writes_a_file_is_refused_before_anything_is_written(tmp_path, name, resume):
    """A linked progress.json was refused only mid-run, when first written, after config.yaml, hparams.yaml,
    fingerprint.json and .run.lock were, with a message saying nothing was written (a linked .run.lock was opened)."""
    out, victim = tmp_path / "run", tmp_path / "elsewhere.txt"
    if resume:
        checkpoint(out, "last.ckpt", 3)
        (out / "config.yaml").write_text("x")
    out.mkdir(exist_ok=True)
    (out / name).symlink_to(victim)  # to nothing yet: a write through it would make the file
    before = sorted(os.listdir(out))
    with pytest.raises(ValueError, match=f"out_dir={out} holds {name} as a symbolic link \\(to {victim}\\).*nothing was written"):
        claim_out_dir(config(out), resume=resume)
    assert sorted(os.listdir(out)) == before and not victim.exists() and (out / name).is_symlink()


@pytest.mark.parametrize("name", sorted({*rundir.WRITTEN_FILES, rundir.RUN_LOCK, *rundir.RUN_FILES, GROUP_FILE} - {"checkpoints", "eval"}))
def test_every_file_a_run_writes_is_a_record_no_output_may_replace(tmp_path, name):
    """files/destination.py sits below run, so its list of a run's records is a copy of these names: a name added to
    WRITTEN_FILES (or the lock, or a member group's group.json) must be added there too, or `-o RUN/NAME` replaces it.
    (checkpoints/ and eval/ have rules of their own, tested in tests/unit/files/test_destination.py.)"""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("seed: 1\n")
    (run / "summary.json").write_text("{}")
    with pytest.raises(ValueError, match=f"-o {run / name} is {name} of the run {run}, which ablate writes as its record"):
        check_output(run / name, "-o", owns=[run])


# --- disk space ---------------------------------------------------------------------------------------------------


def test_check_disk_space_wants_room_for_kept_best_last_and_a_temp_checkpoint(tmp_path, monkeypatch):
    params, keep = 100_000, 2
    need = (12 * params + 2**20) * (keep + 3)
    free = {"bytes": need}
    monkeypatch.setattr(rundir.shutil, "disk_usage", lambda path: SimpleNamespace(free=free["bytes"]))
    check_disk_space(tmp_path, params, keep)
    free["bytes"] = need - 1
    with pytest.raises(ValueError, match=f"out_dir={tmp_path} has .* MiB free.*{keep} kept \\+ best \\+ last.*train.keep_last"):
        check_disk_space(tmp_path, params, keep)
    existing = checkpoint(tmp_path, "last.ckpt", 1)  # a resumed run overwrites what it already holds
    free["bytes"] = need - existing.stat().st_size
    check_disk_space(tmp_path, params, keep)
    free["bytes"] -= 1
    with pytest.raises(ValueError):
        check_disk_space(tmp_path, params, keep)


# --- comparing with the saved config ------------------------------------------------------------------------------


def test_the_same_config_has_no_changes_and_a_changed_one_lists_its_keys(tmp_path):
    out = tmp_path / "run"
    cfg = config(out)
    save_config(out, cfg)
    assert changes_from_saved_config(out, cfg) == {}
    other = config(out, {"heads": 4}, train={"max_steps": 7}, sweep={"study": "s", "trial": 3})
    assert changes_from_saved_config(out, other) == {"model.heads": (2, 4), "train.max_steps": (100_000, 7)}  # sweep.* ignored


def test_a_key_added_to_the_schema_since_the_run_was_saved_counts_at_its_default(tmp_path):
    out = tmp_path / "run"
    cfg = config(out)
    saved = yaml.safe_load(to_yaml(cfg))
    del saved["model"]["attention_dropout"]  # as written before the key existed
    saved["train"]["debug_nan_step"] = 0  # and with a key since retired (a test aid), as runs before it was wrote
    out.mkdir()
    (out / "config.yaml").write_text(yaml.safe_dump(saved))
    assert changes_from_saved_config(out, cfg) == {}
    moved = config(out, {"attention_dropout": 0.2})
    assert changes_from_saved_config(out, moved) == {"model.attention_dropout": (0.0, 0.2)}


def test_without_a_saved_config_the_run_differs(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    changes = changes_from_saved_config(out, config(out))
    assert changes["model.d_model"] == (None, 16) and "train.max_steps" in changes


def test_the_run_dir_written_another_way_is_no_change(tmp_path, monkeypatch):
    """`out_dir=runs/x` trained, `out_dir=./runs/x/ --resume` (or absolute, or from another folder) was refused as a
    config change, and --force, which lets real changes through, was the only way on; a member group's too, by its
    members' members.group."""
    monkeypatch.chdir(tmp_path)
    save_config(Path("runs/x"), config("runs/x"))
    for spelled in ("./runs/x/", str(tmp_path / "runs" / "x")):
        assert changes_from_saved_config(Path(spelled), config(spelled)) == {}
    assert changes_from_saved_config(Path("runs/x"), config("runs/x", {"heads": 4})) == {"model.heads": (2, 4)}
    member = {"members": {"size": 2, "index": 0, "group": "runs/g"}}  # a member names its group's out_dir as written
    save_config(Path("runs/g/seed=1"), config("runs/g/seed=1", **member))
    member["members"]["group"] = str(tmp_path / "runs" / "g")
    assert changes_from_saved_config(Path("runs/g/seed=1"), config(str(tmp_path / "runs/g/seed=1"), **member)) == {}


def test_a_data_path_is_no_config_change_where_the_run_fingerprinted_what_its_files_hold(tmp_path, monkeypatch):
    """A study of a files dataset continued from another checkout names its corpus by another path: where the run
    recorded a fingerprint, the files' contents are checked (ablate.run.fingerprint), not where they sit."""
    monkeypatch.chdir(tmp_path)
    cfg = load_config(model=MODEL, data={"dataset": "files", "train_prefix": "corpus/train"}, out_dir="runs/x")
    save_config(Path("runs/x"), cfg)
    other = load_config(model=MODEL, data={"dataset": "files", "train_prefix": "/elsewhere/corpus/train"}, out_dir="runs/x")
    assert changes_from_saved_config(Path("runs/x"), other) == {"data.train_prefix": ("corpus/train", "/elsewhere/corpus/train")}
    Path("runs/x/fingerprint.json").write_text("{}")
    assert changes_from_saved_config(Path("runs/x"), other) == {}


@pytest.mark.parametrize("text, kind", [("just text\n", "str"), ("- 1\n- 2\n", "list")])
def test_a_saved_config_that_is_not_a_mapping_is_named(tmp_path, text, kind):
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.yaml").write_text(text)
    with pytest.raises(ValueError, match=rf"run/config.yaml: the run's saved config is damaged \(a {kind}, not a mapping of sections\)"):
        changes_from_saved_config(out, config(out))


@pytest.mark.parametrize("text", ["", "\n", "# cut\n", "{}\n"])
def test_an_empty_saved_config_is_named_as_cut_short_not_read_as_the_defaults(tmp_path, text):
    """A 0-byte config.yaml read as the schema's defaults: --resume listed twenty changed keys ('model.d_model: 512 ->
    32') and --force said the model's shapes changed."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.yaml").write_text(text)
    with pytest.raises(ValueError, match=r"run/config.yaml is empty \(cut short\); restore it, then run the command again"):
        changes_from_saved_config(out, config(out))
    (out / "hparams.yaml").write_text("config: {}\n")
    with pytest.raises(ValueError, match=r"restore it \(the config: section of hparams.yaml beside it holds a copy\)"):
        changes_from_saved_config(out, config(out))


def test_without_a_saved_config_every_key_differs(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    cfg = config(out)
    changes = changes_from_saved_config(out, cfg)
    assert set(changes) == {
        k for k in flatten(to_dict(cfg)) if not k.startswith("sweep.") and k not in ("members.schedule", "out_dir", "members.group")
    }


def test_a_members_schedule_recorded_since_a_group_was_saved_is_no_change(tmp_path):
    """Members saved before ablate recorded their group's schedule resume with it filled in, with no --force."""
    out = tmp_path / "run"
    cfg = config(out)
    out.mkdir()
    (out / "config.yaml").write_text(to_yaml(cfg))
    cfg.members.schedule = 7
    assert changes_from_saved_config(out, cfg) == {}


# --- the corpus files and tokenizer a resume is checked against ---------------------------------------------------


@pytest.fixture
def data(tmp_path):
    """(data config, run dir) over a write_corpus() corpus, the run's fingerprint recorded with tokenizer bytes b"tok"."""
    cfg = load_config(**tiny_sections(tmp_path), out_dir=str(tmp_path / "run"))
    out = tmp_path / "run"
    out.mkdir()
    record_fingerprint(out, cfg.data, b"tok", "start")
    return cfg.data, out


def edit(path, old: str, new: str) -> None:
    """Replace `old` by `new` in one line, a second later by the file's clock, as an edit by hand is."""
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def test_corpus_fingerprint_holds_each_file_the_run_reads_with_its_size_and_hash(data, tmp_path):
    data_cfg, out = data
    record = json.loads((out / FINGERPRINT).read_text())
    assert record["recorded"] == "start" and record["tokenizer"] == {"sha256": hashlib.sha256(b"tok").hexdigest()}
    assert list(record["corpus"]) == ["train.en", "train.de", "valid.en", "valid.de", "test.en", "test.de"]
    for name, entry in record["corpus"].items():
        raw = (tmp_path / "corpus" / name).read_bytes()
        assert entry == {"path": str(tmp_path / "corpus" / name), "size": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
    data_cfg.test_prefix = None  # a split the run does not read is not fingerprinted
    assert list(corpus_fingerprint(data_cfg)) == ["train.en", "train.de", "valid.en", "valid.de"]


def test_corpus_fingerprint_names_the_files_absolutely(data, tmp_path, monkeypatch):
    """A prefix relative to the cwd (an old checkpoint's config) is recorded as the file read, from anywhere."""
    data_cfg, _ = data
    monkeypatch.chdir(tmp_path)
    data_cfg.train_prefix = "corpus/train"
    assert corpus_fingerprint(data_cfg)["train.en"]["path"] == str((tmp_path / "corpus" / "train.en").resolve())


def test_unchanged_or_touched_files_are_no_change(data, tmp_path):
    data_cfg, out = data
    assert data_changes(out, data_cfg, b"tok", out / "last.ckpt") == []
    edit(tmp_path / "corpus" / "train.en", "\n", "\n")  # rewritten, same bytes, a new mtime
    assert data_changes(out, data_cfg, b"tok", out / "last.ckpt") == []


def test_an_edited_file_is_named_with_its_sizes_and_hashes_and_only_it(data, tmp_path):
    data_cfg, out = data
    path = tmp_path / "corpus" / "train.de"
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    line = path.read_text().splitlines()[3]
    edit(path, line, line.replace("x", "y"))  # one line, the same size
    [change] = data_changes(out, data_cfg, b"tok", out / "last.ckpt")
    after = hashlib.sha256(path.read_bytes()).hexdigest()
    assert change == f"{path} (train.de): same size, sha256 {before[:12]} -> {after[:12]}"
    size = path.stat().st_size
    edit(path, line.replace("x", "y"), line + " extra")
    [change] = data_changes(out, data_cfg, b"tok", out / "last.ckpt")
    assert change.startswith(f"{path} (train.de): size {size} -> {size + 6} bytes, sha256 {before[:12]} -> ")


def test_files_moved_with_the_same_bytes_are_no_change_but_other_bytes_name_the_old_path(data, tmp_path):
    data_cfg, out = data
    shutil.copytree(tmp_path / "corpus", tmp_path / "moved")
    data_cfg.train_prefix, data_cfg.valid_prefix, data_cfg.test_prefix = (str(tmp_path / "moved" / s) for s in ("train", "valid", "test"))
    assert data_changes(out, data_cfg, b"tok", out / "last.ckpt") == []
    edit(tmp_path / "moved" / "valid.en", "a", "the")
    [change] = data_changes(out, data_cfg, b"tok", out / "last.ckpt")
    assert change.startswith(f"{tmp_path / 'moved' / 'valid.en'} (valid.en, was {tmp_path / 'corpus' / 'valid.en'}): size ")


def test_a_split_read_or_dropped_since_the_start_is_a_change(data, tmp_path):
    data_cfg, out = data
    data_cfg.test_prefix = None
    assert data_changes(out, data_cfg, b"tok", out / "last.ckpt") == [
        f"{tmp_path / 'corpus' / 'test.de'} (test.de) was read when the run started but is not now",
        f"{tmp_path / 'corpus' / 'test.en'} (test.en) was read when the run started but is not now",
    ]


def test_a_checkpoint_tokenizer_other_than_the_run_started_with_is_a_change(data):
    data_cfg, out = data
    [change] = data_changes(out, data_cfg, b"other", out / "checkpoints" / "last.ckpt")
    have, had = hashlib.sha256(b"other").hexdigest()[:12], hashlib.sha256(b"tok").hexdigest()[:12]
    assert change == f"the tokenizer in {out / 'checkpoints' / 'last.ckpt'} (sha256 {have}) is not the one the run started with ({had})"
    assert data_changes(out, data_cfg, None, out / "last.ckpt") == []  # a checkpoint holding none: only the files


def test_no_fingerprint_is_none_and_a_damaged_one_is_a_change_naming_it(data):
    data_cfg, out = data
    record = json.loads((out / FINGERPRINT).read_text())
    entry = record["corpus"]["train.en"]
    for text, why in [
        ('{"corpus": {}', "not a readable data fingerprint (invalid JSON: Expecting ',' delimiter at line 1 column 14)"),
        ("[1, 2]", "not a readable data fingerprint (a list, not a mapping)"),
        ("[" * 100_000 + "]" * 100_000, "not a readable data fingerprint (nested too deeply)"),
        ('{"recorded": "start", "recorded": "x"}', "not a valid data fingerprint: duplicate key 'recorded'"),
        (json.dumps({**record, "tokenizer": {"sha256": True}}), "field tokenizer.sha256 is damaged or missing"),
        (json.dumps({**record, "corpus": [entry]}), "field corpus is damaged or missing"),
        (json.dumps({**record, "corpus": {"train.en": {**entry, "size": "12"}}}), "field corpus.train.en is damaged ({'path': "),
        (json.dumps({**record, "corpus": {"train.en": {**entry, "size": -1}}}), "field corpus.train.en is damaged"),
    ]:
        (out / FINGERPRINT).write_text(text)
        [change] = data_changes(out, data_cfg, b"tok", out / "last.ckpt")
        assert change.startswith(f"{out / FINGERPRINT}: {why}") and change.endswith("so the corpus cannot be checked against it"), change
    (out / FINGERPRINT).unlink()
    assert data_changes(out, data_cfg, b"tok", out / "last.ckpt") is None


def test_a_new_record_keeps_the_one_it_replaces_and_other_ranks_write_none(data, monkeypatch):
    data_cfg, out = data
    first = (out / FINGERPRINT).read_bytes()
    record_fingerprint(out, data_cfg, b"tok2", "resume-1")
    assert (out / "fingerprint.before-resume-1.json").read_bytes() == first
    assert json.loads((out / FINGERPRINT).read_text())["recorded"] == "resume-1"
    monkeypatch.setenv("LOCAL_RANK", "1")
    record_fingerprint(out, data_cfg, b"tok3", "resume-2")
    assert not (out / "fingerprint.before-resume-2.json").exists()
    assert json.loads((out / FINGERPRINT).read_text())["tokenizer"]["sha256"] == hashlib.sha256(b"tok2").hexdigest()


def test_the_run_tokenizer_is_the_checkpoints_bytes_and_damaged_bytes_change_nothing(data):
    from ablate.data.tokenizer import load_or_train_tokenizer

    data_cfg, out = data
    trained = load_or_train_tokenizer(data_cfg, data_cfg.train_prefix + ".en", data_cfg.train_prefix + ".de")
    proto = trained.path.read_bytes()
    ckpt = checkpoint(out, "last.ckpt", 5)
    torch.save({**torch.load(ckpt, weights_only=True), "tokenizer_model": proto}, ckpt)
    assert checkpoint_tokenizer(ckpt) == proto
    tok = run_tokenizer(out, proto, ckpt)
    assert tok.path == out / "tokenizer.model" and tok.path.read_bytes() == proto
    assert tok.encode(["the red dog"]) == trained.encode(["the red dog"])
    with pytest.raises(ValueError, match=f"--resume: {ckpt}: field tokenizer_model is damaged \\(not a usable SentencePiece model"):
        run_tokenizer(out, b"not a model", ckpt)
    assert (out / "tokenizer.model").read_bytes() == proto and [p.name for p in out.iterdir() if p.name.startswith(".")] == []
    torch.save({**torch.load(ckpt, weights_only=True), "tokenizer_model": "text"}, ckpt)
    with pytest.raises(ValueError, match="field tokenizer_model is damaged \\(str, not a SentencePiece model's bytes\\)"):
        checkpoint_tokenizer(ckpt)


def test_a_run_folder_found_empty_is_cleaned_of_a_stopped_attempt_and_kept(tmp_path):
    """out_dir made empty beforehand (a scheduler's, a user's): a run stopped there before its first checkpoint left
    its config.yaml, and the same command was then refused ("already holds a run"). Its contents go, the folder stays;
    a folder that was not there goes whole."""
    from ablate.run.rundir import empty_or_absent, remove_if_untouched

    out = tmp_path / "made"
    out.mkdir()
    assert empty_or_absent(out) and empty_or_absent(tmp_path / "absent") and not empty_or_absent(tmp_path)
    (out / "config.yaml").write_text("seed: 1\n")
    (out / "wandb" / "run-1").mkdir(parents=True)
    (out / ".run.lock").touch()
    remove_if_untouched(out, stopped=True, keep_folder=True)
    assert out.is_dir() and list(out.iterdir()) == []
    (out / "checkpoints").mkdir()
    (out / ".run.lock").touch()
    remove_if_untouched(out, keep_folder=True)  # refused before its config: its lock and empty folders go, not the folder
    assert out.is_dir() and list(out.iterdir()) == []
    (out / "config.yaml").write_text("seed: 1\n")
    remove_if_untouched(out, stopped=True)
    assert not out.exists()


def test_a_max_time_saved_as_seconds_by_the_base_60_reading_is_no_change(tmp_path):
    """`train.max_time: 01:00:00` was read as YAML 1.1's base-60 (3600) and saved so; read as text now, it is the
    same budget, and a resume (a preempted sweep's trial) needs no --force. A day's `1:00:00:00`, saved as 216000
    (2.5 days), is a different budget, and is named."""
    out = tmp_path / "run"
    out.mkdir()
    for saved, now, changed in (("3600", "01:00:00", False), ("216000", "1:00:00:00", True), ("3600", "02:00:00", True)):
        cfg = config(out, train={"max_time": saved})
        (out / "config.yaml").write_text(to_yaml(cfg))
        cfg.train.max_time = now
        assert ("train.max_time" in changes_from_saved_config(out, cfg)) is changed, (saved, now)


def test_a_run_trained_with_members_size_1_before_its_index_was_cleared_resumes_as_no_change(tmp_path):
    """An earlier ablate saved a member's members.index in the config of a run trained alone (members.size=1); the
    command now clears it, and the resume took that for a config change (use --force)."""
    out = tmp_path / "run"
    saved = config(out)
    saved.members.index = 1
    save_config(out, saved)
    assert changes_from_saved_config(out, config(out)) == {}

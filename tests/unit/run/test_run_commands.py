"""`ablate params` and `ablate train` bodies (ablate.run.commands): how a command line becomes configs, members' values
included, refused with the key named when it cannot be."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from ablate.run.commands import member_lists, split_config_args, train_command


def test_a_members_config_named_from_inside_its_group_is_a_file(tmp_path, monkeypatch):
    (tmp_path / "seed=5").mkdir()
    (tmp_path / "seed=5" / "config.yaml").write_text("seed: 5\n")
    monkeypatch.chdir(tmp_path)
    assert split_config_args(["seed=5/config.yaml", "seed=7"]) == (["seed=5/config.yaml"], ["seed=7"])
    long = "train.betas=[" + "[" * 5000 + "]" * 5000 + "]"  # no file name is this long: an override, named as one
    assert split_config_args([long, "a\0=b"]) == ([], [long, "a\0=b"])


def test_files_and_overrides_are_split_and_members_values_taken_from_lists():
    assert split_config_args(["a.yaml", "model.heads=4", "b.yaml"]) == (["a.yaml", "b.yaml"], ["model.heads=4"])
    # a member's config is a file though its folder has "=" (seed=5), given by its path or found where it is named
    member = ["runs/g/seed=5/config.yaml", "members.size=1", "logging.name=a/b"]
    assert split_config_args(member) == (["runs/g/seed=5/config.yaml"], ["members.size=1", "logging.name=a/b"])
    lists, rest = member_lists(["seeds=[3, 5]", "train.lr_scale=[0.5,1]", "model.heads=4", "model.dropout=0.2"])
    assert lists == {"seed": [3, 5], "train.lr_scale": [0.5, 1]} and rest == ["model.heads=4", "model.dropout=0.2"]
    assert member_lists(["logging.tags=[a, b]"]) == ({}, ["logging.tags=[a, b]"])  # a list key of the schema is no member list


@pytest.mark.parametrize("overrides, members, named", [
    (["seeds=[]"], None, "expected a list of values, one per member"),
    (["seeds=[1, 2]", "train.warmup=[10, 20, 30]"], None, "disagree on the number of members ([2, 3])"),
    (["seeds=[1, 2]"], 3, "disagree on the number of members ([2, 3])"),
    (["members.size=2", "seeds=[1, 2, 3]"], None, "disagree on the number of members ([2, 3])"),
    (["members.size=3"], 2, "disagree on the number of members ([2, 3])"),
    (["model.d_model=[32, 64]"], 2, "override 'model.d_model=[32, 64]': one value per member is for the member-able keys"),
    (["model.d_ff=[64,128]"], None, "'model.d_ff' takes one value, so its values train as rows of a sweep"),
    (["model.heads=[1"], None, "override 'model.heads=[1': not valid (safe) YAML: while parsing a flow sequence"),  # not "rows"
    (["train.lr_scale=[[1], 2]"], None, "override 'train.lr_scale=[[1], 2]': each member's value must be a single"),
    (["train.lr_scale=[fast, slow]"], None, "override 'train.lr_scale=[...]': members: bad value for 'train.lr_scale'"),
    (["train.warmup=[10, 20]", "train.lr_scale=[1, fast]"], None, "override 'train.lr_scale=[...]': members: bad value"),
    (["train.lr_scale=[1, 2]", "train.warmup=[10, -5]"], None, "override 'train.warmup=[...]': "),
    (["seeds=[1, 2]", "seed=5"], 2, "override 'seed=5': seed is also given one value per member (seeds=[...]); give one"),
    (["train.warmup=7", "train.warmup=[10, 20]"], None, "override 'train.warmup=7': train.warmup is also given one value per"),
])  # fmt: skip
def test_a_member_command_line_that_cannot_be_is_refused_naming_why(overrides, members, named):
    args = argparse.Namespace(config=overrides, members=members, member_data=None, resume=False, auto_resume=False,
                              force=False, move_aside=False, accept_data_change=False)  # fmt: skip
    with pytest.raises(Exception, match=named.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(").replace(")", r"\)")):
        train_command(args)


def test_a_members_own_config_is_not_taken_for_its_group(tmp_path):
    """A member's config.yaml names its group (members.group, members.index, members.size K): given to `ablate train`
    it would train K new members from that member's seed. It is refused, saying that reproducing it means its group
    (the command that started it: the group's config.yaml, which it once named, keeps no listed values, so it was
    refused in turn); with members.size=1 it trains as an ordinary run, whose config no longer claims the group
    (members.group, index and schedule, which `ablate table` pairs groups by, were kept)."""
    from helpers import tiny_experiment

    from ablate.config import to_yaml
    from ablate.run import commands

    member = tiny_experiment(tmp_path)
    member.members.size, member.members.index, member.members.group, member.members.schedule = 2, 1, str(tmp_path / "group"), 1
    member.logging.name, member.logging.group = "group/seed=2", "group"  # as member_configs names a member for W&B
    path = tmp_path / "config.yaml"
    path.write_text(to_yaml(member))
    args = argparse.Namespace(config=[str(path)], members=None, member_data=None, resume=False, auto_resume=False,
                              force=False, move_aside=False, accept_data_change=False)  # fmt: skip
    with pytest.raises(
        ValueError,
        match=rf"member 1 of the group {tmp_path / 'group'} .*reproducing it means training its group again, with the "
        r"`ablate train ... --members K` command that started it \(adding --resume.*; members.size=1 trains an ordinary run",
    ):
        train_command(args)
    args.config = [str(path), "members.size=1"]
    with pytest.MonkeyPatch.context() as patch:  # trains as one run: stop where training would begin
        patch.setattr(commands, "_run_members", lambda *a: pytest.fail("trained as a group"))
        patch.setattr("ablate.run.train.train", lambda cfg, **kw: (_ for _ in ()).throw(SystemExit(f"run {cfg.members}")))
        with pytest.raises(SystemExit, match=r"run MembersConfig\(size=1, data='own', group=None, index=None, schedule=None\)"):
            train_command(args)
        # nor the member's W&B name and group (it showed in W&B as that member), but a name given here is kept
        patch.setattr(
            "ablate.run.train.train", lambda cfg, **kw: (_ for _ in ()).throw(SystemExit(f"run {cfg.logging.name} {cfg.logging.group}"))
        )
        with pytest.raises(SystemExit, match=r"^run None None$"):
            train_command(args)
        args.config = [str(path), "members.size=1", "logging.name=mine"]
        with pytest.raises(SystemExit, match=r"^run mine None$"):
            train_command(args)


def test_one_element_lists_are_one_runs_values_not_dropped(tmp_path, monkeypatch):
    from helpers import tiny_experiment

    from ablate.config import to_yaml

    path = tmp_path / "exp.yaml"
    path.write_text(to_yaml(tiny_experiment(tmp_path)))
    trained = []
    monkeypatch.setattr("ablate.run.train.train", lambda cfg, **kw: trained.append(cfg) or (_ for _ in ()).throw(SystemExit(0)))
    args = argparse.Namespace(config=[str(path), "seeds=[7]", "train.lr_scale=[0.5]", "model.dropout=[0.25]"], members=None,
                              member_data=None, resume=False, auto_resume=False, force=False, move_aside=False,
                              accept_data_change=False)  # fmt: skip
    with pytest.raises(SystemExit):
        train_command(args)
    (cfg,) = trained
    assert (cfg.members.size, cfg.seed, cfg.train.lr_scale, cfg.model.dropout) == (1, 7, 0.5, 0.25)


@pytest.mark.parametrize("members", [[], ["--members", "2"]])
def test_a_run_refused_before_its_first_write_leaves_no_folder_behind(tmp_path, capsys, members):
    """A corpus that is not there is refused once the data is read, after out_dir was made and locked: the folder (a
    group's, and its members') stayed behind, empty but for the lock."""
    from helpers import write_experiment

    from ablate.cli import main

    config = write_experiment(tmp_path, data={"train_prefix": str(tmp_path / "nowhere" / "train")})
    assert main(["train", str(config), *members]) == 2
    assert "nowhere" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "notes.txt").write_text("mine\n")  # a folder that was there before: left as it was
    assert main(["train", str(config), *members]) == 2
    assert (tmp_path / "run" / "notes.txt").read_text() == "mine\n" and not (tmp_path / "run" / "config.yaml").exists()


@pytest.mark.parametrize("members", [[], ["--members", "2"]])
@pytest.mark.parametrize("when", ["data", "trainer"])
def test_sigterm_before_training_exits_to_run_again_and_leaves_no_folder(tmp_path, capsys, monkeypatch, members, when):
    """SIGTERM before fit killed the process (143, no word) and left out_dir with its lock: now it is raised, as Ctrl-C
    is, and the command exits 75 (a sweep or scheduler runs it again). The folders it made go, also once config.yaml
    was written (building the trainer): no checkpoint yet, so the same command must be able to start it again."""
    import signal

    from helpers import write_experiment

    import ablate.run.members
    import ablate.run.trainer
    from ablate.cli import main
    from ablate.data.module import TranslationDataModule

    def terminated(*args, **kwargs):
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            raise AssertionError("SIGTERM is not handled before training: it would kill the process")
        signal.raise_signal(signal.SIGTERM)

    if when == "data":
        monkeypatch.setattr(TranslationDataModule, "prepare_data", terminated)
    else:
        monkeypatch.setattr(ablate.run.trainer, "make_trainer", terminated)
        monkeypatch.setattr(ablate.run.members, "make_group_trainer", terminated)
    previous = signal.getsignal(signal.SIGTERM)
    config = write_experiment(tmp_path)
    try:
        assert main(["train", str(config), *members]) == 75
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert "stopped by SIGTERM before training began" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_print_config_prints_what_the_run_would_save_and_trains_nothing(tmp_path, capsys, monkeypatch):
    """Hydra's --cfg job, Lightning's --print_config: the composed, checked config, which loads back to itself."""
    from ablate.cli import main
    from ablate.experiment import load_config

    monkeypatch.chdir(tmp_path)
    (tmp_path / "exp.yaml").write_text("model:\n  heads: 2\n")
    assert main(["train", "exp.yaml", "--print-config", "model.d_model=64", "out_dir=runs/x"]) == 0
    printed = capsys.readouterr().out
    (tmp_path / "printed.yaml").write_text(printed)
    assert load_config([tmp_path / "printed.yaml"]) == load_config([tmp_path / "exp.yaml"], ["model.d_model=64", "out_dir=runs/x"])
    assert not (tmp_path / "runs").exists()
    assert main(["train", "exp.yaml", "model.heads=3", "--print-config"]) == 2  # checked as a run's: 512 % 3
    assert "model.d_model=512 is not divisible by model.heads=3" in capsys.readouterr().err


def test_print_config_checks_each_members_values_as_training_does(tmp_path, capsys, monkeypatch):
    from ablate.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "exp.yaml").write_text("model:\n  heads: 2\n")
    assert main(["train", "exp.yaml", "--print-config", "model.dropout=[0.1,7]"]) == 2
    assert "override 'model.dropout=[...]'" in capsys.readouterr().err
    assert main(["train", "exp.yaml", "--print-config", "model.dropout=[0.1,0.3]"]) == 0
    assert capsys.readouterr().out.endswith("# one value per member: model.dropout: [0.1, 0.3]\n")


def test_a_group_refused_for_a_folder_another_process_just_took_leaves_that_folder_and_its_lock(tmp_path, capsys, monkeypatch):
    """The same command started twice at once: the one whose claim was refused for the other's lock, taken after it
    had noted the folder as absent (its own to clean up), removed the other's .run.lock."""
    import os

    from helpers import write_experiment

    import ablate.run.members
    from ablate.cli import main
    from ablate.run.run_lock import lock_run_dir
    from ablate.run.rundir import claim_out_dir

    config = write_experiment(tmp_path)
    held = []

    def other_first(cfg, *args):
        if not held:  # the other process makes the group's folder and locks it, just before this one's claim
            (tmp_path / "run").mkdir()
            held.append(lock_run_dir(tmp_path / "run"))
        return claim_out_dir(cfg, *args)

    monkeypatch.setattr(ablate.run.members, "claim_out_dir", other_first)
    try:
        assert main(["train", str(config), "--members", "2"]) == 2
        assert (tmp_path / "run" / ".run.lock").exists()
    finally:
        os.close(held[0])


def test_a_run_inside_a_study_or_another_run_is_refused_and_a_member_in_its_group_trains(tmp_path, monkeypatch):
    from helpers import tiny_experiment

    from ablate.config import to_yaml

    monkeypatch.setattr("ablate.run.train.train", lambda cfg, **kw: (_ for _ in ()).throw(SystemExit(f"trains {cfg.out_dir}")))
    (tmp_path / "study" / "trials").mkdir(parents=True)
    (tmp_path / "study" / "results.csv").write_text("row\n")
    group = tiny_experiment(tmp_path)
    group.members.size, group.out_dir = 2, str(tmp_path / "g")
    (tmp_path / "g" / "checkpoints").mkdir(parents=True)
    (tmp_path / "g" / "config.yaml").write_text(to_yaml(group))
    args = argparse.Namespace(config=[], members=None, member_data=None, resume=False, auto_resume=False,
                              force=False, move_aside=False, accept_data_change=False)  # fmt: skip
    path = tmp_path / "exp.yaml"
    path.write_text(to_yaml(tiny_experiment(tmp_path)))
    # Inside a group, only its own members' folders: another run there (g/seed=2, which g never trained) was taken in.
    for out, where in (("study/x", "study folder"), ("g/checkpoints/x", "run folder"), ("g/seed=2", "run folder")):
        args.config = [str(path), f"out_dir={tmp_path / out}"]
        with pytest.raises(ValueError, match=f"is inside the {where} {tmp_path / out.split('/')[0]}"):
            train_command(args)
    member = tiny_experiment(tmp_path)
    member.members.size, member.members.index, member.out_dir = 2, 0, str(tmp_path / "g" / "seed=1")
    (tmp_path / "g" / "seed=1" / "checkpoints").mkdir(parents=True)
    (tmp_path / "g" / "seed=1" / "config.yaml").write_text(to_yaml(member))
    args.config = [str(path), f"out_dir={tmp_path / 'g' / 'seed=1'}"]  # a member of g, trained alone
    with pytest.raises(SystemExit, match="trains .*g/seed=1"):
        train_command(args)
    member.members.size, member.members.index = 1, None  # as that run's start writes it: no longer the group's; resumed
    (tmp_path / "g" / "seed=1" / "config.yaml").write_text(to_yaml(member))
    with pytest.raises(SystemExit, match="trains .*g/seed=1"):
        train_command(args)
    args.config = [str(path), f"out_dir={tmp_path / 'g' / 'seed=1' / 'nested'}"]
    with pytest.raises(ValueError, match="is inside the run folder .*g/seed=1"):
        train_command(args)
    assert sorted(p.name for p in (tmp_path / "g").iterdir()) == ["checkpoints", "config.yaml", "seed=1"]


def test_a_run_that_diverged_leaves_failed_txt_with_the_reason_which_a_resume_sets_aside(tmp_path, capsys, monkeypatch):
    """A diverged run left a bare folder (config, metrics) that `ablate table` could only call failed, stopped or still
    running; it leaves FAILED.txt, as a diverged member does, and a resume that may yet train sets it aside."""
    from helpers import write_experiment

    import ablate.run.train
    from ablate.cli import main
    from ablate.run.exits import FAILED_FILE
    from ablate.run.resume_checks import set_aside_results
    from ablate.table.left_out import _last_error

    def diverges(cfg, **kwargs):
        Path(cfg.out_dir).mkdir(parents=True, exist_ok=True)
        raise FloatingPointError("train/loss is nan at step 3; the last checkpoint is the last good one")

    monkeypatch.setattr(ablate.run.train, "train", diverges)
    config = write_experiment(tmp_path)
    assert main(["train", str(config)]) == 2
    assert "training diverged (FloatingPointError: train/loss is nan at step 3" in capsys.readouterr().err
    failed = tmp_path / "run" / FAILED_FILE
    assert (
        failed.read_text() == "training diverged (FloatingPointError: train/loss is nan at step 3; no checkpoint was saved before it)\n"
    )  # it said "the last checkpoint is the last good one" of a run that saved none
    assert _last_error(tmp_path / "run").startswith("training diverged")  # what `ablate table` names it by
    set_aside_results(tmp_path / "run", 1)
    assert not failed.exists() and (tmp_path / "run" / "FAILED.before-resume-1.txt").exists()
    (tmp_path / "run" / "checkpoints").mkdir()
    (tmp_path / "run" / "checkpoints" / "last.ckpt").write_bytes(b"")
    assert main(["train", str(config)]) == 2
    assert "at step 3; the last checkpoint is the last good one); a smaller train.lr_scale" in capsys.readouterr().err
    from ablate import plugins

    monkeypatch.setattr(plugins, "from_plugins", lambda model: ["model.attention='nan' (/x/mine.py)"])
    assert main(["train", str(config)]) == 2
    assert (
        capsys.readouterr()
        .err.rstrip()
        .endswith("may train; or model.attention='nan' (/x/mine.py), from your files, computes a non-finite value")
    )


@pytest.mark.parametrize("members", [None, 2])
def test_auto_resume_after_a_kill_before_the_first_save_starts_again_keeping_the_attempt_aside(tmp_path, monkeypatch, members):
    """A requeued job (`--auto-resume`) whose first attempt was killed (kill -9, the OOM killer) before its first
    checkpoint found that attempt's config.yaml and metrics.csv and was refused, every requeue alike, until a person
    added --move-aside. It starts again now, the attempt kept as OUT.earlier-1; one that saved still resumes."""
    from helpers import tiny_experiment

    from ablate.config import to_yaml
    from ablate.run.rundir import prepare_out_dir

    cfg = tiny_experiment(tmp_path)
    out = Path(cfg.out_dir)
    path = tmp_path / "exp.yaml"
    path.write_text(to_yaml(cfg))
    out.mkdir(parents=True)
    (out / "config.yaml").write_text(to_yaml(cfg))
    (out / "metrics.csv").write_text("step,train/loss\n0,9.1\n")
    started, finished_in = [], []

    def start(cfg, *rest, resume=False, aside=False, **kw):  # where training would begin: the folder as it finds it
        prepare_out_dir(cfg, resume, aside)
        started.append(resume)
        finished_in.append(Path(rest[0][0].out_dir) if members else out)  # a group's members write their summaries
        raise SystemExit(0)

    monkeypatch.setattr("ablate.run.train.train", start)
    monkeypatch.setattr("ablate.run.members.train_members", start)
    args = argparse.Namespace(config=[str(path)], members=members, member_data=None, resume=False, auto_resume=True,
                              force=False, move_aside=False, accept_data_change=False)  # fmt: skip
    with pytest.raises(SystemExit):
        train_command(args)
    assert started == [False] and sorted(p.name for p in (tmp_path / (out.name + ".earlier-1")).iterdir()) == ["config.yaml", "metrics.csv"]
    (out / "checkpoints").mkdir(exist_ok=True)
    (out / "checkpoints" / "last.ckpt").write_bytes(b"saved")
    with pytest.raises(SystemExit):
        train_command(args)
    assert started == [False, True] and not (tmp_path / (out.name + ".earlier-2")).exists()
    (out / "checkpoints" / "last.ckpt").unlink()  # a finished run whose checkpoints were deleted (or archived): refused
    (out / "config.yaml").write_text(to_yaml(cfg))
    finished_in[-1].mkdir(exist_ok=True)
    (finished_in[-1] / "summary.json").write_text("{}")  # a group: its member's (the group's folder holds none)
    with pytest.raises(ValueError, match="already holds a run"):
        train_command(args)
    assert (finished_in[-1] / "summary.json").exists() and not (tmp_path / (out.name + ".earlier-2")).exists()


def test_a_groups_config_trained_again_without_its_lists_is_refused_naming_its_members(tmp_path, monkeypatch):
    """A group's config.yaml keeps no listed seeds or values: `ablate train GROUP/config.yaml` of a `seeds=[3,5]` group
    trained seeds 1 and 2 without a word. It is refused, naming the members the group trained; given again, it trains."""
    from helpers import tiny_experiment

    from ablate.config import to_yaml

    group = tiny_experiment(tmp_path)
    group.members.size = 2
    folder = Path(group.out_dir)
    for index, seed in enumerate((3, 5)):
        member = tiny_experiment(tmp_path)
        member.seed, member.members.size, member.members.index, member.members.group = seed, 2, index, str(folder)
        (folder / f"seed={seed}").mkdir(parents=True)
        (folder / f"seed={seed}" / "config.yaml").write_text(to_yaml(member))
    (folder / "config.yaml").write_text(to_yaml(group))
    trained = []
    monkeypatch.setattr("ablate.run.members.train_members", lambda cfg, configs, **kw: trained.append(configs) or sys.exit(0))
    args = argparse.Namespace(config=[str(folder / "config.yaml"), f"out_dir={tmp_path / 'again'}"], members=None,
                              member_data=None, resume=False, auto_resume=False, force=False, move_aside=False,
                              accept_data_change=False)  # fmt: skip
    with pytest.raises(ValueError, match=r"a member group that trained seed=3, seed=5, .* alone it trains seed=1, seed=2\. Give the lists"):
        train_command(args)
    args.config.append("seeds=[3,5]")
    with pytest.raises(SystemExit):
        train_command(args)
    assert [c.seed for c in trained[0]] == [3, 5]
    args.config[-1] = "members.size=1"  # one run of the group's config: no members to compare
    monkeypatch.setattr("ablate.run.train.train", lambda cfg, **kw: sys.exit(0))
    with pytest.raises(SystemExit):
        train_command(args)


@pytest.mark.parametrize(
    "flags, said",
    [
        (["--force"], "--force is for a resume, and this command starts a run: add --resume, or leave --force out"),
        (["--accept-data-change"], "--accept-data-change is for a resume, and this command starts a run"),
        (["--resume", "--auto-resume"], "--resume and --auto-resume (which resumes when out_dir holds checkpoints) together: give one"),
        (["--resume", "--move-aside"], "--resume and --move-aside (which starts anew) together: give one"),
    ],
)
def test_a_flag_the_command_would_ignore_is_refused_before_anything_is_read(tmp_path, capsys, flags, said):
    """Front-door review: `--force` without --resume was accepted and did nothing, as were two resume flags at once."""
    from ablate.cli import main

    assert main(["train", str(tmp_path / "absent.yaml"), *flags]) == 2
    assert said in capsys.readouterr().err
    assert main(["train", str(tmp_path / "absent.yaml"), "--auto-resume", "--force"]) == 2  # with a resume: on to the file
    assert "absent.yaml" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # no abbreviation: the printed resume command drops --move-aside by its name (diff review)
        main(["train", str(tmp_path / "absent.yaml"), "--move"])
    assert "unrecognized arguments: --move" in capsys.readouterr().err

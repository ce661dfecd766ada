"""`ablate params` and `ablate train`: the commands' bodies (their flags: ablate.run.flags). Each loads the config
first and imports torch and Lightning only then, so a bad config is refused in a fraction of a second."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path


def split_config_args(items: list[str]) -> tuple[list[str], list[str]]:
    """`CONFIG [key=value ...]`: the YAML files, then the dotlist overrides. An argument with "=" is still a file where
    one is there or its part before "=" is a path (a key has no "/"): a member's `GROUP/seed=5/config.yaml`."""

    def is_file(x: str) -> bool:
        if "=" not in x or "/" in x.partition("=")[0]:
            return True
        try:
            return Path(x).is_file()
        except (OSError, ValueError):  # no such name can be a file (too long, a NUL byte): an override
            return False

    files, overrides = [], []
    for x in items:
        (files if is_file(x) else overrides).append(x)
    return files, overrides


def params_command(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from ablate.experiment import load_config
    from ablate.run.memory import parameter_count

    cfg = load_config(*split_config_args(args.config))
    counts = parameter_count(cfg)  # on the meta device: any size is counted, none allocated
    console = Console()
    console.print(f"parameters (shared vocabulary {cfg.data.vocab_size:,})")  # above, not a title the table's width wraps
    table = Table()
    table.add_column("part")
    table.add_column("count", justify="right")
    table.add_column("x10^6", justify="right")
    for part in ("embeddings", "encoder", "decoder", "total"):
        table.add_row(part, f"{counts[part]:,}", f"{counts[part] / 1e6:.2f}")
    console.print(table)
    return 0


def member_lists(overrides: list[str]) -> tuple[dict[str, list], list[str]]:
    """`KEY=[v1, v2, ...]` overrides of member-able keys (`seeds=[...]` for `seed`): one value per member. An error
    names the override as the config's own errors name one ("command line: override 'KEY=...'")."""
    from ablate.config import ConfigError
    from ablate.config.members import MEMBER_KEYS
    from ablate.files.yaml_file import parse_yaml

    lists, rest = {}, []
    for item in overrides:
        key, _, value = item.partition("=")
        key = "seed" if key == "seeds" else key
        if key in MEMBER_KEYS and value.strip().startswith("["):
            name = f"command line: override '{item}'"
            parsed = parse_yaml(value, name, lines=False)
            if not isinstance(parsed, list) or not parsed:
                raise ConfigError(f"{name}: expected a list of values, one per member")
            if any(isinstance(v, (list, dict)) or v is None for v in parsed):
                raise ConfigError(f"{name}: each member's value must be a single number or word, one per member")
            lists[key] = parsed
        elif value.strip().startswith("[") and _takes_one_value(key) and isinstance(_parsed(item), list):
            keys = ", ".join(k if k != "seed" else "seed (seeds=[...])" for k in MEMBER_KEYS)
            raise ConfigError(
                f"command line: override '{item}': one value per member is for the member-able keys ({keys}); '{key}' "
                "takes one value, so its values train as rows of a sweep (docs/sweeps.md), not as members"
            )
        else:
            rest.append(item)
    for item in rest:  # `seeds=[1,2] seed=5`: the one value was dropped in silence
        if (key := item.partition("=")[0].strip()) in lists:
            given = "seeds" if key == "seed" else key
            raise ConfigError(f"command line: override '{item}': {key} is also given one value per member ({given}=[...]); give one")
    return lists, rest


def _parsed(item: str) -> object:
    """The value of the override `item`, read as the config reads it: invalid YAML (`model.heads=[1`) is refused as that,
    not taken for a list of values."""
    from ablate.files.yaml_file import parse_yaml

    return parse_yaml(item.partition("=")[2], f"command line: override '{item}'", lines=False)


def _takes_one_value(key: str) -> bool:
    """A schema key whose value is not a list (a list there is a per-member list given to a key no member varies)."""
    from dataclasses import is_dataclass

    from ablate.config import ExperimentConfig

    node = ExperimentConfig()
    for part in key.split("."):
        if not is_dataclass(node) or not hasattr(node, part):
            return False  # not a schema key: the config's own error names it
        node = getattr(node, part)
    return not is_dataclass(node) and not isinstance(node, (list, tuple, dict))


def train_command(args: argparse.Namespace) -> int:
    from ablate.files.signals import Terminated, raise_on_sigterm
    from ablate.run.exits import PREEMPTED_EXIT

    # Until fit starts (ablate.run.trainer.fit_or_exit hands SIGTERM to Lightning and Preemption), SIGTERM raises, as
    # Ctrl-C does: a run stopped while its config, corpus and tokenizer load removes the folders it created, and says so.
    raise_on_sigterm()
    try:
        return _train_command(args)
    except Terminated:
        print("ablate train: stopped by SIGTERM before training began; nothing to save: the same command starts it again", file=sys.stderr)
        return PREEMPTED_EXIT  # as a run preempted after saving: a scheduler or sweep runs it again


def _refuse_flags_that_do_nothing(args: argparse.Namespace) -> None:
    """A flag its command ignores reads as done: `--force` without a resume changes nothing the user meant it to."""
    resuming = "--resume" if args.resume else "--auto-resume" if args.auto_resume else None
    for flag, given in (("--force", args.force), ("--accept-data-change", args.accept_data_change)):
        if given and not resuming:
            raise ValueError(f"{flag} is for a resume, and this command starts a run: add --resume, or leave {flag} out")
    if args.resume and (args.auto_resume or args.move_aside):
        other = "--auto-resume (which resumes when out_dir holds checkpoints)" if args.auto_resume else "--move-aside (which starts anew)"
        raise ValueError(f"--resume and {other} together: give one")


def _train_command(args: argparse.Namespace) -> int:
    from ablate.config.members import as_own_run
    from ablate.experiment import load_config

    _refuse_flags_that_do_nothing(args)
    files, overrides = split_config_args(args.config)
    lists, overrides = member_lists(overrides)
    given = [value.strip() for key, _, value in (o.partition("=") for o in overrides) if key.strip() == "members.size"]
    sizes = {len(v) for v in lists.values()} | ({args.members} if args.members else set()) | {int(v) for v in given if v.isdigit()}
    if len(sizes) > 1:
        raise ValueError(f"--members, members.size and the listed values disagree on the number of members ({sorted(sizes)})")
    overrides += [f"members.size={size}" for size in sizes] + ([f"members.data={args.member_data}"] if args.member_data else [])
    if sizes == {1}:  # one member is one run: each one-element list is that run's value (seeds=[7] is seed=7)
        overrides += [f"{key}={values[0]}" for key, values in lists.items()]
        lists = {}
    cfg = load_config(files, overrides)
    if cfg.members.index is not None and cfg.members.size > 1:
        raise ValueError(
            f"this config is member {cfg.members.index} of the group {cfg.members.group} (members.index, members.size="
            f"{cfg.members.size}), whose length schedule and dropout masks it trained with: reproducing it means training "
            "its group again, with the `ablate train ... --members K` command that started it (adding --resume continues "
            "it; the group's config.yaml keeps no listed seeds or values)"
            + (f" or by rerunning its sweep ({cfg.sweep.study})" if cfg.sweep.study else "")
            + "; members.size=1 trains an ordinary run of this member's seed and values, a different run"
        )
    if cfg.members.index is not None:  # members.size=1
        as_own_run(cfg, {o.partition("=")[0].strip() for o in overrides})
    configs = member_runs(cfg, lists) if cfg.members.size > 1 else []  # each member's values checked as any run's
    _refuse_a_group_config_without_its_lists(files, configs)
    if getattr(args, "print_config", False):  # the composed config, checked (Hydra's --cfg job, Lightning's --print_config)
        from ablate.config import to_yaml

        print(to_yaml(cfg), end="")
        if lists:
            print("# one value per member: " + "; ".join(f"{k}: {v}" for k, v in lists.items()))
        return 0
    from ablate.files.destination import check_run_folder

    check_run_folder(cfg.out_dir, lambda kind, folder: _at_home(cfg, kind, folder))
    if cfg.members.size > 1:
        return _run_members(args, cfg, configs)
    from ablate.run.train import train  # Lightning takes seconds to import: a bad config is refused before it

    resume = args.resume
    if args.auto_resume:
        resume = any(Path(cfg.out_dir, "checkpoints").glob("*.ckpt"))  # a requeued job continues, a first one starts
    aside = args.move_aside or (args.auto_resume and not resume and _killed_before_a_save(Path(cfg.out_dir)))
    try:
        summary = train(cfg, resume=resume, force=args.force, aside=aside, accept_data_change=args.accept_data_change)
    except FloatingPointError as e:  # the NaN guard (ablate.training.module): the run diverged; its message names the step
        from ablate import plugins
        from ablate.config import to_dict

        message = str(e)
        if not any(Path(cfg.out_dir, "checkpoints").glob("*.ckpt")):  # it diverged before its first save
            message = message.replace("the last checkpoint is the last good one", "no checkpoint was saved before it")
        why = f"training diverged (FloatingPointError: {message})"
        _record_divergence(Path(cfg.out_dir), why)
        own = plugins.from_plugins(to_dict(cfg.model))
        suspect = f"; or {', '.join(own)}, from your files, computes a non-finite value" if own else ""
        raise ValueError(
            f"{why}; a smaller train.lr_scale, or model.init_std, train.eps or train.weight_decay nearer their defaults, may train{suspect}"
        ) from None
    from ablate.run.closing import print_closing

    print_closing(summary)  # final scores and where the files are
    return 0


def _record_divergence(out: Path, why: str) -> None:
    """FAILED.txt in the run's folder, as a diverged member leaves (ablate.run.members): what `ablate table` and a
    reader of the folder find instead of a summary, where there was only a bare folder before."""
    from ablate.files.atomic import write_file
    from ablate.run.exits import FAILED_FILE
    from ablate.run.run_lock import other_rank

    if out.is_dir() and not other_rank():
        write_file(out / FAILED_FILE, why + "\n")


def _at_home(cfg, kind: str, folder) -> bool:
    """A run inside a study is at home as the sweep's own trial (run again by hand); inside a run, as a member of the
    group that folder trained (`ablate train MEMBER/config.yaml members.size=1`), in a folder that holds a run already
    (the member's; then the run started there alone, whose config no longer names the group, resumed): a new run there
    (a group's too) was taken in, and `ablate table` read it as a row of its own."""
    if kind == "study":
        return cfg.sweep.study is not None
    from ablate.run.rundir import saved_config

    if Path(cfg.out_dir).resolve().parent != Path(folder).resolve():  # a member's folder is in its group's, not deeper
        return False
    try:  # the folder a group's (K members, itself none of them), not a member's; out_dir a run of its own there
        members = saved_config(folder).get("members", {})
        return (members.get("size") or 1) > 1 and members.get("index") is None and Path(cfg.out_dir, "config.yaml").is_file()
    except (ValueError, OSError):
        return False


def _refuse_a_group_config_without_its_lists(files: list[str], configs: list) -> None:
    """A group's saved config.yaml keeps no listed seeds or values: trained from it alone, a group of `seeds=[3,5]`
    trained seeds 1 and 2 without a word. Its folder holds its members' runs, which name what each trained."""
    from ablate.config.saved import read_run_config

    for given in (Path(f) for f in files if Path(f).name == "config.yaml"):
        saved = []
        for member in sorted(given.parent.glob("*/config.yaml")):
            with contextlib.suppress(ValueError, OSError):  # a folder of anything else, or a damaged config: no member
                members = read_run_config(member).get("members")
                if isinstance(members, dict) and members.get("index") is not None:
                    saved.append(member.parent.name)
        now = sorted(Path(c.out_dir).name for c in configs)
        if configs and saved and saved != now:
            raise ValueError(
                f"{given} is the config of a member group that trained {', '.join(saved)}, and keeps no listed seeds or "
                f"values: alone it trains {', '.join(now)}. Give the lists again (e.g. seeds=[...]; each "
                "member's config.yaml holds its values), or members.size=1 for one run"
            )


def member_runs(cfg, lists: dict[str, list]) -> list:
    """The group `cfg`'s member runs, each one's values checked as any run's; a value the schema refuses names the
    override it came from (found by trying each list alone)."""
    from ablate.config import ConfigError, to_dict
    from ablate.config.members import member_configs
    from ablate.experiment import from_dict

    def checked(lists: dict[str, list]) -> list:
        return [from_dict(to_dict(m)) for m in member_configs(cfg, lists)]

    def refused(key: str) -> bool:
        try:
            checked({key: lists[key]})
        except ConfigError:
            return True
        return False

    try:
        return checked(lists)
    except ConfigError as e:
        given = next((key for key in lists if refused(key)), None)
        raise ConfigError(f"command line: override '{given}=[...]': {e}" if given else str(e)) from None


def _killed_before_a_save(*folders: Path) -> bool:
    """Whether out_dir holds an attempt that ended before its first checkpoint without finishing (kill -9, the OOM
    killer), which `--auto-resume` moves aside to start again. A finished or diverged run without checkpoints (an
    archived one, its checkpoints deleted) is no such attempt: it is refused, as without the flag. `folders`: the run's,
    or a group's members' (their ends are written there, never in the group's own folder)."""
    from ablate.run.exits import FAILED_FILE

    return not any((out / name).exists() for out in folders for name in ("summary.json", FAILED_FILE))


def _run_members(args: argparse.Namespace, cfg, configs: list) -> int:
    from ablate.run.closing import print_closing
    from ablate.run.exits import FAILED_FILE
    from ablate.run.members import train_members

    resume = args.resume or (args.auto_resume and Path(cfg.out_dir, "checkpoints", "last.ckpt").is_file())
    aside = args.move_aside or (args.auto_resume and not resume and _killed_before_a_save(*(Path(c.out_dir) for c in configs)))
    summaries = train_members(cfg, configs, resume=resume, aside=aside, force=args.force, accept_data_change=args.accept_data_change)
    for member, summary in zip(configs, summaries):
        if summary is None:
            print(f"{member.out_dir}: diverged (see {FAILED_FILE} there)", flush=True)
        else:
            print_closing(summary)
    return 0 if all(summaries) else 1

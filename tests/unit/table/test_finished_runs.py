"""Reading a study's runs for `ablate table`: a broken or inconsistent run is an error naming its file and key, never
a traceback or a silently wrong row."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from test_compare import ROWS, write_runs

from ablate.cli import main
from ablate.table.compare import build_rows
from ablate.table.finished_runs import require_base, runs_from_dirs, select


def run_dir(root, row="A-h1", seed=1):
    return root / "trials" / f"{row}-s{seed}"


def edit_summary(path, **fields):
    summary = json.loads(path.read_text())
    summary.update(fields)
    path.write_text(json.dumps(summary))


def _edit_config(run: Path, **keys) -> None:
    config = yaml.safe_load((run / "config.yaml").read_text())
    for k, v in keys.items():
        config[k] = {**config[k], **v} if isinstance(v, dict) else v
    (run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def _cut_config(run: Path, before: str) -> None:
    text = (run / "config.yaml").read_text()
    (run / "config.yaml").write_text(text[: text.index(f"\n{before}") + 1])


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda d: (d / "config.yaml").write_text("model: [\n"), r"config.yaml: not valid \(safe\) YAML at line 2"),
        (
            lambda d: (d / "config.yaml").write_text(""),
            r"config.yaml: the run.s saved config is damaged \(a NoneType, not a mapping of sections\)",
        ),
        (
            lambda d: (d / "config.yaml").write_text("- 1\n- 2\n"),
            r"config.yaml: the run.s saved config is damaged \(a list, not a mapping of sections\)",
        ),
        (lambda d: (d / "config.yaml").write_text((d / "config.yaml").read_text() + "seed: 9\n"), r"config.yaml: duplicate key 'seed'"),
        (lambda d: (d / "config.yaml").unlink(), r"A-h1-s1: a finished run \(summary.json\) without its config.yaml"),
        (lambda d: _edit_config(d, data="text"), r"config.yaml: bad value for 'data': a section of keys, got 'text'"),
        (lambda d: _edit_config(d, out_dir=[1]), r"config.yaml: bad value for 'out_dir'"),
        (lambda d: _edit_config(d, model={"enc_layers": [1, 2]}), r"config.yaml: bad value for 'model.enc_layers'"),
        # cut at a line end: the row's name (sweep.row) and out_dir, written last, are lost
        (lambda d: _cut_config(d, "sweep:"), r"config.yaml: cut short"),
        (lambda d: (d / "config.yaml").write_bytes((d / "config.yaml").read_bytes()[:-3]), r"config.yaml: cut short"),
        (lambda d: (d / "summary.json").write_text("[1, 2]"), r"A-h1-s1: a run's summary is a JSON object, not list"),
        (
            lambda d: (d / "summary.json").write_text('{"last": [1]}'),
            r"A-h1-s1: summary key 'last' should be an object, got \[1\]",
        ),
        (
            lambda d: (d / "summary.json").write_text('{"steps": 1,\n"last": '),
            r"summary.json: not a readable run summary \(invalid JSON: .* line 2",
        ),
        (
            lambda d: (d / "summary.json").write_text('{"steps": 1, "steps": 2}'),
            r"summary.json: not a valid run summary: duplicate key 'steps'",
        ),
        (
            lambda d: edit_summary(d / "summary.json", steps="abc"),
            r"A-h1-s1: summary key 'steps' should be a finite number, got 'abc'",
        ),
        (
            lambda d: edit_summary(d / "summary.json", wall_seconds=math.nan),
            r"summary key 'wall_seconds' should be a finite number, got nan",
        ),
        (lambda d: edit_summary(d / "summary.json", wall_seconds=-1e9), r"summary key 'wall_seconds' should be a finite number >= 0"),
        (
            lambda d: edit_summary(d / "summary.json", params={"total": "big"}),
            r"summary key 'params.total' should be a finite number, got 'big'",
        ),
        (
            lambda d: edit_summary(d / "summary.json", last={"val/bleu": math.inf}),
            r"summary key 'last.val/bleu' should be a finite number, got inf",
        ),
        (lambda d: edit_summary(d / "summary.json", stop_reason=3), r"summary key 'stop_reason' should be a string, got 3"),
        (
            lambda d: edit_summary(d / "summary.json", convergence={"improvement": "3%"}),
            r"summary key 'convergence.improvement' should be a finite number, got '3%'",
        ),
    ],
    ids=[
        "yaml-broken",
        "yaml-empty",
        "yaml-list",
        "yaml-duplicate-key",
        "no-config",
        "config-section-scalar",
        "config-out-dir-list",
        "config-layers-list",
        "config-cut-at-a-line",
        "config-cut-mid-line",
        "summary-list",
        "last-list",
        "json-truncated",
        "json-duplicate-key",
        "steps-string",
        "wall-nan",
        "wall-negative",
        "params-string",
        "bleu-inf",
        "stop-int",
        "improvement-string",
    ],
)
def test_a_broken_run_is_an_error_naming_its_file_and_key(tmp_path, capsys, damage, message):
    root = write_runs(tmp_path / "study")
    damage(run_dir(root))
    with pytest.raises(ValueError, match=message):
        runs_from_dirs(root)
    assert main(["table", str(root), "--out", str(tmp_path / "out")]) == 2  # one line on stderr, nothing written
    assert "ablate table: error:" in capsys.readouterr().err and not (tmp_path / "out" / "table3.md").exists()


def test_a_run_copied_twice_is_not_counted_as_another_seed(tmp_path):
    root = write_runs(tmp_path / "study")
    copy = root / "trials" / "0099-base-s1"
    copy.mkdir()
    for name in ("config.yaml", "summary.json"):
        (copy / name).write_bytes((run_dir(root, "base") / name).read_bytes())
    with pytest.raises(ValueError, match=r"row 'base' has two runs of seed 1: .*0099-base-s1 and .*base-s1"):
        build_rows(runs_from_dirs(root))


def test_a_row_whose_seeds_trained_different_models_is_refused_naming_the_key(tmp_path):
    root = write_runs(tmp_path / "study")
    config = run_dir(root, "base", 2) / "config.yaml"
    config.write_text(config.read_text().replace("heads: 4", "heads: 8"))
    with pytest.raises(
        ValueError,
        match=r"row 'base' mixes configurations: .*base-s1 and .*base-s2 differ in model.d_k \(16 vs 8\), model.d_v \(16 vs 8\), model.heads \(4 vs 8\);",
    ):
        build_rows(runs_from_dirs(root))


def test_a_rows_seeds_may_differ_in_where_and_how_they_ran(tmp_path):
    """Threads, accelerator, run name, and bookkeeping outside the config sections (a W&B run's config holds its
    git_sha and the whole config nested again, seed and out_dir included)."""
    root = write_runs(tmp_path / "study")
    config = run_dir(root, "base", 2) / "config.yaml"
    text = config.read_text()
    edited = text.replace("num_threads: 0", "num_threads: 4").replace("accelerator: auto", "accelerator: cpu")
    edited = edited.replace("  name: null", "  name: base-s2") + "git_sha: abc123\nconfig: {seed: 2, out_dir: elsewhere}\n"
    assert edited.count("\n") == text.count("\n") + 2 and "num_threads: 4" in edited and "accelerator: cpu" in edited
    config.write_text(edited)
    rows = {r.name: r for r in build_rows(runs_from_dirs(root))}
    assert len(rows["base"].runs) == 2


def test_a_seed_trained_before_a_key_was_added_counts_it_at_its_default(tmp_path):
    """A study continued on a newer checkout: an earlier seed's config lacks a key the schema has since gained (here
    train.eval_longer_than, default 0), and its corpus sat elsewhere on that machine."""
    root = write_runs(tmp_path / "study")
    config = run_dir(root, "base", 1) / "config.yaml"
    text = config.read_text()
    edited = "\n".join(line for line in text.splitlines() if "eval_longer_than" not in line) + "\n"
    edited = edited.replace("train_prefix: null", "train_prefix: /old/machine/train")
    assert edited.count("\n") == text.count("\n") - 1 and "/old/machine/train" in edited
    config.write_text(edited)
    rows = {r.name: r for r in build_rows(runs_from_dirs(root))}
    assert len(rows["base"].runs) == 2
    config.write_text(edited.replace("  eval_record: true", "  eval_longer_than: 5\n  eval_record: true"))
    with pytest.raises(ValueError, match=r"differ in train.eval_longer_than \(5 vs 0\)"):  # given, it is compared
        build_rows(runs_from_dirs(root))


def test_a_numeric_row_name_is_a_name(tmp_path):
    root = write_runs(tmp_path / "study")
    config = run_dir(root) / "config.yaml"
    config.write_text(config.read_text().replace("row: A-h1", "row: 5"))
    assert "5" in {r.row for r in runs_from_dirs(root)}


def test_seeds_the_base_row_lacks_are_named_as_such(tmp_path):
    rows = {**ROWS, "A-h1": (ROWS["A-h1"][0], [(3, 29.0, 5.5)])}
    runs = runs_from_dirs(write_runs(tmp_path / "study", rows))
    with pytest.raises(ValueError, match=r"--seeds: row 'base' has no run with seed \[3\] \(its seeds: 1, 2\)"):
        select(runs, None, [3])


def test_the_members_of_an_ablate_train_group_are_one_row_of_seeds_and_listed_values_rows_apart(tmp_path):
    """`ablate train CONFIG out_dir=study/base --members 3` left folders seed=1..3, which the table read as three rows
    of one seed each; a member's row is its group's, and members differing in a listed value are rows of their own."""
    from table_study import config_text

    root = tmp_path / "study"
    for group, names in {"base": ["seed=1", "seed=2", "seed=3"], "lr": ["seed=1,lr_scale=0.5", "seed=2,lr_scale=2.0"]}.items():
        for k, name in enumerate(names):
            flat = {"members.size": len(names), "members.group": f"runs/study/{group}", "members.index": k, "seed": k + 1}
            (root / group / name).mkdir(parents=True)
            (root / group / name / "config.yaml").write_text(config_text({**flat, "out_dir": f"runs/study/{group}/{name}"}))
            (root / group / name / "summary.json").write_text(json.dumps({"params": {"total": 1}, "last": {"val/bleu": 20.0}}))
    rows = sorted((r.row, r.config["seed"]) for r in runs_from_dirs(root))
    assert rows == [("base", 1), ("base", 2), ("base", 3), ("lr,lr_scale=0.5", 1), ("lr,lr_scale=2.0", 2)]


def test_a_group_moved_aside_is_a_row_and_a_group_of_its_own_not_more_seeds_of_the_next(tmp_path):
    """`ablate train ... out_dir=base --members 2`, then again with `--move-aside`: the first group's folder is
    base.earlier-1, but its members' configs still name base; the table counted them as seeds 3 and 4 of one group."""
    from table_study import config_text

    from ablate.table.replicates import group_of

    root = tmp_path / "study"
    for folder, seeds in {"base.earlier-1": [1, 2], "base": [3, 4]}.items():
        group = {"members.size": 2, "members.group": str(root / "base"), "seed": seeds[0]}
        (root / folder).mkdir(parents=True)
        (root / folder / "config.yaml").write_text(config_text({**group, "out_dir": str(root / "base")}))  # the group's own
        for k, seed in enumerate(seeds):
            run = root / folder / f"seed={seed}"
            run.mkdir()
            (run / "config.yaml").write_text(
                config_text({**group, "members.index": k, "seed": seed, "out_dir": str(root / "base" / run.name)})
            )
            (run / "summary.json").write_text(json.dumps({"params": {"total": 1}, "last": {"val/bleu": 20.0}}))
    runs = runs_from_dirs(root)
    assert sorted((r.row, r.config["seed"]) for r in runs) == [("base", 3), ("base", 4), ("base.earlier-1", 1), ("base.earlier-1", 2)]
    assert len({group_of(r) for r in runs}) == 2  # two groups: the table's replicates
    for archived in (root / "base" / "config.yaml", root / "base.earlier-1" / "config.yaml"):
        archived.unlink()  # an archive keeps the members' folders, not the group's own config: the same table
    again = runs_from_dirs(root)
    assert sorted((r.row, r.config["seed"]) for r in again) == sorted((r.row, r.config["seed"]) for r in runs)
    assert len({group_of(r) for r in again}) == 2


def test_a_members_wandb_run_is_its_groups_row_as_its_folder_is(tmp_path):
    """A member's W&B name is GROUP/seed=S: `ablate table --wandb` made each member a row of its own (one seed each)
    where the folders' table makes the group one row of K seeds."""
    from types import SimpleNamespace

    from ablate.table.finished_runs import _row_of_wandb_run

    group = {"members.size": 2, "members.group": str(tmp_path / "base"), "members.index": 0}
    member = SimpleNamespace(
        name="base/seed=1", config=group, path=tmp_path / "base" / "seed=1" / "wandb" / "offline-run-1-abc" / "run-abc.wandb"
    )
    listed = SimpleNamespace(
        name="base/seed=1,lr_scale=2",
        config=group,
        path=tmp_path / "base" / "seed=1,lr_scale=2" / "wandb" / "offline-run-2-d" / "run-d.wandb",
    )
    alone = SimpleNamespace(
        name="my-run", config={"members.size": 1}, path=tmp_path / "folder" / "wandb" / "offline-run-3-e" / "run-e.wandb"
    )
    assert [_row_of_wandb_run(r) for r in (member, listed, alone)] == ["base", "base,lr_scale=2", "my-run"]


def test_a_table_without_a_base_row_is_refused_in_one_wording_naming_the_rows_and_what_was_left_out():
    """`ablate table`, its --at-update table and make_table each said it their own way (one without the rows)."""
    require_base(["A-h1", "base", "A-h1"])
    with pytest.raises(
        ValueError, match=r"^no 'base' row among the runs \(\['A-h1', 'C-N2'\]\): every row is compared with it; a sweep names its rows"
    ):
        require_base(["C-N2", "A-h1", "A-h1"])
    with pytest.raises(ValueError) as refused:
        require_base(["A-h1"], "finished runs", "; left out: trials/3 (pruned)")
    assert (
        str(refused.value)
        == "no 'base' row among the finished runs (['A-h1']): every row is compared with it; left out: trials/3 (pruned); "
        "a sweep names its rows (variants: base: {}), a folder of runs by each run folder's name"
    )

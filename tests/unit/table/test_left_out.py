"""Issue 38 item 6: `ablate table` names every run it does not tabulate and why (diverged, failed, pruned, no
summary), in the terminal, the Markdown and the JSON; a row all of whose runs diverged gets a row saying so, left
out of Holm, the verdict counts and Spearman, which the note says."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest
from table_study import markdown_rows, write_run

from ablate.cli import main
from ablate.table import left_out as left_out_module
from ablate.table.finished_runs import runs_from_dirs, unpruned
from ablate.table.left_out import left_out

SCORES = {"base": (25.0, 5.0), "A-h1": (24.0, 5.3), "B-dk16": (24.5, 5.1), "C-N2": (23.0, 5.6)}


def study(tmp_path):
    """base, A-h1, C-N2 with 3 seeds; B-dk16's runs diverged (peak learning rate 10); base seed 3's summary lost;
    A-h1 seed 3 failed, then trained again; C-N2 seed 3 pruned before a summary."""
    root = tmp_path / "study"
    for row, (bleu, ppl) in SCORES.items():
        overrides = {"train.lr_scale": 1000.0} if row == "B-dk16" else {"model.heads": 1} if row == "A-h1" else {}
        overrides |= {"model.enc_layers": 2, "model.dec_layers": 2} if row == "C-N2" else {}
        for seed in (1, 2, 3):
            run = write_run(root, row, seed, overrides, {"last": {"val/bleu": bleu + seed / 10, "val/ppl": ppl + seed / 100}})
            if row == "B-dk16":
                (run / "summary.json").unlink()
                (run / "train.log").write_text(f"epoch 0\nFloatingPointError: non-finite weights at step {4 + seed}: not saving them\n")
    (root / "trials" / "base-s3" / "summary.json").unlink()
    failed = write_run(tmp_path / "first", "A-h1", 3, {"model.heads": 1})  # an earlier attempt, in a folder of its own
    failed.rename(root / "trials" / "A-h1-s3-first")
    (root / "trials" / "A-h1-s3-first" / "summary.json").unlink()
    (root / "trials" / "A-h1-s3-first" / "train.log").write_text("RuntimeError: CUDA error: an illegal memory access\n")
    (root / "trials" / "C-N2-s3" / "summary.json").unlink()
    db = sqlite3.connect(root / "study.db")
    db.executescript(
        "CREATE TABLE trials (trial_id INTEGER, number INTEGER, state TEXT);"
        "CREATE TABLE trial_user_attributes (trial_id INTEGER, key TEXT, value_json TEXT);"
        "CREATE TABLE trial_params (trial_id INTEGER, param_name TEXT, param_value REAL, distribution_json TEXT);"
    )
    choices = json.dumps({"name": "CategoricalDistribution", "attributes": {"choices": sorted(SCORES)}})
    states = {"base-s3": "COMPLETE", "C-N2-s3": "PRUNED", "B-dk16-s1": "FAIL", "base-s4": "COMPLETE", "base-s1": "COMPLETE"}
    for i, (name, state) in enumerate(states.items()):
        db.execute("INSERT INTO trials VALUES (?, ?, ?)", (i, i, state))
        db.execute("INSERT INTO trial_user_attributes VALUES (?, 'out_dir', ?)", (i, json.dumps(str(root / "trials" / name))))
        db.execute("INSERT INTO trial_params VALUES (?, 'row', ?, ?)", (i, sorted(SCORES).index(name.split("-s")[0]), choices))
        if name == "B-dk16-s1":
            db.execute(
                "INSERT INTO trial_user_attributes VALUES (?, 'fail_reason', ?)",
                (i, json.dumps("exit code 1: non-finite weights at step 5")),
            )
    db.commit()
    db.close()
    return root


def test_every_run_not_tabulated_is_named_with_why(tmp_path):
    root = study(tmp_path)
    found = left_out(root, runs_from_dirs(root))
    why = {k.rsplit("/", 1)[-1]: v for k, v in found.runs.items()}
    assert why["base-s3"].startswith("no summary.json, though study.db marks its trial COMPLETE")
    assert why["B-dk16-s1"] == "diverged: exit code 1: non-finite weights at step 5"  # the study's reason
    assert why["B-dk16-s2"] == "diverged: FloatingPointError: non-finite weights at step 6: not saving them"  # its train.log's
    assert why["C-N2-s3"] == "pruned before it wrote a summary.json"
    assert why["A-h1-s3-first"].startswith(
        f"an earlier attempt of row A-h1 seed 3, which {root}/trials/A-h1-s3 tabulates (failed: RuntimeError"
    )
    assert why["trial base-s4"].startswith("no run folder: study.db marks it COMPLETE")
    assert len(found.runs) == 7 and list(found.diverged) == ["B-dk16"]
    assert found.diverged["B-dk16"][1]["train.lr_scale"] == 1000.0


def test_a_run_the_pruner_stopped_is_no_seed_and_is_named_with_its_step(tmp_path, capsys):
    """A pruned run writes its summary.json (stop_reason "pruned"): the table took it for a finished seed and tested
    a 10-step run against a 40-step base under "equal steps"."""
    root = tmp_path / "study"
    for seed in (1, 2):
        write_run(root, "base", seed, {}, {"last": {"val/bleu": 20.0 + seed, "val/ppl": 9.0}, "steps": 40, "stop_reason": "max_steps"})
        write_run(
            root,
            "slow",
            seed,
            {"train.lr_scale": 0.001},
            {"last": {"val/bleu": 1.0, "val/ppl": 800.0}, "steps": 40, "stop_reason": "max_steps"},
        )
    write_run(
        root, "slow", 3, {"train.lr_scale": 0.001}, {"last": {"val/bleu": 0.2, "val/ppl": 900.0}, "steps": 10, "stop_reason": "pruned"}
    )
    runs, pruned = unpruned(runs_from_dirs(root))
    assert sorted((r.row, r.config["seed"]) for r in runs) == [("base", 1), ("base", 2), ("slow", 1), ("slow", 2)]
    assert pruned == {str(root / "trials" / "slow-s3"): "pruned at step 10: the sweep's pruner stopped it early, so it is no finished seed"}
    assert main(["table", str(root), "--out", str(tmp_path / "out"), "--boot", "50"]) == 0
    assert "slow-s3 (pruned at step 10" in capsys.readouterr().out
    report = json.loads((tmp_path / "out" / "table3.json").read_text())
    assert next(r for r in report["rows"] if r["row"] == "slow")["seeds"] == 2
    # At an update it reached, a pruned run's curve is as any other's: leaving it out there would keep the survivors.
    for run in (root / "trials").iterdir():
        (run / "metrics.csv").write_text("epoch,step,val/ppl\n0,9,900.0\n")
    assert main(["table", str(root), "--out", str(tmp_path / "at"), "--at-update", "10"]) == 0
    out = capsys.readouterr().out
    assert "slow-s3" not in out and re.search(r"\| slow \| 3 \|", (tmp_path / "at" / "table3-at-10.md").read_text())


def test_a_member_groups_own_folder_is_no_run_and_its_diverged_member_is_named(tmp_path):
    """`ablate train --members 2`: the group's folder (its config, checkpoint, log) holds the members' folders. Member 1
    finished; member 2 diverged (FAILED.txt, no summary). Only member 2 is left out; the group's folder is no run."""
    from table_study import config_text

    root = tmp_path / "study"
    group = root / "trials" / "g"
    members = {"members.size": 2, "members.group": str(group), "members.schedule": 1}
    group.mkdir(parents=True)
    for k, seed in enumerate((1, 2)):
        write_run(root, "base", seed, {**members, "members.index": k}).rename(group / f"seed={seed}")
    (group / "config.yaml").write_text(config_text({"members.size": 2, "seed": 1, "sweep.study": "t", "sweep.row": "base"}))
    (group / "train.log").write_text("member seed=2: training diverged (FloatingPointError: train/loss is nan at step 7)\n")
    (group / "seed=2" / "summary.json").unlink()
    (group / "seed=2" / "FAILED.txt").write_text("training diverged (FloatingPointError: train/loss is nan at step 7)\n")
    runs = runs_from_dirs(root)
    assert [r.config["seed"] for r in runs] == [1]
    found = left_out(root, runs)
    assert list(found.runs) == [str(group / "seed=2")], found.runs


def test_the_table_shows_the_diverged_row_and_names_the_rest_in_every_output(tmp_path, capsys, monkeypatch):
    root = study(tmp_path)
    reads = []
    real = left_out_module._trials
    monkeypatch.setattr(left_out_module, "_trials", lambda db: reads.append(db) or real(db))
    assert main(["table", str(root), "--out", str(tmp_path / "out"), "--boot", "50"]) == 0
    assert reads == [root / "study.db"]  # once: a running sweep may change it between two reads
    out = capsys.readouterr().out
    assert "B-dk16 (diverged)" in out and "Left out 7 runs:" in out and "Diverged, no run finished: B-dk16" in out
    md = (tmp_path / "out" / "table3.md").read_text()
    rows = markdown_rows(md)
    assert rows["B-dk16"]["seeds"] == "0" and rows["B-dk16"]["verdict BLEU"] == "diverged" and rows["B-dk16"]["stopped"] == "diverged"
    assert "Left out 7 runs:" in md and "base-s3 (no summary.json, though study.db marks its trial COMPLETE" in md
    report = json.loads((tmp_path / "out" / "table3.json").read_text())
    assert {r["run"].rsplit("/", 1)[-1] for r in report["skipped_runs"]} >= {"base-s3", "B-dk16-s1", "C-N2-s3", "trial base-s4"}
    diverged = next(r for r in report["rows"] if r["row"] == "B-dk16")
    assert diverged["diverged"].startswith("diverged: ") and diverged["bleu"]["p_holm"] is None and diverged["bleu"]["mean"] is None
    assert diverged["bleu"]["untested"] == diverged["diverged"]  # said once: it read "diverged: diverged: ..."
    tested = [r["row"] for r in report["rows"] if r["row"] not in ("base", "B-dk16")]
    assert sum(report["verdicts"]["bleu"]["overall"].values()) == len(tested) == 2  # the diverged row is not counted
    assert report["spearman"]["bleu"]["rows"] == len(tested) + 1  # nor ranked (base, A-h1, C-N2 are)


def test_a_study_without_a_database_names_its_runs_without_a_summary_from_their_folders(tmp_path):
    root = study(tmp_path)
    (root / "study.db").unlink()
    why = {k.rsplit("/", 1)[-1]: v for k, v in left_out(root, runs_from_dirs(root)).runs.items()}
    assert why["base-s3"] == "no summary.json: failed, stopped or still running (nothing in the folder says which)"
    assert why["B-dk16-s1"].startswith("diverged: FloatingPointError: non-finite weights at step 5")


@pytest.mark.parametrize("damage", [b"", b"not a database at all" * 100])
def test_a_study_database_that_does_not_read_is_named_not_a_traceback(tmp_path, damage):
    root = study(tmp_path)
    (root / "study.db").write_bytes(damage)
    found = left_out(root, runs_from_dirs(root))
    assert found.runs[str(root / "study.db")].startswith("not read (") or damage == b""


def test_the_table_at_equal_updates_names_them_too(tmp_path, capsys):
    root = study(tmp_path)
    for run in (root / "trials").iterdir():
        (run / "metrics.csv").write_text("epoch,step,train/loss,val/loss,val/ppl\n1,999,3.0,2.4,6.0\n")
    assert main(["table", str(root), "--out", str(tmp_path / "out"), "--at-update", "1000"]) == 0
    md = (tmp_path / "out" / "table3-at-1000.md").read_text()
    assert "Left out 7 runs:" in md and "Diverged, no run finished: B-dk16" in md and "Left out 7 runs:" in capsys.readouterr().out
    report = json.loads((tmp_path / "out" / "table3-at-1000.json").read_text())
    assert len(report["skipped_runs"]) == 7


def test_a_row_whose_diverged_runs_are_only_in_the_study_database_is_still_a_diverged_row(tmp_path):
    """An archive copies finished runs only: the study's trials name the rest, and the row they ran."""
    import shutil

    root = study(tmp_path)
    for seed in (1, 2, 3):
        shutil.rmtree(root / "trials" / f"B-dk16-s{seed}")
    found = left_out(root, runs_from_dirs(root))
    assert found.runs["trial B-dk16-s1"] == "diverged: exit code 1: non-finite weights at step 5; its run folder is not here"
    assert found.diverged == {"B-dk16": (found.runs["trial B-dk16-s1"], {})}


def test_a_summary_from_an_attempt_the_study_marks_failed_is_left_out_not_a_second_seed(tmp_path, capsys):
    """A group stopped as its members ended leaves a member's summary.json in a trial the study marks FAIL; a rerun
    with --members 1 trained that row and seed again in a new trial, and the table refused the study: 'row base has
    two runs of seed 1'. The failed attempt is left out and named; a study's running trial is not a seed either."""
    from ablate.table.left_out import in_study

    root = study(tmp_path)
    stale = write_run(tmp_path / "stale", "A-h1", 2, {"model.heads": 1}, {"last": {"val/bleu": 30.0, "val/ppl": 4.0}})
    stale.rename(root / "trials" / "A-h1-s2-group")
    db = sqlite3.connect(root / "study.db")
    db.execute("INSERT INTO trials VALUES (90, 90, 'FAIL')")
    db.execute("INSERT INTO trial_user_attributes VALUES (90, 'out_dir', ?)", (json.dumps(str(root / "trials" / "A-h1-s2-group")),))
    db.execute("INSERT INTO trials VALUES (91, 91, 'RUNNING')")
    db.execute("INSERT INTO trial_user_attributes VALUES (91, 'out_dir', ?)", (json.dumps(str(root / "trials" / "C-N2-s2")),))
    db.commit()
    db.close()
    runs = in_study(root, runs_from_dirs(root))
    assert {r.run_dir.name for r in runs} >= {"A-h1-s2", "A-h1-s1", "base-s1"}
    assert not {"A-h1-s2-group", "C-N2-s2"} & {r.run_dir.name for r in runs}
    why = {k.rsplit("/", 1)[-1]: v for k, v in left_out(root, runs).runs.items()}
    assert why["A-h1-s2-group"] == (
        f"an earlier attempt of row A-h1 seed 2, which {root}/trials/A-h1-s2 tabulates (its summary.json is from an attempt "
        "study.db marks failed, stopped: not a finished seed; the sweep trains it again)"
    )
    # its worker may be recording it as the table reads (a group's members end so): not called stopped, to train again
    assert why["C-N2-s2"].startswith("its summary.json is from an attempt study.db marks running: still being recorded, or")
    assert main(["table", str(root), "--out", str(tmp_path / "out")]) == 0  # refused before: two runs of seed 2
    assert "A-h1-s2-group" in capsys.readouterr().out


def test_a_study_whose_base_runs_all_failed_says_why_each_is_missing(tmp_path, capsys):
    """A base trial killed (or failed) said only "no 'base' row among the runs": its runs are named, with why."""
    root = study(tmp_path)
    for seed in (1, 2):
        (root / "trials" / f"base-s{seed}" / "summary.json").unlink()
    assert main(["table", str(root), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "no 'base' row among the runs (['A-h1', 'C-N2']): every row is compared with it; left out: " in err
    assert "base-s3 (no summary.json, though study.db marks its trial COMPLETE" in err and "base-s2 (" in err
    assert not (tmp_path / "out").exists()


def test_a_study_in_a_folder_whose_name_holds_a_hash_is_read_and_nothing_is_created_beside_it(tmp_path):
    """Its study.db was opened by an unquoted URI: 'a#1/study/study.db' opened (and created) a file 'a' and read no
    trial, so a trial without a run folder went unnamed."""
    root = study(tmp_path / "a#1")
    found = left_out(root, runs_from_dirs(root))
    why = {k.rsplit("/", 1)[-1]: v for k, v in found.runs.items()}
    assert why["trial base-s4"].startswith("no run folder: study.db marks it COMPLETE") and len(found.runs) == 7
    assert not (tmp_path / "a").exists()


def test_rows_not_run_yet_are_named_whether_queued_or_never_started(tmp_path, capsys):
    """A table of a stopped sweep read as the whole study: its queued trials, and the rows its sweep file lists that
    never ran (added since), went unnamed."""
    root = study(tmp_path)
    db = sqlite3.connect(root / "study.db")
    db.execute("INSERT INTO trials VALUES (90, 90, 'WAITING')")  # as a variants sweep queues a row and seed
    db.executemany("INSERT INTO trial_user_attributes VALUES (90, ?, ?)", [("row", json.dumps("A-h1")), ("seed", "4")])
    db.commit()
    db.close()
    assert left_out(root, runs_from_dirs(root)).runs["row A-h1 seed 4"].startswith("not run yet: queued in study.db")
    attempt = write_run(tmp_path / "first", "A-h1", 5, {"model.heads": 1})  # interrupted, then queued again to continue
    (attempt / "summary.json").unlink()
    attempt.rename(root / "trials" / "A-h1-s5")
    db = sqlite3.connect(root / "study.db")
    db.execute("INSERT INTO trials VALUES (91, 91, 'FAIL')")
    db.execute("INSERT INTO trial_user_attributes VALUES (91, 'out_dir', ?)", (json.dumps(str(root / "trials" / "A-h1-s5")),))
    db.execute("INSERT INTO trials VALUES (92, 92, 'WAITING')")
    db.executemany("INSERT INTO trial_user_attributes VALUES (92, ?, ?)", [("row", json.dumps("A-h1")), ("seed", "5")])
    db.commit()
    db.close()
    said = left_out(root, runs_from_dirs(root)).runs
    assert "row A-h1 seed 5" not in said  # one seed, named once: by its folder
    assert said[str(root / "trials" / "A-h1-s5")].endswith("the sweep trains it again; queued in study.db to continue from it")
    (tmp_path / "base.yaml").write_text("model: {d_model: 32}\n")
    sweep = tmp_path / "sweep.yaml"
    rows = "".join(f"  {row}: {{}}\n" for row in [*SCORES, "E-learned"])
    sweep.write_text(f"name: s\nbase: base.yaml\nout_dir: {root}\nseeds: [1, 2, 3]\nvariants:\n{rows}")
    assert main(["table", str(sweep), "--out", str(tmp_path / "out"), "--boot", "50"]) == 0
    said = {r["run"]: r["reason"] for r in json.loads((tmp_path / "out" / "table3.json").read_text())["skipped_runs"]}
    assert said["row E-learned"].startswith(f"not run: {sweep} names it, but the study holds no run or trial of it")
    assert said["row A-h1 seed 4"].startswith("not run yet") and not {f"row {row}" for row in SCORES} & set(said)
    assert "Left out 10 runs:" in capsys.readouterr().out


def test_a_diverged_member_of_a_hand_trained_group_is_of_its_groups_row(tmp_path):
    """`ablate train --members 2` outside a sweep: a member that diverged was given its own folder's name as its row
    (`seed=2`), shown as a diverged row beside its group's, and the diverged members of two groups fell into one."""
    from table_study import SMALL, config_text

    root = tmp_path / "study"
    for group, diverged in (("hotA", {2}), ("hotB", {2}), ("hotC", {1, 2})):
        for k, seed in enumerate((1, 2)):
            run = root / group / f"seed={seed}"
            run.mkdir(parents=True)
            members = {"members.size": 2, "members.group": str(root / group), "members.index": k}
            (run / "config.yaml").write_text(config_text({**SMALL, **members, "seed": seed}))
            if seed in diverged:
                (run / "FAILED.txt").write_text("training diverged (FloatingPointError: train/loss is nan at step 7)\n")
            else:
                (run / "summary.json").write_text(json.dumps({"last": {"val/bleu": 20.0, "val/ppl": 9.0}}))
    runs = runs_from_dirs(root)
    assert sorted(r.row for r in runs) == ["hotA", "hotB"]
    found = left_out(root, runs)
    assert list(found.diverged) == ["hotC"] and len(found.runs) == 4 and {"hotA", "hotB", "hotC"} <= found.rows


def test_a_row_some_of_whose_seeds_diverged_is_scored_on_the_rest_and_a_note_says_so(tmp_path, capsys):
    """Stats review: A-h1's seed 2 diverged, so its mean and verdict were of seeds 1 and 3 alone, and only the general
    'Left out' line named the run: a variant that diverges half the time read as one that trains."""
    root = study(tmp_path)
    run = root / "trials" / "A-h1-s2"
    (run / "summary.json").unlink()
    (run / "train.log").write_text("FloatingPointError: non-finite weights at step 9: not saving them\n")
    import shutil

    shutil.copytree(run, root / "trials" / "A-h1-s2-again")  # retried by a rerun, diverged again: one seed (diff review)
    found = left_out(root, runs_from_dirs(root))
    assert found.some_diverged == {"A-h1": [2]} and list(found.diverged) == ["B-dk16"]
    assert main(["table", str(root), "--out", str(tmp_path / "s13"), "--boot", "50", "--seeds", "1", "3"]) == 0
    assert "Row A-h1:" not in " ".join(capsys.readouterr().out.split())  # seed 2 is not in this table
    assert main(["table", str(root), "--out", str(tmp_path / "out"), "--boot", "50"]) == 0
    note = "Row A-h1: 1 of its 3 seeds diverged (seed 2); its scores, interval and verdict are of the seeds that finished"
    assert note in " ".join(capsys.readouterr().out.split())
    assert note in (tmp_path / "out" / "table3.md").read_text()
    assert any(n.startswith(note) for n in json.loads((tmp_path / "out" / "table3.json").read_text())["notes"])


def test_a_diverged_trial_whose_folder_is_gone_is_named_by_the_seed_it_was_queued_with(tmp_path):
    """Its note said `seed ?`, and `--seeds` left it out: the seed came from the run's config.yaml alone."""
    root = study(tmp_path)
    db = sqlite3.connect(root / "study.db")
    db.execute("INSERT INTO trials VALUES (95, 95, 'FAIL')")
    attrs = [("out_dir", json.dumps(str(root / "trials" / "A-h1-s7"))), ("fail_reason", json.dumps("exit code 1: non-finite weights"))]
    db.executemany("INSERT INTO trial_user_attributes VALUES (95, ?, ?)", [*attrs, ("row", json.dumps("A-h1")), ("seed", "7")])
    choices = json.dumps({"name": "CategoricalDistribution", "attributes": {"choices": sorted(SCORES)}})
    db.execute("INSERT INTO trial_params VALUES (95, 'row', ?, ?)", (sorted(SCORES).index("A-h1"), choices))
    db.commit()
    db.close()
    assert left_out(root, runs_from_dirs(root)).some_diverged == {"A-h1": [7]}


def test_an_interrupted_or_running_trial_whose_folder_is_not_here_is_named(tmp_path):
    """An archive keeps finished runs only: a table of it left out trials stopped by SIGTERM (FAIL, no reason) or by
    SIGKILL (RUNNING) in silence, and read as the whole study. An earlier attempt of a seed the table holds is not one."""
    root = study(tmp_path)
    db = sqlite3.connect(root / "study.db")
    choices = json.dumps({"name": "CategoricalDistribution", "attributes": {"choices": sorted(SCORES)}})
    trials = [("RUNNING", "A-h1", 8), ("FAIL", "A-h1", 9), ("FAIL", "base", 1), ("FAIL", "base", None)]  # None: no seeds list
    for i, (state, row, seed) in enumerate(trials, start=95):
        db.execute("INSERT INTO trials VALUES (?, ?, ?)", (i, i, state))
        attrs = [
            ("out_dir", json.dumps(str(root / "trials" / f"{row}-s{seed}-gone"))),
            ("row", json.dumps(row)),
            ("seed", json.dumps(seed)),
        ]
        db.executemany(f"INSERT INTO trial_user_attributes VALUES ({i}, ?, ?)", attrs)
        db.execute("INSERT INTO trial_params VALUES (?, 'row', ?, ?)", (i, sorted(SCORES).index(row), choices))
    db.commit()
    db.close()
    runs = left_out(root, runs_from_dirs(root)).runs
    assert runs["trial A-h1-s8-gone"] == runs["trial A-h1-s9-gone"]
    assert runs["trial A-h1-s8-gone"].startswith("stopped before it finished (interrupted or killed), or still running")
    assert "trial base-s1-gone" not in runs and "trial base-sNone-gone" not in runs
    (root / "trials" / "A-h1-s8-gone").mkdir()  # a trial starting: its folder made, no config.yaml yet
    said = left_out(root, runs_from_dirs(root)).runs["trial A-h1-s8-gone"]
    assert said.startswith("starting (its run folder holds no config.yaml yet: its data, or its first step), or stopped there")


def test_a_running_trials_folder_says_it_may_have_been_killed_and_where_to_look(tmp_path):
    """After a SIGKILL the study still marks the trial running; the table said 'still running', to be waited for."""
    from table_study import write_run

    root = study(tmp_path)
    run = write_run(root, "A-h1", 6, {"model.heads": 1}, {"last": {"val/bleu": 1.0, "val/ppl": 9.0}})
    (run / "summary.json").unlink()
    db = sqlite3.connect(root / "study.db")
    db.execute("INSERT INTO trials VALUES (99, 99, 'RUNNING')")
    db.execute("INSERT INTO trial_user_attributes VALUES (99, 'out_dir', ?)", (json.dumps(str(run)),))
    db.commit()
    db.close()
    assert left_out(root, runs_from_dirs(root)).runs[str(run)] == (
        "still running, or its worker was killed (no summary.json yet): `ablate status` says which; `ablate sweep` continues a stopped one"
    )

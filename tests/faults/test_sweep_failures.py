"""Issue 32 item 12: `ablate sweep` whose every trial failed exited 0, as if the study had results. It exits 1, naming
each failed row and where its log is (the trial's run directory/train.log, where the trial process writes); a study
where only some rows failed still has results, so it exits 0 with a warning naming the failed rows and their logs."""

from __future__ import annotations

import re
from pathlib import Path

import optuna
import pytest
from helpers import ablate, run_cli, sweep_writer
from optuna.trial import TrialState

TRAIN = {"max_steps": 10, "val_every_steps": 5, "log_every_steps": 5, "num_threads": 1, "val_bleu": False}


def trials(tmp_path: Path, name: str) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name=name, storage=f"sqlite:///{tmp_path / 'out' / 'study.db'}").get_trials()


def no_data(tmp_path: Path) -> dict:
    """A row that passes the file's validation (its files are there, which `ablate sweep` checks before any trial)
    and fails in its trial: its training files hold no sentence."""
    folder = tmp_path / "nowhere"
    folder.mkdir(exist_ok=True)
    for side in ("en", "de"):
        (folder / f"train.{side}").write_text("")
    return {"data.train_prefix": str(folder / "train")}


@pytest.mark.slow  # two trial processes
def test_a_sweep_whose_every_trial_failed_exits_1_naming_each_row_and_its_log(tmp_path):
    sweep = sweep_writer(tmp_path, TRAIN)(
        name="allfail",
        objective={"metric": "val/loss", "direction": "minimize"},
        out_dir=str(tmp_path / "out"),
        variants={"first": no_data(tmp_path), "second": no_data(tmp_path)},
    )
    proc = ablate("sweep", str(sweep), env={"WANDB_MODE": "offline"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert "every trial failed" in proc.stderr, proc.stderr[-3000:]
    failed = [t for t in trials(tmp_path, "allfail") if t.state == TrialState.FAIL]
    assert sorted(t.user_attrs["row"] for t in failed) == ["first", "second"]
    for t in failed:
        log = Path(t.user_attrs["out_dir"]) / "train.log"
        assert "nowhere" in log.read_text()  # the named log is the one holding the trial's error
        assert f"{t.user_attrs['row']}: trial {t.number}" in proc.stderr and str(log) in proc.stderr, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr


@pytest.mark.slow  # a trial that trains 10 steps and one that fails
def test_a_sweep_with_some_failed_rows_exits_0_and_warns_naming_them_and_their_logs(tmp_path):
    sweep = sweep_writer(tmp_path, TRAIN)(
        name="somefail",
        objective={"metric": "val/loss", "direction": "minimize"},
        out_dir=str(tmp_path / "out"),
        variants={"base": {}, "broken": no_data(tmp_path)},
    )
    proc = ablate("sweep", str(sweep), env={"WANDB_MODE": "offline"})
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    by_row = {t.user_attrs["row"]: t for t in trials(tmp_path, "somefail")}
    assert by_row["base"].state == TrialState.COMPLETE and by_row["broken"].state == TrialState.FAIL
    log = Path(by_row["broken"].user_attrs["out_dir"]) / "train.log"
    assert "warning: 1 of 2 runs failed" in proc.stderr, proc.stderr[-3000:]
    assert f"broken: trial {by_row['broken'].number}" in proc.stderr and str(log) in proc.stderr
    assert "base: trial" not in proc.stderr  # only failed rows are named


def test_failed_rows_are_the_rows_left_failed_by_their_own_fault(tmp_path):
    """A row that failed and then finished, a row stopped by a signal and a bookkeeping claim are not failures; a
    trial that failed before its run directory existed says so instead of naming a log."""
    from unit.sweep.live_study import add

    from ablate.sweep.failure_report import failed_rows, where_logged
    from ablate.sweep.ledger import BOOKKEEPING

    study = optuna.create_study()
    add(study, TrialState.FAIL, "a", tmp_path / "0", row=("a", 1), fail_reason="exit code 1: boom")
    add(study, TrialState.COMPLETE, "a", tmp_path / "1", value=1.0, row=("a", 1))  # failed, then finished on a rerun
    add(study, TrialState.FAIL, "b", tmp_path / "2", row=("b", 1), fail_reason="FloatingPointError: train/loss is nan")
    add(study, TrialState.FAIL, "c", tmp_path / "3", row=("c", 1), preempted=True)  # stopped by a signal: continues
    add(study, TrialState.FAIL, "d", row=("d", 1), fail_reason="ConfigError: model.heads=3")  # before its run directory
    add(study, TrialState.FAIL, "b", row=("b", 1), fail_reason=BOOKKEEPING + "duplicate")
    add(study, TrialState.RUNNING, "f", tmp_path / "6", row=("f", 1))
    study.enqueue_trial({"row": "e", "seed": 1})
    failed, none_finished = failed_rows(study)
    assert [t.number for t in failed] == [2, 4] and not none_finished
    assert where_logged(failed[0]) == f"log: {tmp_path / '2' / 'train.log'}"
    assert where_logged(failed[1]) == "no log: it failed before its run directory was made"
    group = tmp_path / "groups" / "0000-b"  # a member's output is its group process's log, not its own folder's
    member = optuna.trial.create_trial(state=TrialState.FAIL, user_attrs={"out_dir": str(tmp_path / "7"), "members_group": str(group)})
    assert where_logged(member) == f"log: {group / 'train.log'} (its member group's)"

    search = optuna.create_study()
    add(search, TrialState.FAIL, "trial0", tmp_path / "s0", fail_reason="exit code 1: boom")
    add(search, TrialState.FAIL, "trial1", tmp_path / "s1")  # its worker died; the retry below failed by itself
    add(search, TrialState.FAIL, "trial2", tmp_path / "s2", fail_reason="exit code 1: boom")
    failed, none_finished = failed_rows(search)
    assert [t.number for t in failed] == [0, 2] and none_finished


def test_sweep_help_states_the_exit_codes(capsys):
    rc, out = run_cli(capsys, "sweep", "--help")
    assert rc == 0
    codes = dict(re.findall(r"^ +(\d+) +(.+)$", out.split("exit codes:")[-1], re.M))
    assert sorted(codes, key=int) == ["0", "1", "2", "75", "130"], out
    assert "every trial" in codes["1"] and "named" in codes["0"], codes

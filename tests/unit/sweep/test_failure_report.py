"""The end of a sweep's report: a run left interrupted (its workers died more often than a run retries) is named, with
where its log is, and makes the sweep exit as preempted; a run retried since, or finished, is not named."""

from __future__ import annotations

from sweep_files import write

from ablate.sweep.failure_report import report_failures, report_interrupted, report_orphans
from ablate.sweep.ledger import fail, left_interrupted, tell
from ablate.sweep.load import load_sweep
from ablate.sweep.plan import plan_for
from ablate.sweep.trial import record_result
from ablate.sweep.worker import open_sweep_study

ROWS = "name: v\nbase: base.yaml\nvariants:\n  base: {}\n  A-h1: {model.heads: 1}\n"
GRID = "name: g\nbase: base.yaml\nsampler: {name: grid}\nsearch:\n  model.heads: {type: categorical, choices: [1, 2]}\n"


def _study(tmp_path, body):
    sweep = load_sweep(write(tmp_path, body + f"out_dir: {tmp_path}/out\n"))
    handle = open_sweep_study(sweep, f"sqlite:///{tmp_path}/study.db")
    return handle, plan_for(sweep)


def test_a_row_left_interrupted_is_named_with_its_log(tmp_path, capsys):
    handle, plan = _study(tmp_path, ROWS)
    plan.queue(handle.study)
    first, second = plan.take(handle), plan.take(handle)
    first.set_user_attr("name", "base")
    first.set_user_attr("out_dir", str(tmp_path / "out" / "trials" / "0000-base"))
    fail(handle.study, first)
    tell(handle.study, second, 1.0)
    assert [t.number for t in left_interrupted(handle.study.get_trials())] == [first.number]
    assert report_interrupted(handle.study)
    err = capsys.readouterr().err
    assert "1 run was left interrupted (its worker stopped or killed, a machine lost; a run is retried at most 2 times" in err
    assert f"  base: trial {first.number}; log: {tmp_path}/out/trials/0000-base/train.log" in err
    assert not report_interrupted(handle.study, {("A-h1", None)})  # its row is no longer in the sweep file: not continued
    plan.queue(handle.study)  # a rerun queues it again: no longer left
    assert left_interrupted(handle.study.get_trials()) == [] and not report_interrupted(handle.study)


def test_a_search_trial_is_left_interrupted_until_it_has_a_retry(tmp_path):
    handle, plan = _study(tmp_path, GRID)
    trial = plan.take(handle)
    plan.claim(handle, trial)
    fail(handle.study, trial)
    assert [t.number for t in left_interrupted(handle.study.get_trials())] == [trial.number]
    plan.queue(handle.study)
    assert left_interrupted(handle.study.get_trials()) == []


def test_a_trial_left_running_by_a_killed_worker_is_named(tmp_path, capsys):
    """The only worker SIGKILLed: its trial saved and stays RUNNING until a later worker fails it as stale; the sweep
    said only "worker exit codes" and exited 0."""
    handle, plan = _study(tmp_path, ROWS)
    plan.queue(handle.study)
    trial = plan.take(handle)
    trial.set_user_attr("name", "base")
    assert not report_orphans(handle.study, [0, 0])  # no worker killed: the trial is another machine's
    assert report_orphans(handle.study, [0, -9])
    assert capsys.readouterr().err.startswith(
        f"ablate sweep: warning: worker 1 (-9) killed by a signal, and 1 trial is still running in the study: base (trial {trial.number})"
    )
    tell(handle.study, trial, 1.0)
    assert not report_orphans(handle.study, [0, -9])  # the other worker took it over and finished it


def test_a_row_killed_by_a_signal_is_named_with_its_reason_and_that_the_next_run_continues_it(tmp_path, capsys):
    """A row the OOM killer ended fails (no retry within the run) and the next run continues its checkpoint: said so,
    where a row that failed by itself is only named."""
    handle, plan = _study(tmp_path, ROWS + "seeds: [1, 2, 3]\n")
    plan.queue(handle.study)
    for name, rc in (("base-s1", -9), ("base-s2", 1), ("base-s3", 0)):
        trial = plan.take(handle)
        trial.set_user_attr("name", name)
        run = tmp_path / "out" / "trials" / f"{trial.number:04d}-{name}"
        run.mkdir(parents=True)
        trial.set_user_attr("out_dir", str(run))
        if rc == 0:
            (run / "summary.json").write_text('{"last": {"val/bleu": 10.0}}')
        record_result(handle.study, trial, {"val/bleu": 1.0}, run, rc)
    assert not report_failures(handle.study)  # a run finished: a warning
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "ablate sweep: warning: 2 of 3 runs failed (the others have results):"
    assert err[1] == (
        "  base-s1: trial 0, killed by SIGKILL (exit code -9; out of memory? the kernel's OOM killer sends it); the next run "
        f"continues it from its last checkpoint, if it saved one; log: {tmp_path}/out/trials/0000-base-s1/train.log"
    )
    assert err[2].startswith("  base-s2: trial 1, exit code 1: ") and "continues" not in err[2]


def test_a_lost_database_server_stops_the_sweep_with_75_and_what_to_do_not_a_traceback(capsys):
    """PostgreSQL review: the server stopped for 6 s mid-trial; the trial saved, then the worker's next query ended
    `ablate sweep` with a 154-line traceback and exit 1 ("every trial that ran failed")."""
    import optuna
    import sqlalchemy.exc

    from ablate.sweep.failure_report import cannot_go_on

    driver = sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception("connection to server at 127.0.0.1 failed: Connection refused"))
    try:
        try:
            raise driver
        except sqlalchemy.exc.OperationalError as e:
            raise optuna.exceptions.StorageInternalError("An exception is raised during the commit.") from e
    except optuna.exceptions.StorageInternalError as wrapped:
        assert cannot_go_on(wrapped, "ablate sweep s.yaml") == 75
    err = capsys.readouterr().err
    assert err.startswith("ablate sweep: error: the study's database server could not be reached; what ran saved, and continues")
    assert "Connection refused" in err and err.rstrip().endswith(": ablate sweep s.yaml")
    assert cannot_go_on(ValueError("a bad row"), "ablate sweep s.yaml") is None  # its own words, raised as they are

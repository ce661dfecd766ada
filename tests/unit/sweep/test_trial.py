"""The worker's side of a trial: its objective read from the run summary, its exit code turned into its state."""

from __future__ import annotations

import signal

import optuna
import pytest
from optuna.trial import TrialState
from sweep_files import write

from ablate.sweep.load import load_sweep
from ablate.sweep.trial import PREEMPTED_EXIT, Stop, objective_value, record_result


def test_objective_combines_terms_from_the_run_summary(tmp_path):
    path = write(
        tmp_path,
        "name: d\nbase: base.yaml\nvariants: {base: {}}\n"
        "objective: {terms: {val/bleu: 1.0, speed/tokens_per_s: 0.001}, direction: maximize}\n",
    )
    sweep = load_sweep(path)
    summary = {"best": {"metric": "val/bleu", "value": 30.0}, "last": {"val/bleu": 29.0, "val/ppl": 5.0}, "speed/tokens_per_s": 2000.0}
    assert objective_value(sweep.objective.terms, summary) == pytest.approx(32.0)
    sweep.objective.terms = {"val/nope": 1.0}
    with pytest.raises(KeyError, match="val/nope"):
        objective_value(sweep.objective.terms, summary)


@pytest.mark.parametrize(
    "rc, stopping, reason",
    [
        (PREEMPTED_EXIT, False, None),  # saved after a signal: its row continues
        (-signal.SIGTERM, True, None),  # the worker's own SIGTERM came before training began: nothing lost
        (-signal.SIGTERM, False, "killed by SIGTERM (exit code -15)"),  # a SIGTERM from elsewhere before training: failed
        (-signal.SIGINT, True, None),  # a second Ctrl-C ended it at once, after the first had it save: it continues
    ],
)
def test_a_trial_stopped_by_a_signal_is_failed_without_a_reason(tmp_path, monkeypatch, rc, stopping, reason):
    monkeypatch.setattr(Stop, "requested", stopping)
    study = optuna.create_study()
    trial = study.ask()
    assert record_result(study, trial, {"val/loss": 1.0}, tmp_path, rc) == TrialState.FAIL
    attrs = study.trials[0].user_attrs
    if reason:
        assert attrs["fail_reason"].startswith(reason) and "preempted" not in attrs
    else:
        assert "fail_reason" not in attrs and attrs["interrupted" if rc == -signal.SIGINT else "preempted"] is True


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("[1, 2]", "summary.json is missing or not a JSON object"),
        ("{not json", "summary.json is missing or not a JSON object"),
        ('{"last": {"val/bleu": "high"}, "params": 5}', "summary key 'last.val/bleu' should be a finite number, got 'high'"),
    ],
)
def test_a_damaged_summary_fails_its_trial_naming_why(tmp_path, content, says):
    """A summary.json that is no object, or holds a field of the wrong kind, fails the trial (its row runs again)
    with why, where the worker used to crash on it or tell Optuna a value read from a string."""
    (tmp_path / "summary.json").write_text(content)
    study = optuna.create_study()
    assert record_result(study, study.ask(), {"val/bleu": 1.0}, tmp_path, 0) == TrialState.FAIL
    assert says in study.trials[0].user_attrs["fail_reason"]


def test_a_summary_without_its_parameter_count_still_gives_its_objective(tmp_path):
    (tmp_path / "summary.json").write_text('{"last": {"val/bleu": 12.5}}')
    study = optuna.create_study(direction="maximize")
    assert record_result(study, study.ask(), {"val/bleu": 1.0}, tmp_path, 0) == TrialState.COMPLETE
    assert study.trials[0].value == 12.5 and study.trials[0].user_attrs["params"] is None


def test_a_trial_killed_by_sigkill_is_named_so_not_by_its_logs_last_line(tmp_path):
    """The OOM killer's SIGKILL: the log's last line (here a data note) is not why it ended; an error line is kept."""
    (tmp_path / "train.log").write_text("epoch 0\nvalid: truncated 11 of 1014 pairs longer than data.max_len\n")
    study = optuna.create_study()
    assert record_result(study, study.ask(), {"val/bleu": 1.0}, tmp_path, -signal.SIGKILL) == TrialState.FAIL
    reason = study.trials[0].user_attrs["fail_reason"]
    assert reason == "killed by SIGKILL (exit code -9; out of memory? the kernel's OOM killer sends it)"
    (tmp_path / "train.log").write_text("RuntimeError: CUDA error: an illegal memory access\nepoch 1\n")
    assert record_result(study, study.ask(), {"val/bleu": 1.0}, tmp_path, -signal.SIGSEGV) == TrialState.FAIL
    assert study.trials[1].user_attrs["fail_reason"] == (
        "killed by SIGSEGV (exit code -11); its log's last error: RuntimeError: CUDA error: an illegal memory access"
    )


def test_an_error_line_ending_in_a_colon_keeps_the_line_that_says_what_the_error_was(tmp_path):
    """torch's load_state_dict error is a heading and its reasons below: the heading alone named no cause."""
    (tmp_path / "train.log").write_text(
        'Traceback (most recent call last):\n  File "x.py", line 1\n'
        "RuntimeError: Error(s) in loading state_dict for Transformer:\n"
        "\tsize mismatch for src_embed.positional.pe: copying a param with shape torch.Size([2, 8])\n"
    )
    study = optuna.create_study()
    assert record_result(study, study.ask(), {"val/bleu": 1.0}, tmp_path, 1) == TrialState.FAIL
    assert study.trials[0].user_attrs["fail_reason"] == (
        "exit code 1: RuntimeError: Error(s) in loading state_dict for Transformer: size mismatch for "
        "src_embed.positional.pe: copying a param with shape torch.Size([2, 8])"
    )


def test_a_study_lost_while_a_trial_runs_stops_the_trial_and_says_so(tmp_path, monkeypatch):
    """A heartbeat that fails (a database locked past its timeout, an unreachable server) used to escape the watch
    and leave the trial's process training unwatched while the worker started its next row."""
    import subprocess
    import time

    from ablate.sweep import trial as trial_module

    class Lost:
        url, study, sweep_file = "sqlite:///x", optuna.create_study(study_name="s"), None

        def frozen(self, t):
            raise optuna.exceptions.StorageInternalError("database is locked")

    started = []
    real_popen = subprocess.Popen
    monkeypatch.setattr(trial_module.subprocess, "Popen", lambda *a, **k: started.append(real_popen(*a, **k)) or started[-1])
    monkeypatch.setattr(trial_module, "HEARTBEAT_S", 0.1)
    target = ["timeit", "-n", "1", "import time; time.sleep(60)"]  # a trial that would train for a minute
    t0 = time.monotonic()
    with pytest.raises(trial_module.StudyLost, match=r"trial 0 stopped: its study could not be read or beaten \(StorageInternalError"):
        trial_module._supervise(Lost(), [Lost.study.ask()], target, tmp_path, False, {}, "val/loss")
    assert started[0].poll() == -signal.SIGTERM and time.monotonic() - t0 < 30


def test_a_trial_process_is_told_its_sweep_file_to_say_how_to_continue(tmp_path):
    """The run in a trial says 'continue with: ablate sweep FILE' (ablate.run.callbacks.resume_command) where it stops."""
    from ablate.run.exits import SWEEP_FILE_ENV
    from ablate.sweep import trial as trial_module
    from ablate.sweep.storage import StudyHandle, make_storage

    storage = make_storage(f"sqlite:///{tmp_path / 'study.db'}")
    study = optuna.create_study(study_name="s", storage=storage)
    handle = StudyHandle(study, storage, f"sqlite:///{tmp_path / 'study.db'}", sweep_file=tmp_path / "sweep.yaml")
    target = ["timeit", "-n", "1", "-r", "1", f"import os; print('file:', os.environ.get('{SWEEP_FILE_ENV}'))"]
    assert trial_module._supervise(handle, [study.ask()], target, tmp_path, False, {}, "val/loss") == 0
    assert f"file: {tmp_path / 'sweep.yaml'}" in (tmp_path / "train.log").read_text()


def test_a_plugins_error_in_a_trial_is_said_with_its_file_and_line_and_kept_as_the_trials_reason(tmp_path, monkeypatch, capsys):
    """A plugin's bug in a trial left a traceback, and the trial's fail reason its last line, naming no file."""
    from ablate import plugins
    from ablate.sweep import trial as trial_module

    plugin = tmp_path / "mine.py"
    plugin.write_text("def forward(q):\n    b, h, t = q\n")
    monkeypatch.setattr(plugins, "_imported", {})
    module = plugins.import_plugin(str(plugin))
    monkeypatch.setattr(trial_module, "watch_parent", lambda *a: None)
    monkeypatch.setattr("ablate.experiment.load_config", lambda files: None)
    monkeypatch.setattr("ablate.run.train.train", lambda *a, **k: module.forward((1, 2)))
    assert trial_module.main([str(tmp_path / "trial.yaml")]) == 1
    said = capsys.readouterr().err
    assert said.endswith(
        f"ablate trial: error: a plugin raised ValueError: not enough values to unpack (expected 3, got 2)\n  at {plugin}, line 2, in forward: b, h, t = q\n"
    )
    (tmp_path / "train.log").write_text("training...\n" + said)
    assert trial_module.fail_reason(tmp_path) == said.strip().replace("\n  at", " at")

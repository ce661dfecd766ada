"""A variants trial records its row as a categorical parameter (for optuna-dashboard), and the study survives rows
being added to the sweep file between runs, although Optuna fixes a categorical parameter's choices per study."""

from __future__ import annotations

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState
from sweep_files import write

from ablate.sweep.ledger import tell
from ablate.sweep.load import load_sweep
from ablate.sweep.plan import TrialSpec, plan_for
from ablate.sweep.worker import open_sweep_study

ROWS = "name: demo\nbase: base.yaml\nobjective: {metric: val/bleu, direction: maximize}\nvariants:\n  base: {}\n  A-h1: {model.heads: 1, model.d_k: 64, model.d_v: 64}\n"


def run(tmp_path, text: str) -> list[str]:
    """What `ablate sweep` does to the study, minus the training: queue the file's rows, claim each, record a result."""
    sweep = load_sweep(write(tmp_path, text + f"out_dir: {tmp_path}/out\n"))
    handle = open_sweep_study(sweep, f"sqlite:///{tmp_path}/study.db")
    plan_for(sweep).queue(handle.study)
    claimed = []
    while handle.study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
        trial = handle.study.ask()
        spec = plan_for(sweep).claim(handle, trial)
        assert isinstance(spec, TrialSpec), spec
        claimed.append(spec.row)
        tell(handle.study, trial, float(len(claimed)))
    return claimed


def params(tmp_path) -> dict[str, tuple[str, dict]]:
    study = optuna.load_study(study_name="demo", storage=f"sqlite:///{tmp_path}/study.db")
    return {t.user_attrs["row"]: (t.state.name, t.params, t.distributions) for t in study.get_trials()}


def test_each_row_is_a_categorical_parameter_over_every_queued_row(tmp_path):
    assert sorted(run(tmp_path, ROWS)) == ["A-h1", "base"]
    got = params(tmp_path)
    assert got["base"][1] == {"row": "base"} and got["A-h1"][1] == {"row": "A-h1"}
    assert got["base"][2]["row"] == CategoricalDistribution(["base", "A-h1"]) == got["A-h1"][2]["row"]


def test_adding_rows_and_rerunning_records_the_new_rows_under_a_new_name_and_keeps_the_old_ones(tmp_path):
    run(tmp_path, ROWS)
    assert run(tmp_path, ROWS) == []  # a rerun of the same file: nothing to do
    assert run(tmp_path, ROWS + "  E-learned: {model.positional: learned}\n") == ["E-learned"]
    # Rows removed from the file stay choices; a row added later grows the set again.
    assert run(
        tmp_path, ROWS.replace("  A-h1: {model.heads: 1, model.d_k: 64, model.d_v: 64}\n", "") + "  C-N2: {model.enc_layers: 2}\n"
    ) == ["C-N2"]
    got = params(tmp_path)
    assert all(state == "COMPLETE" for state, _, _ in got.values())
    assert got["base"][1] == {"row": "base"} and got["A-h1"][1] == {"row": "A-h1"}
    assert got["E-learned"][1] == {"row_2": "E-learned"}
    assert got["E-learned"][2]["row_2"].choices == ("base", "A-h1", "E-learned")
    assert got["C-N2"][1] == {"row_3": "C-N2"} and got["C-N2"][2]["row_3"].choices == ("base", "A-h1", "E-learned", "C-N2")


def test_a_failed_row_retried_after_rows_were_added_runs_under_the_latest_name(tmp_path):
    sweep = load_sweep(write(tmp_path, ROWS + f"out_dir: {tmp_path}/out\n"))
    handle = open_sweep_study(sweep, f"sqlite:///{tmp_path}/study.db")
    plan_for(sweep).queue(handle.study)
    first = handle.study.ask()
    row = plan_for(sweep).claim(handle, first).row
    handle.study.tell(first, state=TrialState.FAIL)  # died with its worker: queued again on the next run
    run(tmp_path, ROWS + "  E-learned: {model.positional: learned}\n")
    study = optuna.load_study(study_name="demo", storage=f"sqlite:///{tmp_path}/study.db")
    retried = [t for t in study.get_trials() if t.user_attrs["row"] == row and t.state == TrialState.COMPLETE]
    assert [t.params for t in retried] == [{"row_2": row}]


def test_row_param_names_a_grown_set_of_rows_anew():
    from ablate.sweep.row_param import row_param

    assert row_param([], ["base", "A-h1", "base"]) == ("row", ["base", "A-h1"])
    first = optuna.trial.create_trial(params={"row": "base"}, distributions={"row": CategoricalDistribution(["base", "A-h1"])}, value=1.0)
    assert row_param([first], ["base"]) == ("row", ["base", "A-h1"])  # a known subset keeps the name
    assert row_param([first], ["base", "B-dk16"]) == ("row_2", ["base", "A-h1", "B-dk16"])

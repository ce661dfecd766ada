from __future__ import annotations

import optuna
import pytest

from ablate.sweep.components import make_sampler
from ablate.sweep.seeded_sampler import PerTrialSeed

SPACE = {"x": optuna.distributions.FloatDistribution(0.0, 1.0), "y": optuna.distributions.IntDistribution(0, 10**6)}


def _machines(n=2, name="random", search=None):
    """`n` processes sharing one study, each building the sampler from the sweep file as a worker does."""
    storage, spec = optuna.storages.InMemoryStorage(), {"name": name, "seed": 0}
    return [
        optuna.create_study(study_name="s", storage=storage, sampler=make_sampler(spec, search or {}), load_if_exists=True)
        for _ in range(n)
    ]


@pytest.mark.parametrize("name", ["random", "tpe"])
def test_machines_sharing_a_seeded_study_draw_distinct_points_and_a_rerun_from_scratch_draws_alike(name):
    """Two machines, each running worker 0, started at the same instant drew the same points: a worker's stream was
    (its index, the trials at its start). Each trial's draw now follows from the seed and its own number."""
    first, second = _machines(name=name)
    draws = [study.ask(SPACE).params["y"] for _ in range(3) for study in (first, second)]
    assert len(set(draws)) == 6
    (alone,) = _machines(1, name)
    assert [alone.ask(SPACE).params["y"] for _ in range(6)] == draws  # one worker from scratch: the same points


def test_a_trial_keeps_its_own_stream_while_another_is_asked_in_between():
    """A member group asks several trials before any samples its independent parameters."""
    (study,) = _machines(1)
    trials = [study.ask(), study.ask()]
    late = [trial.suggest_float("x", 0.0, 1.0) for trial in reversed(trials)][::-1]
    (fresh,) = _machines(1)
    assert [fresh.ask().suggest_float("x", 0.0, 1.0) for _ in range(2)] == late


def test_two_machines_on_a_seeded_grid_run_every_point_once_and_the_study_stops():
    search = {"x": {"type": "categorical", "choices": [1, 2, 3, 4]}}
    first, second = _machines(name="grid", search=search)
    space = {"x": optuna.distributions.CategoricalDistribution([1, 2, 3, 4])}
    points, stopped = [], []
    for study in (first, second, first, second):
        trial = study.ask(space)
        points.append(trial.params["x"])
        try:
            study.tell(trial, 0.0)
        except RuntimeError as e:  # the grid's own after_trial stops the study (raising outside optimize())
            stopped.append(str(e))
    assert sorted(points) == [1, 2, 3, 4]
    assert len(stopped) == 1 and "Study.stop" in stopped[0]


def test_an_unseeded_sampler_is_optunas_own():
    assert not isinstance(make_sampler({"name": "tpe"}, {}), PerTrialSeed)
    assert isinstance(make_sampler({"name": "tpe", "seed": 3}, {}), PerTrialSeed)

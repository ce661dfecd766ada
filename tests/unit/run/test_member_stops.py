"""Each member stops on its own rule (ablate.run.member_stops), and a diverged member is told apart."""

import math

from helpers import tiny_experiment

from ablate.run.member_stops import DIVERGED, MemberStops


def _stops(tmp_path, **train) -> MemberStops:
    return MemberStops(tiny_experiment(tmp_path, train=train).train, members=3)


def test_a_member_converges_alone_while_the_others_train(tmp_path):
    stops = _stops(tmp_path, converge_window=0.5, converge_tol=0.02)
    flat, falling = [10.0] * 6, [10.0, 8.0, 6.0, 4.0, 3.0, 2.0]
    reasons = []
    for step, (a, b) in enumerate(zip(flat, falling)):
        reasons.append(stops.update(0, {"val/loss": 1.0, "val/ppl": a}, step))
        stops.update(1, {"val/loss": 1.0, "val/ppl": b}, step)
    assert reasons[-1] == "converged" and reasons[:-1] == [None] * 5  # the rule's window needs 3 of 6 validations
    assert stops.reason == ["converged", None, None] and not stops.all_stopped


def test_early_stopping_counts_each_members_own_patience(tmp_path):
    stops = _stops(tmp_path, early_stop_metric="val/loss", patience=2, min_delta=0.0)
    for step, loss in enumerate([3.0, 2.0, 2.5, 2.6]):
        stops.update(0, {"val/loss": loss, "val/ppl": math.exp(loss)}, step)
        stops.update(2, {"val/loss": 3.0 - step, "val/ppl": 1.0}, step)
    assert stops.reason == ["early_stopping", None, None]


def test_a_non_finite_validation_is_divergence_and_nothing_more_is_counted(tmp_path):
    stops = _stops(tmp_path)
    assert stops.update(1, {"val/loss": math.nan, "val/ppl": math.nan}, 40) == DIVERGED
    assert "val/loss is nan at step 40" in stops.why[1]
    assert stops.update(1, {"val/loss": 1.0, "val/ppl": 2.0}, 50) is None  # stopped: later validations change nothing
    stops.diverge(0, "train/loss is inf at step 7")
    stops.diverge(0, "a later message")
    assert stops.why[0] == "train/loss is inf at step 7"  # the first cause is the one reported
    stops.diverge(2, "x")
    assert stops.all_stopped


def test_state_round_trips_through_a_checkpoint(tmp_path):
    stops = _stops(tmp_path, early_stop_metric="val/loss", patience=3, min_delta=0.0)
    for step, loss in enumerate([3.0, 2.0, 2.5]):
        stops.update(0, {"val/loss": loss, "val/ppl": loss}, step)
    stops.diverge(2, "train/loss is nan at step 3")
    again = _stops(tmp_path, early_stop_metric="val/loss", patience=3, min_delta=0.0)
    again.load_state_dict(stops.state_dict())
    assert again.state_dict() == stops.state_dict()
    assert again.update(0, {"val/loss": 2.9, "val/ppl": 2.9}, 3) is None
    assert again.update(0, {"val/loss": 2.9, "val/ppl": 2.9}, 4) == "early_stopping"  # the third without improvement


def test_a_group_resumed_after_every_member_stopped_trains_no_step(tmp_path):
    # Killed while its members' ends were written: the resumed group freezes them all and stops before its first step,
    # as a run resumed after its rule fired does (StopRules.on_train_start), not up to the next logging step.
    from types import SimpleNamespace

    from ablate.run.member_runs import MemberRuns

    cfg = tiny_experiment(tmp_path, logging={"wandb": False})
    outs = [tmp_path / f"seed={k}" for k in (1, 2)]
    runs = MemberRuns([cfg, cfg], outs, tmp_path, 100, b"", 0, {})
    frozen = []
    module = SimpleNamespace(optimizer=SimpleNamespace(freeze=frozen.append))
    trainer = SimpleNamespace(should_stop=False)
    runs.stops.reason[0] = "early_stopping"
    runs.on_train_start(trainer, module)
    assert frozen == [0] and not trainer.should_stop  # one still trains
    runs.stops.reason[1] = "converged"
    runs.on_train_start(trainer, module)
    assert frozen == [0, 0, 1] and trainer.should_stop

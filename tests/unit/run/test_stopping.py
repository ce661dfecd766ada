"""The stopping rules without training: the convergence rule on crafted val/ppl sequences, early stopping with a
relative min_delta, the FLOPs and wall-clock budgets at step boundaries, state surviving a checkpoint round trip,
the summary's stop_reason and the comparison basis. Hooks get a stand-in trainer holding what they read."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from lightning.pytorch.trainer.states import TrainerFn

from ablate.config import ConfigError
from ablate.experiment import load_config
from ablate.run import stopping
from ablate.run.basis import comparison_basis
from ablate.run.stopping import EarlyStopping, StopRules, convergence_improvement


def train_cfg(**train):
    return load_config(data={"vocab_size": 64}, train=train).train


class StubTrainer:
    """What StopRules reads from a Trainer: step, epoch, metrics, accumulation progress; should_stop is what it writes."""

    def __init__(self, accumulate: int = 1, max_steps: int = 1000):
        self.should_stop, self.sanity_checking, self.world_size = False, False, 1
        self.global_step, self.current_epoch, self.max_steps = 0, 0, max_steps
        self.state = SimpleNamespace(fn=TrainerFn.FITTING)
        self.callback_metrics: dict[str, torch.Tensor] = {}
        self.accumulate_grad_batches = accumulate
        progress = SimpleNamespace(current=SimpleNamespace(ready=0), is_last_batch=False)
        self.fit_loop = SimpleNamespace(epoch_loop=SimpleNamespace(batch_progress=progress))

    def batch(self, rules: StopRules) -> None:
        """One training batch ends (an optimizer step when accumulation completes)."""
        progress = self.fit_loop.epoch_loop.batch_progress
        progress.current.ready += 1
        if progress.current.ready % self.accumulate_grad_batches == 0:
            self.global_step += 1
        rules.on_train_batch_end(self, None, None, {}, progress.current.ready - 1)

    def validate(self, rules: StopRules, **metrics: float) -> None:
        self.callback_metrics = {f"val/{k}": torch.tensor(v) for k, v in metrics.items()}
        rules.on_validation_end(self, None)


# --- the convergence rule ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ppl, window, expected", [
    ([100, 50, 30, 20, 19.9, 19.8, 19.7], 0.5, 0.015),  # the best of the last 3 against the best of the 4 before
    ([100, 50, 30, 20, 15, 14, 13], 0.5, 0.35),
    ([100, 50, 30, 20, 19.9], 0.2, None),  # a fifth of 5 validations is one: too few to judge
    ([9, 8, 7, 6, 5, 4, 3, 2, 2.1, 1.99], 0.2, None),  # ...and of 10, two
    ([20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 2.0, 2.01, 2.1, 1.99], 0.2, 0.005),  # of 15, three: judged
    ([10, 5, 6, 7, 8, 9], 0.5, -0.4),  # worse lately: a negative improvement
    ([float("inf")] * 3 + [10.0, 11.0, 12.0], 0.5, 1.0),  # a diverged start, then finite: improved
    ([10.0, 11.0, 12.0] + [float("inf")] * 3, 0.5, None),  # only non-finite lately: no verdict
])  # fmt: skip
def test_convergence_improvement_compares_the_best_of_the_last_window_with_the_best_before(ppl, window, expected):
    got = convergence_improvement(ppl, window)
    assert got == (None if expected is None else pytest.approx(expected))


def test_convergence_rule_stops_when_ppl_improves_less_than_tol_over_the_last_fifth():
    rules, trainer = StopRules(train_cfg(converge_window=0.2, converge_tol=0.02), None), StubTrainer()
    for ppl in [100, 50, 30, 20, 15, 12, 10, 9, 8, 7.5, 7.2, 6.95, 6.95, 6.95]:  # too few validations to judge...
        trainer.validate(rules, ppl=ppl, loss=1.0)
        assert not trainer.should_stop  # ...even flat ones: a fifth of 14 is two validations
    trainer.validate(rules, ppl=6.84)  # the last 3 of 15: best 6.84, 1.6% better than the best before (6.95)
    assert trainer.should_stop and rules.reason == "converged"
    assert rules.summary(trainer, train_cfg())["stop_reason"] == "converged"


def test_convergence_rule_keeps_training_while_ppl_improves_and_is_off_by_default():
    on, off, trainer = StopRules(train_cfg(converge_window=0.2), None), StopRules(train_cfg(), None), StubTrainer()
    for ppl in [100, 50, 30, 20, 15, 12, 10, 8, 7, 6.5, 6.2, 6.0, 5.9, 5.8, 5.7]:  # over 15 the window is the last 3
        trainer.validate(on, ppl=ppl)
        trainer.validate(off, ppl=ppl)
        assert not trainer.should_stop  # the last 3 (5.9, 5.8, 5.7) are 5% below the best before (6.0)
    trainer.validate(off, ppl=5.69)
    assert not trainer.should_stop  # off: no rule fires...
    report = off.summary(trainer, train_cfg())["convergence"]  # ...but summary.json says how the run stands
    assert report == {"window": 0.2, "tol": 0.02, "validations": 16, "improvement": pytest.approx(0.21 / 5.9, abs=1e-4), "converged": False}
    trainer.validate(on, ppl=5.69)  # as for `off`: 3.6%, on it goes
    assert not trainer.should_stop
    trainer.validate(on, ppl=5.69)  # 17: the last 3 (5.7, 5.69, 5.69) 1.9% below the best before (5.8)
    assert trainer.should_stop and on.reason == "converged"


def test_sanity_check_and_post_fit_validations_are_not_counted():
    rules, trainer = StopRules(train_cfg(converge_window=0.5), None), StubTrainer()
    trainer.sanity_checking = True
    trainer.validate(rules, ppl=100)
    trainer.sanity_checking, trainer.state.fn = False, TrainerFn.VALIDATING  # `trainer.validate` after fit
    trainer.validate(rules, ppl=100)
    assert rules.ppl == []


# --- early stopping ------------------------------------------------------------------------------------------------


def test_early_stopping_counts_validations_without_a_relative_improvement():
    early = EarlyStopping("val/bleu", patience=2, min_delta=0.05)  # higher is better; needs > 5% better than the best
    for bleu, bad in [(10.0, 0), (10.4, 1), (11.0, 0), (11.5, 1), (11.2, 2)]:
        early.update(bleu)
        assert early.bad == bad
    assert early.done
    loss = EarlyStopping("val/loss", patience=1, min_delta=0.0)  # lower is better; any improvement counts
    for value in (float("nan"), 3.0, 2.99):
        loss.update(value)
        assert not loss.done
    loss.update(2.99)
    assert loss.done


def test_early_stopping_stops_the_trainer_and_its_state_survives_a_checkpoint():
    t = train_cfg(early_stop_metric="val/loss", patience=3)
    rules, trainer = StopRules(t, None), StubTrainer()
    for loss in (3.0, 2.0, 2.5, 2.4):
        trainer.validate(rules, loss=loss, ppl=10.0)
    assert not trainer.should_stop and rules.early.bad == 2
    state = rules.state_dict()

    resumed, trainer2 = StopRules(t, None), StubTrainer()  # a resumed run: the state comes from the checkpoint
    resumed.load_state_dict(state)
    assert (resumed.early.best, resumed.early.bad, resumed.ppl) == (2.0, 2, [10.0] * 4)
    trainer2.validate(resumed, loss=2.1, ppl=10.0)  # the 3rd in a row without improvement, counting the first attempt's
    assert trainer2.should_stop and resumed.reason == "early_stopping"

    again, trainer3 = StopRules(t, None), StubTrainer()  # resumed after it fired (killed before the summary): stops at once
    again.load_state_dict(resumed.state_dict())
    again.on_train_start(trainer3, None)
    assert trainer3.should_stop and again.summary(trainer3, t)["stop_reason"] == "early_stopping"

    patient, trainer4 = StopRules(train_cfg(early_stop_metric="val/loss", patience=10), None), StubTrainer()
    patient.load_state_dict(resumed.state_dict())  # resumed with --force and more patience: goes on
    patient.on_train_start(trainer4, None)
    assert not trainer4.should_stop


# --- budgets -------------------------------------------------------------------------------------------------------


def test_flops_budget_stops_at_an_optimizer_step_boundary_and_counts_on_after_resume():
    t = train_cfg(max_flops=100.0, accumulate=2)
    rules, trainer = StopRules(t, lambda batch: 30.0), StubTrainer(accumulate=2)
    rules.on_train_start(trainer, None)
    for _ in range(3):  # 90 FLOPs, and the 3rd batch is inside an accumulation window
        trainer.batch(rules)
    assert not trainer.should_stop and rules.flops == 60.0  # counted at step boundaries
    trainer.batch(rules)  # step 2 completes: 120 >= 100
    assert trainer.should_stop and rules.flops == 120.0 and trainer.global_step == 2
    summary = rules.summary(trainer, t)
    assert summary["stop_reason"] == "max_flops" and summary["flops"] >= t.max_flops

    resumed, trainer2 = StopRules(train_cfg(max_flops=200.0, accumulate=2), lambda batch: 30.0), StubTrainer(accumulate=2)
    resumed.load_state_dict(rules.state_dict())
    resumed.on_train_start(trainer2, None)
    assert not trainer2.should_stop and resumed.flops == 120.0  # counts on from the checkpoint, not from zero
    for _ in range(4):
        trainer2.batch(resumed)
    assert trainer2.should_stop and resumed.flops == 240.0


def test_wall_clock_budget_counts_the_time_of_earlier_attempts(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(stopping.time, "perf_counter", lambda: now[0])
    t = train_cfg(max_time="00:01:00")
    rules, trainer = StopRules(t, None), StubTrainer()
    rules.on_train_start(trainer, None)
    now[0] += 40
    trainer.batch(rules)
    assert not trainer.should_stop
    state = rules.state_dict()  # a checkpoint after 40 s; the process dies
    assert state["seconds"] == 40

    resumed, trainer2 = StopRules(t, None), StubTrainer()
    resumed.load_state_dict(state)
    now[0] += 500  # time between the attempts does not count
    resumed.on_train_start(trainer2, None)
    now[0] += 19
    trainer2.batch(resumed)
    assert not trainer2.should_stop
    now[0] += 2
    trainer2.batch(resumed)
    assert trainer2.should_stop and resumed.reason == "max_time"
    resumed.on_train_end(trainer2, None)
    now[0] += 100  # after training: the clock stopped
    assert resumed.summary(trainer2, t)["wall_seconds"] == 61.0


def test_a_callback_stopping_the_run_names_its_reason_in_the_summary():
    """A sweep's pruner stops the run through stop_run: the summary says "pruned", not "other"."""
    t = train_cfg(max_steps=1000)
    rules, trainer = StopRules(t, None), StubTrainer()
    trainer.callbacks = [object(), rules]
    trainer.global_step = 40
    stopping.stop_run(trainer, "pruned")
    assert trainer.should_stop and rules.summary(trainer, t)["stop_reason"] == "pruned"
    with pytest.raises(ValueError, match="unknown stop reason 'bored'"):
        stopping.stop_run(trainer, "bored")


def test_stop_reason_without_a_rule_is_the_step_or_epoch_limit():
    t = train_cfg(max_steps=50)
    trainer = StubTrainer(max_steps=50)
    trainer.global_step = 50
    assert StopRules(t, None).summary(trainer, t)["stop_reason"] == "max_steps"
    t = train_cfg(max_epochs=2)
    trainer.global_step, trainer.current_epoch = 10, 2
    assert StopRules(t, None).summary(trainer, t)["stop_reason"] == "max_epochs"


# --- config and basis ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value, seconds", [("3600", 3600), ("01:30:00", 5400), ("1:00:00:00", 86400), ("90.5", 90.5), (None, None)])
def test_max_time_reads_seconds_or_clock_time(value, seconds):
    assert train_cfg(max_time=value).max_time_seconds == seconds


def test_stopping_keys_are_validated():
    with pytest.raises(ConfigError) as e:
        train_cfg(
            max_time="soon",
            max_flops=0.0,
            early_stop_metric="val/acc",
            patience=0,
            min_delta=-0.1,
            converge_window=1.0,
            converge_tol=-1.0,
            final_average=6,
            keep_last=5,
            val_subset_seed=-1,
        )
    for key in (
        "max_time='soon'",
        "max_flops=0.0",
        "early_stop_metric='val/acc'",
        "patience=0",
        "min_delta=-0.1",
        "converge_window=1.0",
        "converge_tol=-1.0",
        "final_average=6",
        "val_subset_seed=-1",
    ):
        assert f"train.{key}" in str(e.value)
    with pytest.raises(ConfigError, match="val_bleu=true"):
        train_cfg(early_stop_metric="val/bleu", val_bleu=False)


@pytest.mark.parametrize("train, basis", [
    ({"max_steps": 2000, "final_average": 5}, "equal steps (max_steps 2000), last-5 average"),
    ({"max_flops": 1e15}, "equal compute (max_flops 1e+15), at most max_steps 100000, final weights"),
    ({"max_epochs": 5}, "equal epochs (max_steps 100000, max_epochs 5), final weights"),
    ({"converge_window": 0.2}, "to convergence (val/ppl < 2% better over the last fifth of validations), at most max_steps 100000, "
                               "final weights"),
    ({"early_stop_metric": "val/bleu", "patience": 3, "max_time": "01:00:00", "max_steps": 10},
     "equal wall time (max_time 3600 s) or early stopping on val/bleu (patience 3), at most max_steps 10, final weights"),
])  # fmt: skip
def test_comparison_basis_describes_the_stopping_rule_and_the_weights_scored(train, basis):
    assert comparison_basis(load_config(data={"vocab_size": 64}, train=train)) == basis


def test_comparison_basis_says_how_many_checkpoints_were_averaged_when_fewer_were_there():
    cfg = load_config(data={"vocab_size": 64}, train={"max_steps": 2000, "final_average": 5})
    assert comparison_basis(cfg, averaged=3) == "equal steps (max_steps 2000), last-3 average"
    assert comparison_basis(cfg, averaged=0) == "equal steps (max_steps 2000), final weights"  # none to average

"""SpeedCallback's rates on a fake clock (validation time excluded from them
and counted on its own, in fit and after it, the sanity check left out; also under a real Lightning Trainer)."""

from __future__ import annotations

import resource
from types import SimpleNamespace

import pytest
import torch

from ablate.training import metrics
from ablate.training.metrics import SpeedCallback, peak_memory_mb


def test_peak_memory_on_cpu_is_the_process_peak_rss_in_mib():
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert peak_memory_mb(torch.device("cpu")) == pytest.approx(kib / 1024, rel=0.05)
    assert peak_memory_mb() == pytest.approx(kib / 1024, rel=0.05)


# --- SpeedCallback on a fake clock --------------------------------------------------------------------------------


class Clock:
    def __init__(self):
        self.now = 100.0

    def perf_counter(self) -> float:
        return self.now


class Recorder:
    def __init__(self):
        self.calls: list[tuple[dict, int]] = []

    def log_metrics(self, metrics: dict, step: int) -> None:
        self.calls.append((metrics, step))


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    monkeypatch.setattr(metrics, "time", fake)
    return fake


def setup(accumulate: int = 1, **kw):
    logger = Recorder()
    trainer = SimpleNamespace(
        accumulate_grad_batches=accumulate, loggers=[logger], global_step=0, precision="32-true", sanity_checking=False
    )
    module = SimpleNamespace(device=torch.device("cpu"))
    cb = SpeedCallback(**kw)
    cb.on_train_start(trainer, module)
    return cb, trainer, module, logger


def batch(src: int, tgt: int) -> dict:
    return {"src_tokens": src, "tgt_tokens": tgt}


def run_batch(cb, trainer, module, clock, seconds: float, b: dict, idx: int = 0) -> None:
    cb.on_train_batch_start(trainer, module, b, idx)
    clock.now += seconds
    trainer.global_step += 1  # as in Lightning: the optimizer has stepped when on_train_batch_end runs
    cb.on_train_batch_end(trainer, module, None, b, idx)


def test_speed_window_logs_tokens_per_second_and_step_time_every_n_steps(clock):
    cb, trainer, module, logger = setup(every=2)
    run_batch(cb, trainer, module, clock, 0.5, batch(100, 80))
    assert logger.calls == []
    run_batch(cb, trainer, module, clock, 0.5, batch(60, 40))
    [(logged, step)] = logger.calls
    assert step == 1  # the row of update 2, where Lightning logs train/loss of update 2 (steps count from 0)
    assert logged["speed/src_tokens_per_s"] == pytest.approx(160.0)
    assert logged["speed/tgt_tokens_per_s"] == pytest.approx(120.0)
    assert logged["speed/tokens_per_s"] == pytest.approx(120.0)  # target side, the field's convention
    assert logged["speed/step_ms"] == pytest.approx(500.0)
    assert logged["speed/peak_mem_mb"] > 0
    assert "speed/model_tflops" not in logged and "speed/mfu" not in logged
    run_batch(cb, trainer, module, clock, 1.0, batch(10, 10))
    assert len(logger.calls) == 1  # a new window has begun
    run_batch(cb, trainer, module, clock, 1.0, batch(10, 30))
    assert logger.calls[1][0]["speed/tgt_tokens_per_s"] == pytest.approx(20.0)


def test_validation_time_is_not_training_time(clock):
    cb, trainer, module, _ = setup(every=100)
    run_batch(cb, trainer, module, clock, 0.5, batch(100, 100))
    cb.on_validation_start(trainer, module)
    clock.now += 30.0
    cb.on_validation_end(trainer, module)
    clock.now += 0.25  # the next batch's own time, after validation
    cb.on_train_batch_start(trainer, module, batch(50, 50), 1)
    cb.on_train_batch_end(trainer, module, None, batch(50, 50), 1)
    cb.on_train_end(trainer, module)
    assert cb.summary["speed/train_seconds"] == pytest.approx(0.75)
    assert cb.summary["speed/tokens_per_s"] == pytest.approx(150 / 0.75)
    assert cb.summary["speed/step_ms"] == pytest.approx(375.0)


def validate(cb, trainer, module, clock, seconds: float, sanity: bool = False) -> None:
    trainer.sanity_checking = sanity
    cb.on_validation_start(trainer, module)
    clock.now += seconds
    cb.on_validation_end(trainer, module)
    trainer.sanity_checking = False


def test_sanity_validation_before_the_first_batch_does_not_shift_the_clock(clock):
    cb, trainer, module, _ = setup(every=100)
    validate(cb, trainer, module, clock, 30.0, sanity=True)
    run_batch(cb, trainer, module, clock, 2.0, batch(10, 10))
    cb.on_train_end(trainer, module)
    assert cb.summary["speed/train_seconds"] == pytest.approx(2.0)
    assert cb.summary["speed/val_seconds"] == 0.0 and cb.summary["speed/validations"] == 0  # the sanity check is left out


def test_validation_seconds_add_up_in_fit_and_after_it(clock):
    cb, trainer, module, _ = setup(every=100)
    validate(cb, trainer, module, clock, 5.0, sanity=True)
    run_batch(cb, trainer, module, clock, 1.0, batch(10, 10))
    validate(cb, trainer, module, clock, 20.0)
    run_batch(cb, trainer, module, clock, 1.0, batch(10, 10))
    validate(cb, trainer, module, clock, 12.5)
    cb.on_train_end(trainer, module)
    assert cb.summary["speed/val_seconds"] == pytest.approx(32.5) and cb.summary["speed/validations"] == 2
    assert cb.summary["speed/train_seconds"] == pytest.approx(2.0)
    validate(cb, trainer, module, clock, 7.0)  # trainer.validate() after fit, as ablate.run.train does for the final weights
    assert cb.summary["speed/val_seconds"] == pytest.approx(39.5) and cb.summary["speed/validations"] == 3
    assert cb.summary["speed/train_seconds"] == pytest.approx(2.0)


def test_validation_seconds_under_a_real_trainer(clock, tmp_path):
    """Lightning calls the hooks as the fake-clock tests assume: each validation batch costs one fake second."""
    import lightning as L

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(2, 1)

        def training_step(self, b, i):
            return self.layer(b[0]).sum()

        def validation_step(self, b, i):
            clock.now += 1.0

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(6, 2)), batch_size=2)  # 3 batches

    class Counted(SpeedCallback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):  # a batch without token counts
            super().on_train_batch_end(trainer, pl_module, outputs, {"src_tokens": 1, "tgt_tokens": 1}, batch_idx)

    cb = Counted(every=100)
    trainer = L.Trainer(max_steps=6, val_check_interval=3, num_sanity_val_steps=2, limit_val_batches=2, callbacks=[cb],
                        logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        default_root_dir=tmp_path)  # fmt: skip
    module = Tiny()
    trainer.fit(module, train_dataloaders=data, val_dataloaders=data)
    assert cb.summary["speed/validations"] == 2 and cb.summary["speed/val_seconds"] == pytest.approx(4.0)  # sanity check: 2 s, left out
    trainer.validate(module, dataloaders=data, verbose=False)
    assert cb.summary["speed/validations"] == 3 and cb.summary["speed/val_seconds"] == pytest.approx(6.0)


def test_a_resumed_run_counts_every_attempts_training_and_one_with_nothing_left_still_has_its_figures(clock):
    """The totals travel in the checkpoint (Lightning's callback state): the resumed attempt's summary covers the
    earlier attempt's training too, and a resume whose checkpoint is the last step (Lightning then calls no train hook)
    reports the earlier attempts' figures, where it used to report none."""
    flops = {"flops": lambda b: 1e12 * b["tgt_tokens"], "peak_tflops": 50.0}
    first, trainer, module, _ = setup(accumulate=2, every=100, **flops)
    run_batch(first, trainer, module, clock, 1.0, batch(30, 20))
    validate(first, trainer, module, clock, 9.0)
    run_batch(first, trainer, module, clock, 3.0, batch(10, 20))
    saved = first.state_dict()

    resumed, trainer, module, _ = setup(accumulate=2, every=100, **flops)
    resumed.load_state_dict(saved)
    run_batch(resumed, trainer, module, clock, 4.0, batch(60, 40))
    resumed.on_train_end(trainer, module)
    assert resumed.summary["speed/train_seconds"] == pytest.approx(8.0)
    assert resumed.summary["speed/tokens_per_s"] == pytest.approx(80 / 8.0)
    assert resumed.summary["speed/src_tokens_per_s"] == pytest.approx(100 / 8.0)
    assert resumed.summary["speed/step_ms"] == pytest.approx(1000 * 8.0 / 3 * 2)
    assert resumed.summary["speed/validations"] == 1 and resumed.summary["speed/val_seconds"] == pytest.approx(9.0)

    nothing_left = SpeedCallback(every=100, **flops)  # no on_train_start, no batch: only the checkpoint's state
    nothing_left.load_state_dict(resumed.state_dict())
    assert nothing_left.summary == pytest.approx(resumed.summary)
    assert nothing_left.summary["speed/mfu"] == pytest.approx(1e12 * 80 / 8.0 / 50e12)
    assert SpeedCallback(every=100).summary == {}  # neither trained nor resumed: nothing to report


def test_accumulation_counts_optimizer_steps_not_batches(clock):
    cb, trainer, module, logger = setup(accumulate=2, every=2)
    for _ in range(3):
        run_batch(cb, trainer, module, clock, 0.1, batch(10, 10))
    assert logger.calls == []  # 3 batches are 1.5 optimizer steps
    run_batch(cb, trainer, module, clock, 0.1, batch(10, 10))
    [(logged, _)] = logger.calls
    assert logged["speed/step_ms"] == pytest.approx(200.0)  # two batches per optimizer step
    assert logged["speed/tokens_per_s"] == pytest.approx(100.0)


def test_flops_give_model_tflops_and_mfu_against_the_given_peak(clock):
    cb, trainer, module, logger = setup(every=1, flops=lambda b: 1e12 * b["tgt_tokens"], peak_tflops=50.0)
    assert cb.peak == pytest.approx(50e12)
    run_batch(cb, trainer, module, clock, 2.0, batch(7, 10))
    [(logged, _)] = logger.calls
    assert logged["speed/model_tflops"] == pytest.approx(5.0)
    assert logged["speed/mfu"] == pytest.approx(0.1)


def test_flops_without_a_known_peak_on_cpu_give_no_mfu(clock):
    cb, trainer, module, logger = setup(every=1, flops=lambda b: 4e12)
    assert cb.peak is None
    run_batch(cb, trainer, module, clock, 1.0, batch(1, 1))
    cb.on_train_end(trainer, module)
    assert logger.calls[0][0]["speed/model_tflops"] == pytest.approx(4.0) and "speed/mfu" not in logger.calls[0][0]
    assert cb.summary["speed/model_tflops"] == pytest.approx(4.0) and "speed/mfu" not in cb.summary

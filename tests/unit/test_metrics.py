"""BLEU and chrF with their signatures, and SpeedCallback's rates on a fake clock (validation time excluded)."""

from __future__ import annotations

import resource
from types import SimpleNamespace

import pytest
import sacrebleu
import torch

from ablate import metrics
from ablate.metrics import SpeedCallback, bleu, chrf, peak_memory_mb

HYPS = ["the cat sat on the mat .", "a dog runs in the park", "hello there"]
REFS = ["the cat sat on a mat .", "the dog runs in the big park", "hello there"]


def test_bleu_is_sacrebleus_corpus_score_with_the_13a_signature():
    score = bleu(HYPS, REFS)
    assert score.score == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS]).score)
    assert 0 < score.score < 100
    assert "nrefs:1" in score.signature and "tok:13a" in score.signature and "smooth:exp" in score.signature
    assert bleu(REFS, REFS).score == pytest.approx(100.0)
    assert bleu(["x y z w"] * 3, REFS).score == pytest.approx(0.0)


def test_bleu_is_corpus_level_not_a_mean_of_sentence_scores():
    per_sentence = [bleu([h], [r]).score for h, r in zip(HYPS, REFS)]
    assert bleu(HYPS, REFS).score != pytest.approx(sum(per_sentence) / len(per_sentence))


def test_chrf_is_sacrebleus_chrf_with_its_signature():
    score = chrf(HYPS, REFS)
    assert score.score == pytest.approx(sacrebleu.corpus_chrf(HYPS, [REFS]).score)
    assert 0 < score.score < 100 and score.score != pytest.approx(bleu(HYPS, REFS).score)
    assert "nrefs:1" in score.signature and "nc:6" in score.signature and "nw:0" in score.signature
    assert chrf(REFS, REFS).score == pytest.approx(100.0)


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
    trainer = SimpleNamespace(accumulate_grad_batches=accumulate, loggers=[logger], global_step=0, precision="32-true")
    module = SimpleNamespace(device=torch.device("cpu"))
    cb = SpeedCallback(**kw)
    cb.on_train_start(trainer, module)
    return cb, trainer, module, logger


def batch(src: int, tgt: int) -> dict:
    return {"src_tokens": src, "tgt_tokens": tgt}


def run_batch(cb, trainer, module, clock, seconds: float, b: dict, idx: int = 0) -> None:
    cb.on_train_batch_start(trainer, module, b, idx)
    clock.now += seconds
    cb.on_train_batch_end(trainer, module, None, b, idx)
    trainer.global_step += 1


def test_speed_window_logs_tokens_per_second_and_step_time_every_n_steps(clock):
    cb, trainer, module, logger = setup(every=2)
    run_batch(cb, trainer, module, clock, 0.5, batch(100, 80))
    assert logger.calls == []
    run_batch(cb, trainer, module, clock, 0.5, batch(60, 40))
    [(logged, step)] = logger.calls
    assert step == 1
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


def test_sanity_validation_before_the_first_batch_does_not_shift_the_clock(clock):
    cb, trainer, module, _ = setup(every=100)
    cb.on_validation_start(trainer, module)
    clock.now += 30.0
    cb.on_validation_end(trainer, module)
    run_batch(cb, trainer, module, clock, 2.0, batch(10, 10))
    cb.on_train_end(trainer, module)
    assert cb.summary["speed/train_seconds"] == pytest.approx(2.0)


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

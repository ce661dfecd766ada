"""`problems(cfg)`: every rule of the schema itself (ranges, choices among fixed values, sizes no machine holds),
as messages naming the key [torchtune `_validate.py`]. What the registries hold (kernel, scaling and positional names,
which kernels take which positions, the longest sequence a model accepts, the named datasets) is checked beside
them, in ablate.model.checks and ablate.data.datasets; ablate.experiment.validate joins all into one ConfigError.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import is_dataclass
from typing import Any

from ablate.config.schema import PRECISIONS, DataConfig, ExperimentConfig, ModelConfig, TrainConfig
from ablate.messages.hints import did_you_mean


def choice(problems: list[str], key: str, value: Any, allowed: Iterable[str]) -> None:
    """Appends to `problems` when `value` is none of `allowed`: the one "KEY=VALUE is not one of [...]" message."""
    allowed = list(allowed)
    if value not in allowed:
        problems.append(f"{key}='{value}' is not one of {allowed}{did_you_mean(value, allowed)}")


def _at_least(problems: list[str], key: str, value: Any, low: float) -> None:
    if value is not None and value < low:
        problems.append(f"{key}={value} must be >= {low}")


def _in_range(problems: list[str], key: str, value: Any, low: float, high: float) -> None:
    if value is not None and not low <= value <= high:
        problems.append(f"{key}={value} must be from {low:g} to {high:g}")


def _non_finite(section: Any, prefix: str = "") -> list[str]:
    """Every float field (or float in a list field), in any section, that is inf or nan."""
    problems = []
    for name, value in vars(section).items():  # the fields' values, read without fields() (a sweep checks every row)
        if isinstance(value, float):
            if not math.isfinite(value):
                problems.append(f"{prefix}{name}={value} is not a finite number")
        elif isinstance(value, (list, tuple)):
            problems += [
                f"{prefix}{name}[{i}]={v} is not a finite number"
                for i, v in enumerate(value)
                if isinstance(v, float) and not math.isfinite(v)
            ]
        elif is_dataclass(value):
            problems += _non_finite(value, f"{prefix}{name}.")
    return problems


def _model_problems(p: list[str], m: ModelConfig) -> None:
    choice(p, "model.norm", m.norm, ["post", "pre"])
    choice(p, "model.tie_embeddings", m.tie_embeddings, ["none", "decoder", "all"])
    _at_least(p, "model.enc_layers", m.enc_layers, 0)
    _at_least(p, "model.dec_layers", m.dec_layers, 1)
    for key in ("d_model", "d_ff", "heads", "kv_heads", "d_k", "d_v", "max_positions", "attention_window"):
        _at_least(p, f"model.{key}", getattr(m, key), 1)
    if m.heads >= 1 and (m.d_k is None or m.d_v is None) and m.d_model % m.heads:
        p.append(
            f"model.d_model={m.d_model} is not divisible by model.heads={m.heads}; "
            "set model.d_k and model.d_v explicitly or choose heads dividing d_model"
        )
    if m.kv_heads is not None and m.kv_heads >= 1 and m.heads % m.kv_heads:
        p.append(f"model.kv_heads={m.kv_heads} must divide model.heads={m.heads}")
    for key in ("dropout", "attention_dropout"):
        v = getattr(m, key)
        if not 0.0 <= v < 1.0:
            p.append(f"model.{key}={v} must be in [0, 1)")
    if m.init_std is not None and not 0 < m.init_std <= FLOAT32_MAX:
        p.append(f"model.init_std={m.init_std} must be > 0 and at most {FLOAT32_MAX:g} (a float32)")


MAX_PARALLEL = 1024  # devices, threads, loader workers: more than any machine ablate runs on has
MAX_MEMBERS = 1024  # runs trained as one model (members.size, --members): K copies of every weight, moment and batch
FLOAT32_MAX = 3.4e38  # the largest float32: a setting past it cannot reach the optimizer or the weights
MAX_OUTPUT = 10_000  # decoding steps of one sentence: far past any MT sentence, and still a bounded loop
MAX_WEIGHTS = 10**11  # 400 GB of fp32 weights: no machine ablate trains on holds them, and building them would hang


def weights_estimate(m: ModelConfig, vocab_size: int) -> int:
    """An upper estimate of the values a model built from `m` allocates (weights and position tables; biases and norms
    left out), computed without building it, so a size no machine holds is refused before anything allocates."""
    d_k, d_v = m.head_dims
    h, g = m.heads, m.kv_heads or m.heads
    attention = m.d_model * (h * d_k + g * (d_k + d_v)) + h * d_v * m.d_model
    ff = 2 * m.d_model * m.d_ff
    layers = m.enc_layers * (attention + ff) + m.dec_layers * (2 * attention + ff)
    positions = 2 * m.max_positions * m.d_model + (m.enc_layers + m.dec_layers) * (2 * m.max_positions + 1) * max(d_k, h)
    return layers + 3 * vocab_size * m.d_model + positions


def _size_problems(p: list[str], m: ModelConfig, d: DataConfig, t: TrainConfig) -> None:
    """The sizes no machine holds: the model's weights, a beam wider than the vocabulary, an output limit past
    MAX_OUTPUT tokens for the longest training source."""
    if t.beam_size > d.vocab_size:
        p.append(f"train.beam_size={t.beam_size} must be at most data.vocab_size={d.vocab_size} (a beam holds distinct hypotheses)")
    if t.max_len_a * d.max_len + t.max_len_b > MAX_OUTPUT:
        p.append(
            f"train.max_len_a={t.max_len_a:g} and train.max_len_b={t.max_len_b} allow outputs of "
            f"{t.max_len_a * d.max_len + t.max_len_b:.3g} tokens for data.max_len={d.max_len}; at most {MAX_OUTPUT:,}"
        )
    n = weights_estimate(m, d.vocab_size)
    if n > MAX_WEIGHTS:
        p.append(
            f"the model would hold about {n:.2g} weights ({m.sizes}, data.vocab_size={d.vocab_size}); at most {MAX_WEIGHTS:.0e} can be built"
        )


def _data_problems(p: list[str], d: DataConfig) -> None:
    if d.dataset == "files" and not d.train_prefix:
        p.append("data.dataset='files' needs data.train_prefix (files PREFIX.{src_lang,tgt_lang}[.gz])")
    if d.src_lang == d.tgt_lang:
        p.append(f"data.src_lang and data.tgt_lang are both '{d.src_lang}'")
    _at_least(p, "data.vocab_size", d.vocab_size, 8)
    _at_least(p, "data.max_len", d.max_len, 1)
    if not 0.0 <= d.max_dropped_share <= 1.0:
        p.append(f"data.max_dropped_share={d.max_dropped_share} must be in [0, 1] (a share of the training pairs)")
    if d.max_tokens < d.max_len + 2:
        p.append(f"data.max_tokens={d.max_tokens} must be >= data.max_len + 2 = {d.max_len + 2} so every pair fits a batch")
    if not 0.0 < d.character_coverage <= 1.0:
        p.append(f"data.character_coverage={d.character_coverage} must be in (0, 1]")
    if d.tokenizer_sample < 0 or 0 < d.tokenizer_sample <= 100:
        p.append(f"data.tokenizer_sample={d.tokenizer_sample} must be 0 (all sentences) or > 100 (a SentencePiece limit)")
    _in_range(p, "data.num_workers", d.num_workers, 0, MAX_PARALLEL)
    _at_least(p, "data.pad_multiple", d.pad_multiple, 1)
    if d.pad_multiple > d.max_len >= 1:
        p.append(
            f"data.pad_multiple={d.pad_multiple} must be at most data.max_len={d.max_len}: a larger multiple pads every batch past its longest pair"
        )


def _train_problems(p: list[str], t: TrainConfig) -> None:
    for key in ("max_steps", "max_epochs", "warmup", "accumulate", "beam_size", "devices", "keep_last", "log_every_steps"):
        _at_least(p, f"train.{key}", getattr(t, key), 1)
    for key in (
        "lr_scale",
        "clip_grad",
        "weight_decay",
        "val_every_steps",
        "val_max_sentences",
        "num_threads",
        "length_penalty",
        "eval_longer_than",
    ):
        _at_least(p, f"train.{key}", getattr(t, key), 0)
    if t.lr_scale == 0:
        p.append("train.lr_scale=0 would never update the model; must be > 0")
    if t.eps <= 0:
        p.append(f"train.eps={t.eps} must be > 0 (Adam divides by sqrt(v) + eps, and v is 0 for a weight without gradient)")
    for key in ("lr_scale", "weight_decay", "eps"):  # they become float32 values of the optimizer
        _in_range(p, f"train.{key}", getattr(t, key), -FLOAT32_MAX, FLOAT32_MAX)
    for key in ("devices", "num_threads"):
        _in_range(p, f"train.{key}", getattr(t, key), 0, MAX_PARALLEL)
    if t.max_len_a < 0 or t.max_len_b < 0:
        p.append(f"train.max_len_a={t.max_len_a} and train.max_len_b={t.max_len_b} must be >= 0 (output limit a * source length + b)")
    if t.peak_tflops is not None and t.peak_tflops <= 0:
        p.append(f"train.peak_tflops={t.peak_tflops} must be > 0 (the device's peak TFLOP/s), or null to look it up")
    if not 0.0 <= t.label_smoothing < 1.0:
        p.append(f"train.label_smoothing={t.label_smoothing} must be in [0, 1)")
    if len(t.betas) != 2 or not all(0.0 <= b < 1.0 for b in t.betas):
        p.append(f"train.betas={list(t.betas)} must be two numbers in [0, 1)")
    choice(p, "train.precision", t.precision, PRECISIONS)
    if t.matmul_precision is not None:
        choice(p, "train.matmul_precision", t.matmul_precision, list(MATMUL_PRECISIONS))


EARLY_STOP_METRICS = ("val/loss", "val/ppl", "val/bleu")
SEED_MAX = 2**32 - 1  # numpy's bound, which Lightning's seed_everything and Optuna's samplers enforce by raising
MATMUL_PRECISIONS = ("highest", "high", "medium")  # torch.set_float32_matmul_precision's values


def _stopping_problems(p: list[str], t: TrainConfig, d: DataConfig) -> None:
    """The stopping rules, the validation subset and the end-of-run selection (ablate.run.stopping, ablate.run.evaluation)."""
    try:
        seconds = t.max_time_seconds
    except ValueError:
        p.append(f"train.max_time='{t.max_time}' must be seconds (e.g. 3600) or [DD:]HH:MM:SS (e.g. 01:00:00), or null for no limit")
    else:
        if seconds is not None and not 0 < seconds < math.inf:
            p.append(f"train.max_time='{t.max_time}' must be a positive, finite time")
    if t.max_flops is not None and t.max_flops <= 0:
        p.append(f"train.max_flops={t.max_flops} must be > 0 (model FLOPs, e.g. 1e15), or null for no budget")
    if t.early_stop_metric is not None:
        choice(p, "train.early_stop_metric", t.early_stop_metric, EARLY_STOP_METRICS)
        if t.early_stop_metric == "val/bleu" and not t.val_bleu:
            p.append("train.early_stop_metric='val/bleu' needs train.val_bleu=true (no BLEU is computed otherwise)")
    _at_least(p, "train.patience", t.patience, 1)
    _at_least(p, "train.min_delta", t.min_delta, 0)
    if not 0.0 <= t.converge_window < 1.0:
        p.append(f"train.converge_window={t.converge_window} must be in [0, 1) (0.2 = the last fifth of the validations; 0 = off)")
    if not 0.0 <= t.converge_tol < 1.0:
        p.append(f"train.converge_tol={t.converge_tol} must be in [0, 1) (a relative improvement, 0.02 = 2%)")
    _at_least(p, "train.val_subset_seed", t.val_subset_seed, 0)
    _at_least(p, "train.final_average", t.final_average, 0)
    if t.final_average > t.keep_last >= 1:
        p.append(f"train.final_average={t.final_average} needs at least that many step checkpoints kept, but train.keep_last={t.keep_last}")
    if d.dataset == "files" and not d.valid_prefix:
        needs = {"early_stop_metric": t.early_stop_metric is not None, "converge_window": t.converge_window > 0,
                 "final_average": t.final_average > 0}  # fmt: skip
        p += [f"train.{key}={getattr(t, key)} needs validation, but data.valid_prefix is not set" for key, on in needs.items() if on]


def problems(cfg: ExperimentConfig) -> list[str]:
    """Every rule of the schema `cfg` breaks, as messages naming the key."""
    p = _non_finite(cfg)
    _model_problems(p, cfg.model)
    if not p:  # the size is only meaningful for dimensions that are themselves valid
        _size_problems(p, cfg.model, cfg.data, cfg.train)
    _data_problems(p, cfg.data)
    _train_problems(p, cfg.train)
    _stopping_problems(p, cfg.train, cfg.data)
    choice(p, "logging.mode", cfg.logging.mode, ["offline", "online", "disabled"])
    if not 0 <= cfg.seed <= SEED_MAX:
        p.append(f"seed={cfg.seed} must be from 0 to {SEED_MAX} (numpy's range of seeds)")
    _at_least(p, "sweep.trial", cfg.sweep.trial, 0)
    _in_range(p, "members.size", cfg.members.size, 1, MAX_MEMBERS)
    _at_least(p, "members.index", cfg.members.index, 0)
    choice(p, "members.data", cfg.members.data, ["own", "shared"])
    return p

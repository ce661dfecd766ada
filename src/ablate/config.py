"""The one structured config schema of ablate; defaults are the paper's base model (Sec. 5, Table 3 "base").

Load order: schema defaults -> each YAML file -> CLI dotlist overrides -> `validate()`.
OmegaConf rejects unknown keys and wrong types; `validate()` collects every cross-field problem
and raises one `ConfigError` that lists them all, so a run never starts on a bad config.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException, ValidationError


class ConfigError(ValueError):
    """A user-caused config problem; the message names the key, the value and what is allowed."""


@dataclass
class ModelConfig:
    enc_layers: int = 6
    dec_layers: int = 6
    d_model: int = 512
    d_ff: int = 2048
    heads: int = 8
    kv_heads: Optional[int] = None  # None = heads (multi-head); 1 = multi-query; else grouped-query
    d_k: Optional[int] = None  # None = d_model // heads; independent of d_model for Table 3 rows (A)/(B)
    d_v: Optional[int] = None  # None = d_model // heads
    dropout: float = 0.1  # on sub-layer outputs and on embeddings + positions
    attention_dropout: float = 0.0  # on attention weights; the paper has none
    activation: str = "relu"  # relu | gelu
    norm: str = "post"  # post = the paper's LayerNorm(x + Sublayer(x)); pre = LayerNorm inside the residual
    attention: str = "scaled_dot_product"  # key of ATTENTION
    attention_scaling: str = "inv_sqrt_dk"  # key of SCALING; multiplies the logits of any attention kernel
    attention_window: int = 16  # attention=local: keys within this many positions (self-attention)
    positional: str = "sinusoidal"  # key of POSITIONAL
    max_positions: int = 1024  # size of position tables (learned); longest sequence the model accepts
    embed_scale: bool = True  # multiply embeddings by sqrt(d_model) (Sec. 3.4)
    tie_embeddings: str = "all"  # none | decoder (target embedding = output projection) | all (+ source)
    init_std: Optional[float] = None  # embedding init std; None = d_model**-0.5


@dataclass
class DataConfig:
    dataset: str = "multi30k"  # a named dataset (see ablate.datasets) or "files" with explicit paths below
    dir: Optional[str] = None  # where the named dataset's files are; else $ABLATE_DATA_DIR, the cache, a download
    src_lang: str = "en"
    tgt_lang: str = "de"
    train_prefix: Optional[str] = None  # dataset=files: PREFIX.{src_lang,tgt_lang}[.gz]
    valid_prefix: Optional[str] = None
    test_prefix: Optional[str] = None
    vocab_size: int = 8000  # joint source+target SentencePiece BPE vocabulary
    character_coverage: float = 1.0
    tokenizer_sample: int = 0  # sentences sampled to train SentencePiece; 0 = all
    max_len: int = 256  # pairs with more tokens on either side are dropped (and counted)
    max_tokens: int = 4096  # per batch, source or target side, padding included
    cache_dir: Optional[str] = None  # tokenizers and datasets; None = $ABLATE_CACHE or ~/.cache/ablate
    num_workers: int = 0


@dataclass
class TrainConfig:
    max_steps: int = 100_000
    max_epochs: Optional[int] = None  # stop at whichever of max_steps / max_epochs comes first
    lr_scale: float = 1.0  # multiplies the paper's d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
    warmup: int = 4000
    label_smoothing: float = 0.1
    betas: list[float] = field(default_factory=lambda: [0.9, 0.98])
    eps: float = 1e-9
    weight_decay: float = 0.0
    clip_grad: float = 0.0  # max grad norm; 0 = off
    accumulate: int = 1  # gradient accumulation: effective batch = accumulate * max_tokens
    precision: str = "32"  # 32 | bf16-mixed | 16-mixed
    accelerator: str = "auto"
    devices: int = 1
    strategy: str = "auto"
    num_threads: int = 0  # torch CPU threads; 0 = torch's default
    val_every_steps: int = 0  # 0 = validate once per epoch
    val_bleu: bool = True  # decode the validation set with beam search to report val/bleu
    val_max_sentences: int = 0  # sentences decoded for val/bleu; 0 = all
    keep_last: int = 5  # last-K checkpoints kept (for `ablate average`); the best by val/bleu is kept too
    beam_size: int = 4
    length_penalty: float = 0.6  # GNMT alpha
    max_len_a: float = 1.0  # max output length = a * source length + b (paper: source + 50)
    max_len_b: int = 50
    log_every_steps: int = 50
    peak_tflops: Optional[float] = None  # the device's peak for speed/mfu; None = Lightning's table (known GPUs only)
    compile: bool = False  # torch.compile the model
    deterministic: bool = False
    eval_longer_than: int = 0  # after training, BLEU on validation pairs whose source has more tokens (length extrapolation); 0 = off
    debug_nan_step: int = 0  # testing aid: from this step on the loss is NaN, to exercise the NaN guard; 0 = off


@dataclass
class LoggingConfig:
    wandb: bool = True
    mode: str = "offline"  # offline | online | disabled; offline needs no key, `wandb sync` uploads later
    project: str = "ablate"
    entity: Optional[str] = None
    group: Optional[str] = None
    name: Optional[str] = None
    tags: list[str] = field(default_factory=list)
    progress: bool = True  # rich progress bars


@dataclass
class SweepConfig:
    """Filled in by `ablate sweep` for each trial, so a run knows which study row it belongs to."""

    study: Optional[str] = None
    row: Optional[str] = None
    trial: Optional[int] = None


@dataclass
class ExperimentConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    seed: int = 1
    out_dir: str = "runs/default"  # checkpoints, config.yaml, metrics and W&B files of this run


# -- loading ---------------------------------------------------------------------------------


def _valid_keys(schema: Any, prefix: str = "") -> list[str]:
    keys = []
    for f in fields(schema):
        value = getattr(schema, f.name)
        keys.append(prefix + f.name)
        if is_dataclass(value):
            keys += _valid_keys(value, prefix + f.name + ".")
    return keys


def _friendly(err: OmegaConfBaseException, source: str) -> ConfigError:
    """Turn an OmegaConf error into one that names the key, the value and what is allowed."""
    key = err.full_key or "?"
    if isinstance(err, ConfigKeyError) or "not in struct" in str(err) or "Key '" in str(err):
        valid = _valid_keys(ExperimentConfig())
        close = difflib.get_close_matches(key, valid, n=3, cutoff=0.5)
        last = key.rsplit(".", 1)[-1]
        close += [k for k in valid if k.rsplit(".", 1)[-1] == last and k not in close]
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        return ConfigError(f"{source}: unknown config key '{key}'{hint}")
    if isinstance(err, ValidationError):
        msg = str(err).splitlines()[0]
        return ConfigError(f"{source}: bad value for '{key}': {msg}")
    return ConfigError(f"{source}: {err}")


def _read_yaml(path: Path) -> dict:
    """yaml.safe_load refuses tags that construct Python objects (!!python/object ...)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid (safe) YAML: {e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must hold a mapping of config sections, got {type(data).__name__}")
    return data


def merge(base: Any, update: dict | list[str], source: str) -> Any:
    """Merge a nested dict or a dotlist (`model.heads=4`) onto a structured config."""
    try:
        if isinstance(update, dict):
            return OmegaConf.merge(base, OmegaConf.create(update))
        for item in update:
            if "=" not in item:
                raise ConfigError(f"{source}: override '{item}' must look like key=value (e.g. model.heads=4)")
        return OmegaConf.merge(base, OmegaConf.from_dotlist(list(update)))
    except OmegaConfBaseException as e:
        raise _friendly(e, source) from None


def load_config(files: Iterable[str | os.PathLike] = (), overrides: Iterable[str] = (), **sections: dict) -> ExperimentConfig:
    """Schema defaults, then YAML files, then `sections` dicts, then dotlist overrides; validated."""
    cfg = OmegaConf.structured(ExperimentConfig)
    for path in files:
        cfg = merge(cfg, _read_yaml(Path(path)), str(path))
    if sections:
        cfg = merge(cfg, sections, "overrides")
    cfg = merge(cfg, list(overrides), "command line")
    obj: ExperimentConfig = OmegaConf.to_object(cfg)
    validate(obj)
    return obj


def from_dict(data: dict) -> ExperimentConfig:
    """Rebuild a config saved in a checkpoint or run dir (validated like any other)."""
    cfg = merge(OmegaConf.structured(ExperimentConfig), data, "saved config")
    obj = OmegaConf.to_object(cfg)
    validate(obj)
    return obj


def to_dict(cfg: ExperimentConfig) -> dict:
    return asdict(cfg)


def to_yaml(cfg: ExperimentConfig) -> str:
    return OmegaConf.to_yaml(OmegaConf.structured(cfg))


def flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    """{'model': {'heads': 8}} -> {'model.heads': 8}; for diffs and W&B config."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


# -- validation ------------------------------------------------------------------------------


def _choice(problems: list[str], key: str, value: Any, allowed: Iterable[str]) -> None:
    allowed = list(allowed)
    if value not in allowed:
        close = difflib.get_close_matches(str(value), allowed, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        problems.append(f"{key}='{value}' is not one of {allowed}{hint}")


def _at_least(problems: list[str], key: str, value: Any, low: float) -> None:
    if value is not None and value < low:
        problems.append(f"{key}={value} must be >= {low}")


def validate(cfg: ExperimentConfig) -> None:
    """Check every cross-field rule; raise one ConfigError listing all problems."""
    from ablate.model.attention import ATTENTION, SCALING
    from ablate.model.positional import POSITIONAL
    from ablate.model.transformer import compatible

    p: list[str] = []
    m, d, t = cfg.model, cfg.data, cfg.train
    _choice(p, "model.attention", m.attention, ATTENTION)
    _choice(p, "model.attention_scaling", m.attention_scaling, SCALING)
    _choice(p, "model.positional", m.positional, POSITIONAL)
    _choice(p, "model.activation", m.activation, ["relu", "gelu"])
    _choice(p, "model.norm", m.norm, ["post", "pre"])
    _choice(p, "model.tie_embeddings", m.tie_embeddings, ["none", "decoder", "all"])
    for key in ("enc_layers", "dec_layers"):
        _at_least(p, f"model.{key}", getattr(m, key), 0 if key == "enc_layers" else 1)
    if m.attention in ATTENTION and m.positional in POSITIONAL and not compatible(m.attention, m.positional):
        p.append(f"model.attention='{m.attention}' cannot add the position biases of model.positional='{m.positional}'; "
                 "choose rotary, sinusoidal, learned or none")
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
    if m.init_std is not None and m.init_std <= 0:
        p.append(f"model.init_std={m.init_std} must be > 0")

    _choice(p, "data.dataset", d.dataset, _dataset_names())
    if d.dataset == "files" and not d.train_prefix:
        p.append("data.dataset='files' needs data.train_prefix (files PREFIX.{src_lang,tgt_lang}[.gz])")
    if d.src_lang == d.tgt_lang:
        p.append(f"data.src_lang and data.tgt_lang are both '{d.src_lang}'")
    _at_least(p, "data.vocab_size", d.vocab_size, 8)
    _at_least(p, "data.max_len", d.max_len, 1)
    if d.max_len > m.max_positions and m.positional == "learned":
        p.append(f"data.max_len={d.max_len} exceeds model.max_positions={m.max_positions} (learned positions)")
    if d.max_tokens < d.max_len + 2:
        p.append(f"data.max_tokens={d.max_tokens} must be >= data.max_len + 2 = {d.max_len + 2} so every pair fits a batch")
    if not 0.0 < d.character_coverage <= 1.0:
        p.append(f"data.character_coverage={d.character_coverage} must be in (0, 1]")
    _at_least(p, "data.num_workers", d.num_workers, 0)

    _at_least(p, "train.max_steps", t.max_steps, 1)
    _at_least(p, "train.max_epochs", t.max_epochs, 1)
    _at_least(p, "train.warmup", t.warmup, 1)
    _at_least(p, "train.accumulate", t.accumulate, 1)
    _at_least(p, "train.beam_size", t.beam_size, 1)
    _at_least(p, "train.devices", t.devices, 1)
    _at_least(p, "train.keep_last", t.keep_last, 1)
    _at_least(p, "train.log_every_steps", t.log_every_steps, 1)
    for key in ("lr_scale", "clip_grad", "weight_decay", "val_every_steps", "val_max_sentences", "num_threads", "length_penalty", "debug_nan_step", "eval_longer_than"):
        _at_least(p, f"train.{key}", getattr(t, key), 0)
    if t.lr_scale == 0:
        p.append("train.lr_scale=0 would never update the model; must be > 0")
    if t.peak_tflops is not None and t.peak_tflops <= 0:
        p.append(f"train.peak_tflops={t.peak_tflops} must be > 0 (the device's peak TFLOP/s), or null to look it up")
    if not 0.0 <= t.label_smoothing < 1.0:
        p.append(f"train.label_smoothing={t.label_smoothing} must be in [0, 1)")
    if len(t.betas) != 2 or not all(0.0 <= b < 1.0 for b in t.betas):
        p.append(f"train.betas={list(t.betas)} must be two numbers in [0, 1)")
    _choice(p, "train.precision", t.precision, ["32", "bf16-mixed", "16-mixed", "64"])
    _choice(p, "logging.mode", cfg.logging.mode, ["offline", "online", "disabled"])
    if p:
        raise ConfigError("invalid config:\n  - " + "\n  - ".join(p))


def _dataset_names() -> list[str]:
    from ablate.datasets import DATASETS

    return ["files", *DATASETS]

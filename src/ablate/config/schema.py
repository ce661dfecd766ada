"""The one structured config schema of ablate; defaults are the paper's base model (Sec. 5, Table 3 "base").

Every key is declared here and only here. OmegaConf rejects unknown keys and wrong types when a file or an
override is merged onto it (ablate.config.merge); cross-field rules are in ablate.config.validation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Lightning's precisions a run may train in: fp32, bf16 or fp16 autocast (mixed), fp64.
PRECISIONS = ("32", "bf16-mixed", "16-mixed", "64")
# The model keys that set its size (named in an error when a model is too large to build).
SIZE_KEYS = ("enc_layers", "dec_layers", "d_model", "d_ff", "heads", "kv_heads", "d_k", "d_v", "max_positions")


@dataclass
class ModelConfig:
    enc_layers: int = 6
    dec_layers: int = 6
    d_model: int = 512
    d_ff: int = 2048
    heads: int = 8
    kv_heads: int | None = None  # None = heads (multi-head); 1 = multi-query; else grouped-query
    d_k: int | None = None  # None = d_model // heads; independent of d_model for Table 3 rows (A)/(B)
    d_v: int | None = None  # None = d_model // heads
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
    init_std: float | None = None  # embedding init std; None = d_model**-0.5

    @property
    def head_dims(self) -> tuple[int, int]:
        """(d_k, d_v) with their defaults filled in: d_model // heads where left None."""
        return self.d_k or self.d_model // self.heads, self.d_v or self.d_model // self.heads

    @property
    def sizes(self) -> str:
        """ "model.enc_layers=6, model.dec_layers=6, ...": the keys that set its size, for a message about that size."""
        return ", ".join(f"model.{k}={getattr(self, k)}" for k in SIZE_KEYS if getattr(self, k) is not None)


@dataclass
class DataConfig:
    dataset: str = "multi30k"  # a named dataset (see ablate.data.datasets) or "files" with explicit paths below
    dir: str | None = None  # where the named dataset's files are; else $ABLATE_DATA_DIR, the cache, a download
    src_lang: str = "en"
    tgt_lang: str = "de"
    train_prefix: str | None = None  # dataset=files: PREFIX.{src_lang,tgt_lang}[.gz]
    valid_prefix: str | None = None
    test_prefix: str | None = None
    vocab_size: int = 8000  # joint source+target SentencePiece BPE vocabulary
    character_coverage: float = 1.0
    tokenizer_sample: int = 0  # sentences sampled to train SentencePiece; 0 = all
    max_len: int = 256  # pairs with more tokens on either side are dropped (and counted)
    max_dropped_share: float = 0.01  # training stops before it starts if more of the train pairs are dropped (empty or too long)
    max_tokens: int = 4096  # per batch, source or target side, padding included
    # Pad each batch's source and target lengths up to a multiple of this: fewer distinct shapes for torch.compile
    # (train.compile) and tensor-core-friendly sizes on GPUs (8). 1 = no extra padding. Results are unchanged (the
    # extra positions are masked), a batch may exceed max_tokens by up to (multiple - 1) tokens per sentence.
    pad_multiple: int = 1
    cache_dir: str | None = None  # tokenizers and datasets; None = $ABLATE_CACHE or ~/.cache/ablate
    num_workers: int = 0


@dataclass
class TrainConfig:
    max_steps: int = 100_000
    max_epochs: int | None = None  # stop at whichever of max_steps / max_epochs comes first
    # More reasons to stop (whichever comes first; summary.json's stop_reason says which did). Budgets count the
    # whole run: a resumed run continues from the FLOPs and wall time its checkpoint recorded.
    max_time: str | None = None  # wall-clock budget of training (validation included): seconds or "[DD:]HH:MM:SS"; None = off
    max_flops: float | None = None  # model-FLOPs budget (ablate.training.flops, all devices), to compare rows at equal compute; None = off
    early_stop_metric: str | None = None  # val/loss | val/ppl | val/bleu: stop once it stops improving; None = off
    patience: int = 5  # early stopping: validations in a row without an improvement
    min_delta: float = 0.0  # early stopping, relative: an improvement must beat the best so far by more than min_delta * |best|
    # Convergence rule (the "val PPL improves by < 2% over the last fifth of training"): after each validation,
    # stop when the best val/ppl of the last `converge_window` share of the validations so far is less than
    # `converge_tol` (relative) below the best before them, judged once that share holds 3 validations or more.
    # 0.2 = the last fifth; 0 = off (summary.json still reports it).
    converge_window: float = 0.0
    converge_tol: float = 0.02
    lr_scale: float = 1.0  # multiplies the paper's d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
    warmup: int = 4000
    label_smoothing: float = 0.1
    betas: list[float] = field(default_factory=lambda: [0.9, 0.98])
    eps: float = 1e-9
    weight_decay: float = 0.0
    clip_grad: float = 0.0  # max grad norm; 0 = off
    accumulate: int = 1  # gradient accumulation: effective batch = accumulate * max_tokens
    precision: str = "32"  # one of PRECISIONS (ablate.training.precision: what each means for matmuls and decoding)
    # torch.set_float32_matmul_precision for the fp32 matmuls left outside autocast: highest | high (TF32) | medium;
    # None = from precision ("high" under bf16-mixed/16-mixed, whose fp32 remainder is not the point; "highest" for 32)
    matmul_precision: str | None = None
    accelerator: str = "auto"
    devices: int = 1
    strategy: str = "auto"
    num_threads: int = 0  # torch CPU threads; 0 = torch's default
    val_every_steps: int = 0  # 0 = validate once per epoch
    val_bleu: bool = True  # decode the validation set with beam search to report val/bleu
    val_max_sentences: int = 0  # sentences decoded for val/bleu and eval/valid.json: a fixed random sample of the split; 0 = all
    val_subset_seed: int = 0  # seed of that sample; not the run's seed, so every trial of a study decodes the same sentences
    keep_last: int = 5  # last-K checkpoints kept (for `ablate average`); the best (`best_by`) is kept too
    final_average: int = 0  # report the average of the last K step checkpoints (checkpoints/avg.ckpt; paper: 5); 0 = final weights
    eval_record: bool = True  # at the end, decode and score the validation sentences into eval/valid.json, even with val_bleu off
    beam_size: int = 4
    length_penalty: float = 0.6  # GNMT alpha
    max_len_a: float = 1.0  # max output length = a * source length + b (paper: source + 50)
    max_len_b: int = 50
    log_every_steps: int = 50
    peak_tflops: float | None = None  # the device's peak for speed/mfu; None = ablate.training.flops' table of GPUs, then Lightning's
    compile: bool = False  # torch.compile the model
    deterministic: bool = False
    eval_longer_than: int = 0  # after training, BLEU on validation pairs whose source has more tokens (length extrapolation); 0 = off

    @property
    def stopping_rules(self) -> dict[str, bool]:
        """Which rules besides max_steps/max_epochs may end a run; the comparison basis of a run (its summary) and
        of a study (a sweep file's `basis:`) are both read off this one place."""
        return {
            "compute": self.max_flops is not None,
            "time": self.max_time_seconds is not None,
            "converged": self.converge_window > 0,
            "early_stopping": bool(self.early_stop_metric),
        }

    @property
    def best_by(self) -> tuple[str, str]:
        """The metric best.ckpt is chosen by and its better direction: val/bleu ("max"), or val/loss ("min") where
        val_bleu is off. One place for a run's ModelCheckpoint and a member group's MemberRuns."""
        return ("val/bleu", "max") if self.val_bleu else ("val/loss", "min")

    @property
    def max_time_seconds(self) -> float | None:
        """`max_time` in seconds (None when off); ValueError when it is neither seconds nor "[DD:]HH:MM:SS"."""
        if self.max_time is None or not str(self.max_time).strip():
            return None
        parts = str(self.max_time).strip().split(":")
        if len(parts) not in (1, 3, 4):
            raise ValueError(f"train.max_time='{self.max_time}' is neither seconds nor [DD:]HH:MM:SS")
        units = (86400, 3600, 60, 1)[-len(parts) :]
        return sum(unit * float(part) for unit, part in zip(units, parts))


@dataclass
class LoggingConfig:
    wandb: bool = True
    mode: str = "offline"  # offline | online | disabled; offline needs no key, `wandb sync` uploads later
    project: str = "ablate"
    entity: str | None = None
    group: str | None = None
    name: str | None = None
    tags: list[str] = field(default_factory=list)
    progress: bool = True  # rich progress bars


@dataclass
class SweepConfig:
    """Filled in by `ablate sweep` for each trial, so a run knows which study row it belongs to."""

    study: str | None = None
    row: str | None = None
    trial: int | None = None
    basis: str | None = None  # the study's stated comparison basis (the sweep file's `basis:`), for `ablate table`


@dataclass
class MembersConfig:
    """K runs of this config trained as one model (docs/members.md): seeds seed .. seed+K-1 unless given per member."""

    size: int = 1  # K; 1 = an ordinary run
    data: str = "own"  # own: each member its own shuffled batches of one length schedule | shared: the group seed's batches
    # Filled in by ablate in each member's saved config: the group's directory, this member's place in it, and the seed
    # of the group's length schedule (the group config's seed), on which `ablate table` pairs rows' groups.
    group: str | None = None
    index: int | None = None
    schedule: int | None = None


@dataclass
class ExperimentConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    members: MembersConfig = field(default_factory=MembersConfig)
    seed: int = 1
    out_dir: str = "runs/default"  # checkpoints, config.yaml, metrics and W&B files of this run
    # Files (.py; relative to the config naming them, on the command line to the cwd) or module names imported
    # before validation, to register variants of the user's own (ablate.plugins); saved resolved (absolute).
    plugins: list[str] = field(default_factory=list)

"""What a run's summary.json holds, field by field, so a reader refuses a damaged one naming the field instead of
tabulating a list where a number was or failing deep inside a statistic. Fields not listed here (a user's, or one
added by a later ablate) pass as they are: the check is of the fields readers rely on."""

from __future__ import annotations

import math
from fnmatch import fnmatchcase
from typing import Any

from ablate.messages.hints import did_you_mean

NUMBER, TEXT, FLAG, LIST, MAPPING = "a finite number", "a string", "true or false", "a list", "an object"
COUNTS = "an object of counts or a finite number"  # params: by part since ablate counted them so, a total before

# dotted path -> kind; a "*" within a part stands for any text (the metrics in `last`, the speed figures, the splits).
FIELDS = {
    "out_dir": TEXT,
    "steps": NUMBER,
    "epochs": NUMBER,
    "stop_reason": TEXT,
    "flops": NUMBER,
    "wall_seconds": NUMBER,
    "convergence": MAPPING,
    "convergence.window": NUMBER,
    "convergence.tol": NUMBER,
    "convergence.validations": NUMBER,
    "convergence.improvement": NUMBER,
    "convergence.converged": FLAG,
    "basis": TEXT,
    "matmul_precision": TEXT,
    "params": COUNTS,
    "params.*": NUMBER,
    "params/total": NUMBER,
    "git_sha": TEXT,
    "git_dirty": FLAG,
    "versions": MAPPING,
    "versions.*": TEXT,
    "vocab_size": NUMBER,
    "last": MAPPING,
    "last.*": NUMBER,
    "best": MAPPING,
    "best.metric": TEXT,
    "best.value": NUMBER,
    "best.checkpoint": TEXT,
    "bleu_signature": TEXT,
    "speed/*": NUMBER,
    "sweep": MAPPING,
    "sweep.study": TEXT,
    "sweep.row": TEXT,
    "sweep.trial": NUMBER,
    "selected": TEXT,
    "averaged_from": LIST,
    "val/split": TEXT,
    "val/sentences": NUMBER,
    "val/bleu": NUMBER,
    "val/ppl": NUMBER,
    "val/loss": NUMBER,
    "val_long/bleu": NUMBER,
    "data": MAPPING,
    "data.dropped": MAPPING,
    "data.dropped.*": MAPPING,
    "data.dropped.*.files": LIST,
    "data.dropped.*.pairs": NUMBER,
    "data.dropped.*.empty": NUMBER,
    "data.dropped.*.too_long": NUMBER,
    "eval_record": TEXT,
}


# What a sweep's objective may name, so a misspelt one is caught on load, not after every trial has trained: a run's
# validation metrics (summary["last"]) and its figures. A plugin's callback may log its own val/* metric, so another
# val/* name is only doubted (a warning) where it is a near miss of one of these; any other name is refused.
VALIDATION_METRICS = ("val/bleu", "val/loss", "val/nll", "val/ppl")
FIGURES = (
    "val_long/bleu", "wall_seconds", "steps", "epochs", "flops", "params/total", "speed/tokens_per_s",
    "speed/src_tokens_per_s", "speed/tgt_tokens_per_s", "speed/step_ms", "speed/peak_mem_mb", "speed/model_tflops",
    "speed/mfu", "speed/train_seconds", "speed/val_seconds", "speed/validations", "val/bleu_sentences", "val/sentences",
)  # fmt: skip
REPORTED = VALIDATION_METRICS + FIGURES


def metric_problem(name: str) -> str | None:
    """Why no run's summary can hold the metric `name` (with the closest name a run has), or None: a val/* name may
    be a plugin's (see metric_doubt)."""
    if name in REPORTED or name.startswith("val/"):
        return None
    return f"no run reports a metric '{name}'{did_you_mean(name, REPORTED, cutoff=0.75)}; {_reported()}"


def metric_doubt(name: str) -> str | None:
    """A val/* name no run of ablate's own reports that is a near miss of one it does (`val/blue`), or None."""
    if name in REPORTED or not name.startswith("val/") or not (hint := did_you_mean(name, REPORTED, cutoff=0.75)):
        return None
    return f"no run of ablate's own reports a metric '{name}'{hint}; only a plugin's callback that logs it can: {_reported()}"


def metric_unlogged(name: str) -> str | None:
    """Why a run that imports no plugin cannot report the metric `name` (a val/* name ablate does not log, which only
    a plugin's callback could), or None."""
    if name in REPORTED:
        return None
    return (
        f"no run reports a metric '{name}'{did_you_mean(name, REPORTED, cutoff=0.75)}: only a plugin's callback could "
        f"log it, and no plugin is named (plugins: [FILE] in the base config or the sweep's overrides) or installed; {_reported()}"
    )


def _reported() -> str:
    return f"a run reports {', '.join(VALIDATION_METRICS)} and {', '.join(FIGURES)}"


def check_summary(summary: Any, source: str) -> None:
    """ValueError naming `source` and the field when `summary` is not an object or a listed field holds another kind
    of value (null stands for "not measured" and passes; a number must be finite, true/false is not a number)."""
    if not isinstance(summary, dict):
        raise ValueError(f"{source}: a run's summary is a JSON object, not {type(summary).__name__}")
    _check(summary, "", source)


def _check(node: dict, prefix: str, source: str) -> None:
    for key, value in node.items():
        path = f"{prefix}{key}"
        kind = kind_of(path)
        if kind is not None and value is not None and not _is(kind, value):
            raise ValueError(f"{source}: summary key '{path}' should be {kind}, got {_shown(value)}")
        if isinstance(value, dict) and kind in (MAPPING, COUNTS):
            _check(value, f"{path}.", source)


def kind_of(path: str) -> str | None:
    if path in FIELDS:
        return FIELDS[path]
    parts = path.split(".")
    for pattern, kind in FIELDS.items():
        wild = pattern.split(".")
        if "*" in pattern and len(wild) == len(parts) and all(fnmatchcase(p, w) for p, w in zip(parts, wild)):
            return kind
    return None


def _is(kind: str, value: Any) -> bool:
    if kind == COUNTS:
        return isinstance(value, dict) or _is(NUMBER, value)
    if kind == NUMBER:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return isinstance(value, {TEXT: str, FLAG: bool, LIST: list, MAPPING: dict}[kind])


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."

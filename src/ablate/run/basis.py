"""The comparison basis in one vocabulary: what ends a run (STOPS: steps, epochs, compute, time, converged,
early_stopping) and which weights are scored (final, or last-K: the average of the last K checkpoints). A sweep
file states a study's basis in these words (`basis: {stop: converged, weights: last-5}`, checked row by row in
ablate.sweep.basis); a run's summary records the basis it ran on, in a sentence built from the same kinds
(comparison_basis), which `ablate table` prints beside each row."""

from __future__ import annotations

from ablate.config import ExperimentConfig, TrainConfig

STOPS = {  # stop kind -> what it needs of a train section
    "steps": "no stopping rule or budget but max_steps",
    "epochs": "train.max_epochs set, no other stopping rule or budget",
    "compute": "train.max_flops set, no other stopping rule or budget",
    "time": "train.max_time set, no other stopping rule or budget",
    "converged": "train.converge_window > 0, no other stopping rule or budget",
    "early_stopping": "train.early_stop_metric set, no other stopping rule or budget",
}
FRACTIONS = {0.5: "half", 0.25: "quarter", 0.2: "fifth", 0.1: "tenth"}


def holds(stop: str, t: TrainConfig) -> bool:
    """Whether a run with `t` stops on `stop` alone."""
    rules = t.stopping_rules
    if stop == "steps":
        return not any(rules.values()) and not t.max_epochs
    if stop == "epochs":
        return not any(rules.values()) and bool(t.max_epochs)
    return rules[stop] and not any(on for rule, on in rules.items() if rule != stop)  # one rule: the basis says which


def weights(t: TrainConfig, averaged: int | None = None) -> str:
    """ "final" or "last-K" (train.final_average; `averaged`: how many the run did average, where fewer were there)."""
    k = t.final_average if averaged is None else averaged
    return f"last-{k}" if k else "final"


def _stop_text(kind: str, t: TrainConfig) -> str:
    if kind == "compute":
        return f"equal compute (max_flops {t.max_flops:.3g})"
    if kind == "time":
        return f"equal wall time (max_time {t.max_time_seconds:g} s)"
    if kind == "converged":
        part = FRACTIONS.get(t.converge_window, f"{t.converge_window:.0%}")
        return f"to convergence (val/ppl < {t.converge_tol:.0%} better over the last {part} of validations)"
    delta = f", min_delta {t.min_delta:g}" if t.min_delta else ""
    return f"early stopping on {t.early_stop_metric} (patience {t.patience}{delta})"


def comparison_basis(cfg: ExperimentConfig, averaged: int | None = None) -> str:
    """What a row's scores are comparable on, from the run's config: the stopping rules, then the weights scored.
    E.g. "equal steps (max_steps 2000), last-5 average", "equal compute (max_flops 1e+15), final weights"."""
    t = cfg.train
    limit = f"max_steps {t.max_steps}" + (f", max_epochs {t.max_epochs}" if t.max_epochs else "")
    rules = [_stop_text(kind, t) for kind, on in t.stopping_rules.items() if on]
    if rules:
        stop = " or ".join(rules) + f", at most {limit}"
    else:
        stop = f"equal {'epochs' if t.max_epochs else 'steps'} ({limit})"
    scored = weights(t, averaged)
    return f"{stop}, {'final weights' if scored == 'final' else scored + ' average'}"

"""A study's comparison basis, stated in its sweep file and held by every row: what "this row against base" means.

```yaml
basis: {stop: converged, weights: last-5, except: [base-2x]}
```

`stop` says what ends every run (`steps`, `epochs`, `compute`, `time`, `converged`, `early_stopping`) and `weights`
which weights are scored (`final`, or `last-K`, the average of the last K checkpoints, as the paper reports). A row
that overrides what the basis rests on (a budget, the convergence rule, the averaging) would be compared on another
footing without anyone seeing it, so loading the sweep file refuses it, naming the row and the key, unless the row
is listed under `except` (a deliberate control, such as the base trained twice as long). Each run's summary
records the basis it actually ran on (`ablate.run.stopping.comparison_basis`), and `ablate table` prints it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ablate.config import ExperimentConfig

# stop kind -> (the train keys the kind rests on, which every row shares with the base, and what it needs of them)
STOPS: dict[str, tuple[tuple[str, ...], str]] = {
    "steps": (
        ("max_steps", "max_epochs", "converge_window", "early_stop_metric", "max_flops", "max_time"),
        "no stopping rule or budget but max_steps",
    ),
    "epochs": (
        ("max_epochs", "max_steps", "converge_window", "early_stop_metric", "max_flops", "max_time"),
        "train.max_epochs set, no other stopping rule",
    ),
    "compute": (("max_flops",), "train.max_flops set"),
    "time": (("max_time",), "train.max_time set"),
    "converged": (("converge_window", "converge_tol"), "train.converge_window > 0"),
    "early_stopping": (("early_stop_metric", "patience", "min_delta"), "train.early_stop_metric set"),
}
WEIGHTS = re.compile(r"final|last-([1-9][0-9]*)")
KEYS = {"stop", "weights", "except"}


@dataclass(frozen=True)
class Basis:
    stop: str
    weights: str  # "final" or "last-K"
    exempt: tuple[str, ...] = field(default=())

    def problem(self, cfg: ExperimentConfig, base: ExperimentConfig) -> str | None:
        """Why a run with `cfg` is not on this basis (the study's base config is `base`), or None."""
        t, b = cfg.train, base.train
        shared, needs = STOPS[self.stop]
        if not _holds(self.stop, t):
            return f"stop: {self.stop} needs {needs}"
        for key in shared:
            if getattr(t, key) != getattr(b, key):
                return f"train.{key}={getattr(t, key)!r} differs from the base's {getattr(b, key)!r} (stop: {self.stop})"
        k = 0 if self.weights == "final" else int(self.weights.split("-")[1])
        if t.final_average != k:
            return f"train.final_average={t.final_average} but weights: {self.weights} needs {k}"
        return None

    def describe(self) -> str:
        return f"stop: {self.stop}, weights: {self.weights}" + (f" (except {', '.join(self.exempt)})" if self.exempt else "")


def _holds(stop: str, t) -> bool:
    rules = {
        "compute": t.max_flops is not None,
        "time": t.max_time_seconds is not None,
        "converged": t.converge_window > 0,
        "early_stopping": bool(t.early_stop_metric),
    }
    if stop == "steps":
        return not any(rules.values()) and not t.max_epochs
    if stop == "epochs":
        return not any(rules.values()) and bool(t.max_epochs)
    return rules[stop]


def parse_basis(raw: Any, rows: set[str]) -> Basis | None:
    """The sweep file's `basis:` (None when absent); ValueError naming the key that is wrong."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ValueError(f"basis must be a mapping like {{stop: converged, weights: last-5}}, got {raw!r}")
    unknown = sorted(set(raw) - KEYS)
    if unknown:
        raise ValueError(f"unknown key '{unknown[0]}' in basis; allowed: {sorted(KEYS)}")
    stop, weights = raw.get("stop"), str(raw.get("weights", ""))
    if stop not in STOPS:
        raise ValueError(f"basis.stop={stop!r} is not one of {list(STOPS)}")
    if not WEIGHTS.fullmatch(weights):
        raise ValueError(f"basis.weights={raw.get('weights')!r} is neither 'final' nor 'last-K' (K >= 1, e.g. last-5)")
    exempt = raw.get("except") or []
    if not isinstance(exempt, list) or not all(isinstance(r, str) for r in exempt):
        raise ValueError(f"basis.except must be a list of row names, got {exempt!r}")
    for row in exempt:
        if row not in rows:
            raise ValueError(f"basis.except names '{row}', which is not a variant")
    return Basis(stop, weights, tuple(exempt))

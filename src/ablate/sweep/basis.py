"""A study's comparison basis, stated in its sweep file and held by every row: what "this row against base" means.

```yaml
basis: {stop: converged, weights: last-5, except: [base-2x]}
```

`stop` says what ends every run (`steps`, `epochs`, `compute`, `time`, `converged`, `early_stopping`) and `weights`
which weights are scored (`final`, or `last-K`, the average of the last K checkpoints, as the paper reports); the
base experiment must do so. A row that stops on other terms than the base (its own cap, budget, rule or validation
interval) or scores other weights would be compared on another footing without anyone seeing it, so loading the
sweep file refuses it, naming the row and the key, unless the row is listed under `except` (a deliberate control,
such as the base trained twice as long). The vocabulary is ablate.run.basis's, in which each run's summary records the
basis it actually ran on, and `ablate table` prints it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ablate.config import ExperimentConfig
from ablate.config.paper import STOP_KEYS
from ablate.config.trained import same_value
from ablate.run.basis import STOPS, holds, weights

WEIGHTS = re.compile(r"final|last-([1-9][0-9]*)")
KEYS = {"stop", "weights", "except"}


@dataclass(frozen=True)
class Basis:
    stop: str
    weights: str  # "final" or "last-K"
    exempt: tuple[str, ...] = field(default=())

    def base_problem(self, base: ExperimentConfig) -> str | None:
        """Why the study's base config itself is not on this basis, or None."""
        if not holds(self.stop, base.train):
            return f"stop: {self.stop} needs {STOPS[self.stop]}"
        return self._weights_problem(base)

    def row_problem(self, cfg: ExperimentConfig, base: ExperimentConfig) -> str | None:
        """Why a row with `cfg` does not stop and score as the base (`base`) does, or None."""
        for key in STOP_KEYS:
            mine, theirs = getattr(cfg.train, key), getattr(base.train, key)
            if not same_value(f"train.{key}", mine, theirs) and not _idle(key, cfg.train, base.train):
                return f"train.{key}={_show(mine)} differs from the base's {_show(theirs)}"
        return self._weights_problem(cfg)

    def _weights_problem(self, cfg: ExperimentConfig) -> str | None:
        if weights(cfg.train) != self.weights:
            k = 0 if self.weights == "final" else int(self.weights.split("-")[1])
            return f"train.final_average={cfg.train.final_average} but weights: {self.weights} needs {k}"
        return None

    def describe(self) -> str:
        return f"stop: {self.stop}, weights: {self.weights}" + (f" (except {', '.join(self.exempt)})" if self.exempt else "")


# A rule's settings that end nothing while the rule is off (in the row and the base alike).
IDLE_UNLESS = {"converge_tol": "converge_window", "patience": "early_stop_metric", "min_delta": "early_stop_metric"}


def _idle(key: str, mine, theirs) -> bool:
    rule = IDLE_UNLESS.get(key)
    return rule is not None and not getattr(mine, rule) and not getattr(theirs, rule)


def _show(value) -> str:
    return f"{value:g}" if isinstance(value, float) else repr(value)


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
        if row == "base":
            raise ValueError("basis.except cannot list 'base': every row is compared with it")
    return Basis(stop, weights, tuple(exempt))

"""When each member of a group stops on its own: the convergence rule, early stopping and divergence, judged per member
on its own metrics (ablate.run.stopping's rules for one run). A stopped member is frozen (MemberAdam.freeze: its
weights, moments and step count stay as they are), which costs a frozen member's share of the step but keeps every
batch the same shape; the budgets every member shares (max_steps, max_time, max_flops) stay the group's StopRules'.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ablate.config import TrainConfig
from ablate.run.stopping import EarlyStopping, convergence_improvement

DIVERGED = "diverged"


class MemberStops:
    """Each member's validation history and rule state; `reason[k]` is None while member k trains."""

    def __init__(self, t: TrainConfig, members: int):
        self.window, self.tol = t.converge_window, t.converge_tol
        self.early = [EarlyStopping(t.early_stop_metric, t.patience, t.min_delta) if t.early_stop_metric else None for _ in range(members)]
        self.ppl: list[list[float]] = [[] for _ in range(members)]
        self.reason: list[str | None] = [None] * members
        self.why: list[str] = [""] * members  # a diverged member's message, as an ordinary run's NaN guard words it
        # What a member had spent when it stopped (its share of the group's FLOPs, the wall time): its summary reports
        # these, as a run stopped there would, not the group's totals. `meter` (set by the group) reads them.
        self.spent: list[dict | None] = [None] * members
        self.meter: Callable[[], dict] | None = None

    @property
    def all_stopped(self) -> bool:
        return all(r is not None for r in self.reason)

    def stop(self, k: int, reason: str) -> None:
        if self.reason[k] is None:
            self.reason[k] = reason
            self._mark(k)

    def diverge(self, k: int, why: str) -> None:
        if self.reason[k] is None:
            self.reason[k], self.why[k] = DIVERGED, why
            self._mark(k)

    def _mark(self, k: int) -> None:
        if self.meter is not None:
            self.spent[k] = self.meter()

    def update(self, k: int, metrics: dict[str, float], step: int) -> str | None:
        """Member k's validation at `step`; the reason it stops now, if it does."""
        if self.reason[k] is not None:
            return None
        loss = metrics.get("val/loss", math.nan)
        if not math.isfinite(loss):
            self.diverge(k, f"val/loss is {loss} at step {step}; the last checkpoint is the last good one")
            return DIVERGED
        self.ppl[k].append(metrics["val/ppl"] if math.isfinite(metrics["val/ppl"]) else math.inf)
        early = self.early[k]
        if early is not None and early.metric in metrics:
            early.update(metrics[early.metric])
        if early is not None and early.done:
            self.stop(k, "early_stopping")
        elif self.window:
            improvement = convergence_improvement(self.ppl[k], self.window)
            if improvement is not None and improvement < self.tol:
                self.stop(k, "converged")
        return self.reason[k]

    def state_dict(self) -> dict:
        early = [None if e is None else {"best": e.best, "bad": e.bad} for e in self.early]
        return {"ppl": self.ppl, "reason": self.reason, "why": self.why, "early": early, "spent": self.spent}

    def load_state_dict(self, state: dict) -> None:
        self.ppl, self.reason, self.why = [list(p) for p in state["ppl"]], list(state["reason"]), list(state["why"])
        self.spent = list(state.get("spent") or [None] * len(self.reason))  # a checkpoint from before it kept them
        for e, saved in zip(self.early, state["early"]):
            if e is not None and saved is not None:
                e.best, e.bad = saved["best"], saved["bad"]

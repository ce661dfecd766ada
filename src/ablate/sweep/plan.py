"""What a sweep runs and when it is done: named rows of overrides (`variants`) or an Optuna `search`.

Everything that differs between the two lives in its plan (ablate.sweep.variants_plan, ablate.sweep.search_plan),
behind one interface (ablate.sweep.plan_base) the worker loop, the dry run and the file's validation call; nothing
else asks which kind a sweep is.
"""

from __future__ import annotations

from ablate.sweep.plan_base import MAX_RETRY, Plan, TrialSpec
from ablate.sweep.search_plan import Search
from ablate.sweep.spec import Sweep
from ablate.sweep.variants_plan import Variants

__all__ = ["MAX_RETRY", "Plan", "Search", "TrialSpec", "Variants", "plan_for"]


def plan_for(sweep: Sweep) -> Plan:
    return Variants(sweep) if sweep.variants else Search(sweep)

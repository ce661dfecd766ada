"""Each row against the base row on the same sentences (ablate.table.sentence_records): the paired bootstrap of each
metric (ablate.table.paired_bootstrap, seed noise included), one Holm correction over the rows of a metric (controls a
family of their own), each row's minimum detectable effect, and the seeds a target MDE would take.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ablate.table import detectable_effect, paired_bootstrap
from ablate.table.holm import holm
from ablate.table.replicates import replicate_index, replicate_name, schedule_pairs
from ablate.table.score_kinds import METRICS
from ablate.table.sentence_records import Evidence

# A row's test fields, tested or not (one CSV column each): `_tested` fills them, `no_test` leaves them None.
TEST_FIELDS = ("test_delta", "p", "p_holm", "mde", "test_low", "test_high", "se", "df", "seed_variance", "n_boot", "untested")


def paired_tests(
    rows: list,
    base,
    evidence: Evidence,
    n_boot: int = 1000,
    seed: int = 0,
    target_mde: float | None = None,
    controls: Mapping[str, object] | None = None,
) -> dict[str, dict[str, dict]]:
    """Per row (not base) and metric: Δ's paired-test p, Holm-adjusted p, interval, SE, df and MDE, or None fields
    with a reason (no records, or no variance: se 0 and no test); for BLEU with `target_mde`, the seeds that MDE
    would take (`detectable_effect.seeds_for_mde`), or why the row has no plan.

    One Holm correction over the tested rows of each metric; the MDE uses its strictest level, alpha / m. Controls
    (`ablate.table.controls`: row name -> the base runs it is compared with) are a family of their own.
    """
    controls = controls or {}
    out: dict[str, dict[str, dict]] = {row.name: {} for row in rows if row is not base}
    for metric in METRICS:
        tests, flat = {}, {}
        for row in rows:
            if row is base:
                continue
            other = controls.get(row.name, base)
            against, row_stats = _row_stats(other, evidence), _row_stats(row, evidence)
            if against is None or row_stats is None:
                continue
            pair = paired_bootstrap.paired_bleu_stats if metric == "bleu" else paired_bootstrap.paired_ppl_stats
            base_side, replicates, by_schedule = against[metric], (replicate_index(other.runs), replicate_index(row.runs)), False
            if pairs := schedule_pairs(row.runs, other.runs):  # groups on one schedule, paired: its shift cancels
                row_index, base_index = pairs
                base_side = [x for x, k in zip(base_side, base_index) if k is not None]
                replicates, by_schedule = ([k for k in base_index if k is not None], row_index), True
            t = pair(base_side, row_stats[metric], n_boot=n_boot, seed=seed, replicates=replicates, by_schedule=by_schedule)
            # No variance at all (every resample and seed gives the same Δ): a "p" and "MDE" would be artefacts of se = 0.
            (flat if t.se == 0.0 else tests)[row.name] = t
        adjusted, family_size = {}, {}
        for family in ([n for n in tests if n not in controls], [n for n in tests if n in controls]):
            adjusted.update(zip(family, holm([tests[n].p_value for n in family])))
            family_size.update(dict.fromkeys(family, len(family)))
        for name in out:
            row, against, t = next(r for r in rows if r.name == name), controls.get(name, base), tests.get(name)
            if t is None:
                why = _no_variance(row, against, metric, flat[name].delta) if name in flat else _why_untested(name, rows, against, evidence)
                fields = no_test(why) | ({"se": 0.0} if name in flat else {})
            else:
                fields = _tested(t, adjusted[name], family_size[name])
            plan, skipped = None, None
            if metric == "bleu" and target_mde:
                if name in controls:
                    skipped = "a control, compared with the base's runs of its seeds"
                elif t is None:
                    skipped = "no paired test"
                elif t.noise is None:
                    skipped = "one seed (or one member group) in the row or in base, so no seed variance measured to plan from"
                else:
                    plan = detectable_effect.seeds_for_mde(t.noise, target_mde, m=family_size[name])
            out[name][metric] = fields | _plan_fields(plan, skipped, replicate_name(row.runs))
    return out


def _tested(t: paired_bootstrap.PairedTest, p_holm: float, m: int) -> dict:
    """A paired test's fields; the MDE at Holm's strictest level over its family of m rows."""
    fields = {
        # the test's own Δ: the Welch Δ's, except paired by schedule, where it is over the base groups on the row's
        # schedules only; the verdict, the terminal's Δ and the plot read it with the test's interval
        "test_delta": t.delta,
        "p": t.p_value,
        "p_holm": p_holm,
        "mde": detectable_effect.mde(t.se, m=m, df=t.df),
        "test_low": t.low,
        "test_high": t.high,
        "se": t.se,
        "df": None if math.isinf(t.df) else t.df,  # None: no seed part, or seeds that all scored alike
        "seed_variance": t.seed_variance,
        "n_boot": t.n_boot,
        "untested": None,
    }
    assert tuple(fields) == TEST_FIELDS  # a row without a test has the same columns (no_test)
    return fields


def _no_variance(row, against, metric: str, delta: float) -> str:
    """Why a row with a zero-variance paired test has none: every run scoring alike (a model that learned nothing
    scores BLEU 0 everywhere), or the same Δ in every resample (the base's own outputs)."""
    scores = {getattr(r, metric) for r in [*row.runs, *against.runs]}
    if len(scores) == 1:
        return f"every run of '{row.name}' and of '{against.name}' scores {next(iter(scores)):.2f} {metric.upper()}: no variance, no test"
    return f"'{row.name}' is {delta:+.2f} {metric.upper()} from '{against.name}' in every resample of sentences and seeds: no variance, no test"


def _row_stats(row, evidence: Evidence) -> dict[str, list[np.ndarray]] | None:
    """Each metric's per-seed sentence statistics of a row, or None unless every one of its runs has a record."""
    per = [evidence.per_run.get(run.source) for run in row.runs]
    if not per or any(p is None for p in per):
        return None
    return {m: [p[m] for p in per] for m in METRICS}


def no_test(reason: str | None = None) -> dict:
    """The test fields of a row without a test (`reason` says why; None for the base row)."""
    return {**dict.fromkeys(TEST_FIELDS), "untested": reason, **_plan_fields(None)}


def _plan_fields(plan: detectable_effect.SeedPlan | None, skipped: str | None = None, unit: str = "seeds") -> dict:
    """A seed plan as flat fields (one CSV column each): the MDE aimed at, the replicates it takes and what one is
    ("seeds", "groups of 4": `replicates.replicate_name`), the sentences' floor; or, for a row the plan leaves out,
    why (`skipped`)."""
    if plan is None:
        return {"plan_mde": None, "plan_seeds": None, "plan_unit": None, "mde_floor": None, "plan_skipped": skipped}
    return {"plan_mde": plan.target, "plan_seeds": plan.seeds, "plan_unit": unit, "mde_floor": plan.floor, "plan_skipped": None}


def _why_untested(name: str, rows: list, base, evidence: Evidence) -> str:
    row = next(r for r in rows if r.name == name)
    lacking = [r for r in (base, row) if _row_stats(r, evidence) is None]
    return " and ".join(
        f"{len([x for x in r.runs if x.source not in evidence.per_run])} of {len(r.runs)} runs of "
        f"'{r.name}' saved no eval/{evidence.split}.json"
        for r in lacking
    )

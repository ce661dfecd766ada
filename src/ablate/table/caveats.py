"""The caveats `ablate table` prints under a table, where its numbers need a reader's care: runs left out, rows some
of whose seeds diverged, seed intervals cut at a score's range or with no spread at all, how each row was tested (no
test, sentence noise only, a borrowed seed variance, paired by schedule), controls, rows stopped by a limit before their convergence rule was met,
and rows whose seeds trained as members of one model (`ablate.table.compare` gathers them into the table's notes)."""

from __future__ import annotations

from ablate.table.replicates import group_of
from ablate.table.score_kinds import METRICS, SCORES

LIMITS = ("max_steps", "max_epochs", "max_time", "max_flops")  # stop reasons that are not a rule's verdict on the run
LABELS = {key: m.label for key, m in SCORES.items()}  # the scores with a seed interval, as notes name them


def skipped_runs(skipped: dict[str, str], what: str = "W&B run", diverged: list[str] = ()) -> list[str]:
    """The runs the loader left out, each with why, so a missing seed is never silent; and the rows that diverged."""
    out = []
    if skipped:
        runs = f"{len(skipped)} {what}" + ("" if len(skipped) == 1 else "s")
        out.append(f"Left out {runs}: " + "; ".join(f"{run} ({why})" for run, why in skipped.items()) + ".")
    if diverged:
        out.append(
            f"Diverged, no run finished: {', '.join(diverged)}; in the table as 'diverged', without scores, and left out of "
            "the Holm correction, the verdict counts and Spearman's rho."
        )
    return out


def partly_diverged(rows: dict[str, list], finished: dict[str, int]) -> list[str]:
    """Rows scored on the seeds that trained while others diverged: their mean and verdict are the lucky seeds'."""
    out = []
    for row, seeds in rows.items():
        if row in finished:
            named = ", ".join("?" if s is None else str(s) for s in seeds)
            out.append(
                f"Row {row}: {len(seeds)} of its {len(seeds) + finished[row]} seeds diverged (seed {named}); its scores, "
                "interval and verdict are of the seeds that finished, so they say how it does when it trains, not how often it does."
            )
    return out


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def edges(lines: list[dict]) -> list[str]:
    """Seed intervals cut at the score's range, and rows whose seeds all scored the same (no interval)."""
    out = []
    cut = [f"{ln['row']} {_and([LABELS[m] for m in LABELS if ln[m]['clipped']])}" for ln in lines if any(ln[m]["clipped"] for m in LABELS)]
    if cut:
        out.append(
            f"Seed intervals cut at the metric's range (BLEU 0-100, PPL >= 1) where the t interval reached past it: {', '.join(cut)}; "
            "cutting loses no coverage, but scores this near a bound are skewed, so read them as rough."
        )
    flat = [f"{ln['row']} {LABELS[m]} {ln[m]['mean']:.2f}" for ln in lines for m in LABELS if ln[m]["n"] > 1 and ln[m]["sd"] == 0.0]
    if flat:
        out.append(f"No spread over seeds (every run, or member group, the same score, so no interval): {', '.join(flat)}.")
    return out


def capped(rows: list) -> list[str]:
    """Rows whose runs had the convergence rule on and ran into a limit first, e.g. "D-drop0.2 (2 of 3 runs, by
    max_steps; val/ppl still 2.9-3.6% better over the rule's window)": a study "to convergence" compares them off it,
    whether the limit was a cap or a budget (a study "equal compute or converged" still learns which rows converged)."""
    out = []
    for row in rows:
        capped = [r for r in row.runs if (r.config.get("train.converge_window") or 0) > 0 and r.stop_reason in LIMITS]
        if not capped:
            continue
        gains = sorted(r.improving * 100 for r in capped if r.improving is not None)
        still = ""
        if gains:
            low, high = f"{gains[0]:.1f}", f"{gains[-1]:.1f}"
            still = f"; val/ppl still {low if low == high else f'{low}-{high}'}% better over the rule's window"
        by = ", ".join(sorted({r.stop_reason for r in capped}))
        out.append(f"{row.name} ({len(capped)} of {len(row.runs)} runs, by {by}{still})")
    return out


def member_groups(rows: list) -> list[str]:
    """Rows with seeds trained as members of one model (members.size > 1), e.g. "base (12 of 12 seeds in 1 group)": a
    group's members share its length schedule and spread less than independent runs (docs/members.md)."""
    out = []
    for row in rows:
        grouped = [r for r in row.runs if group_of(r) is not None]
        if grouped:
            groups = len({group_of(r) for r in grouped})
            out.append(f"{row.name} ({len(grouped)} of {len(row.runs)} seeds in {groups} group{'' if groups == 1 else 's'})")
    return out


def member_groups_note(grouped: list[str]) -> str:
    """The note on rows whose seeds trained as members (`member_groups`): how `ablate table` counted them."""
    return (
        f"Seeds trained as members of one model: {'; '.join(grouped)}. A group's members share its length schedule and "
        "spread less than independent runs (measured: docs/members.md), so each group counts once, by its members' "
        "mean, in these rows' intervals, Δ and paired tests (ablate.table.replicates): a row in one group has no seed "
        "interval, and its test takes its seed variance from base or, with base in one group too, has none."
    )


def borrowed_from_groups(rows: list, base, controls: dict, borrowed: list[str]) -> str:
    """Of the rows whose test borrowed one side's seed variance from the other (`borrowed`), those whose one lone run
    borrowed it from member groups: a group's mean varies less than one run's score, so their test is narrower still."""
    by_name = {row.name: row for row in rows}
    named = []
    for name in borrowed:
        sides = [by_name[name].runs, controls.get(name, base).runs]
        lone = [len(runs) == 1 and group_of(runs[0]) is None for runs in sides]
        grouped = [any(group_of(r) for r in runs) for runs in sides]
        if (lone[0] and grouped[1]) or (lone[1] and grouped[0]):
            named.append(name)
    if not named:
        return ""
    return (
        f" {', '.join(named)} borrow it from member groups, whose means vary less than one run's score, so read theirs as narrower still."
    )


def testing_notes(table, others: list[dict], with_records: int) -> list[str]:
    """How the rows `others` were tested, in the order the notes give it: rows without a paired test, the rows at the
    edges of what a score can be (`edges`), then rows tested on sentence noise only, with a seed variance borrowed from
    the other side, or paired by schedule."""
    notes = []
    untested = [ln["row"] for ln in others if any(ln[m]["untested"] for m in METRICS)]
    if untested and with_records:  # with none, the scores line says why no row is tested
        reasons = sorted({ln[m]["untested"] for ln in others for m in METRICS if ln[m]["untested"]})
        notes.append(f"No paired test ('-') for {', '.join(untested)}: " + "; ".join(reasons) + ".")
    notes += edges(table.lines)
    kinds = {ln["row"]: {ln[m]["seed_variance"] for m in METRICS} for ln in others}  # a row untested on BLEU may be tested on PPL
    tested_on = {kind: [row for row, its in kinds.items() if kind in its] for kind in ("none", "borrowed", "paired")}
    if tested_on["none"]:  # one seed in the row and in base: no seed variance to measure, so the test cannot hold it
        notes.append(
            f"Tested on sentence noise only (one seed, or one member group, there and in base, so no seed variance to add): {', '.join(tested_on['none'])}; "
            "read their p and interval as too narrow."
        )
    if tested_on["borrowed"]:  # the one-seed side is assumed to vary across seeds as the other does
        notes.append(
            f"One seed (or one member group) in the row or in base, so that side's seed variance is assumed to be the other's: {', '.join(tested_on['borrowed'])}; "
            "where the ablation widens the seed spread, their p and interval are too narrow (docs/table.md: the paired test)."
            + borrowed_from_groups(table.rows, table.base, table.controls, tested_on["borrowed"])
        )
    if tested_on["paired"]:  # member groups of the row and the base on the same schedules (ablate.table.replicates)
        notes.append(
            f"Tested paired by schedule: {', '.join(tested_on['paired'])}; their member groups and the base's walked the "
            "same length schedules, whose shift cancels in each group's difference (docs/members.md)."
        )
    return notes


def limit_notes(rows: list, controls: dict) -> list[str]:
    """What bounds the rows' reading: the controls, each tested apart against the base's runs of its own seeds, and
    rows a limit stopped before the convergence rule."""
    notes = []
    if controls:
        against = "; ".join(f"{name} against the base's {_runs_of(c['base_seeds'])}" for name, c in controls.items())
        notes.append(
            f"Controls (base-... rows, the base trained otherwise): {against}. Each is compared with the base's runs of its "
            "own seeds and tested apart from the other rows (a Holm correction of their own), with no verdict against the paper."
        )
    if stopped := capped(rows):
        notes.append(
            f"Stopped by a limit ({', '.join(LIMITS)}) before the convergence rule was met, so not at convergence and may "
            f"still move: {'; '.join(stopped)}."
        )
    return notes


def _runs_of(seeds: list) -> str:
    """ "run of seed 2", "runs of seeds 1, 2" """
    return ("run of seed " if len(seeds) == 1 else "runs of seeds ") + ", ".join(map(str, seeds))

"""The lines under `ablate table`'s table, in every rendering: what the scores are on, the base row's
configuration, the noise floor, what the study cost, the seeds an MDE target would take, how to read the columns,
whether seeds share luck across rows, whether runs that trained longer scored better, and the agreement with the paper."""

from __future__ import annotations

from ablate.table import detectable_effect, verdicts
from ablate.table.compare import Table
from ablate.table.replicates import replicate_index, replicate_name
from ablate.table.score_kinds import METRICS
from ablate.table.study_statistics import STUDY_STATISTICS
from ablate.table.wording import count as _count


def with_interval(mean, low, high, spec: str = ".2f") -> str:
    """ "31.00 [29.12, 32.88]"; the mean alone where there is no interval (one seed)."""
    if mean is None:
        return "-"
    return format(mean, spec) if low is None else f"{mean:{spec}} [{low:{spec}}, {high:{spec}}]"


def scores_line(s: dict) -> str:
    """Which split and sentences the scores are on, from which checkpoint, and the runs' comparison basis."""
    if s["runs_with_eval_records"]:
        where = (
            f"{s['split']} split of {s['dataset']}, {s['sentences']} sentences ({s['subset']}), checkpoint "
            f"{', '.join(s['checkpoints'])}; per-sentence records (eval/{s['split']}.json) of "
            f"{s['runs_with_eval_records']} of {s['runs']} runs"
        )
        if s["runs_with_eval_records"] < s["runs"]:
            where += ", the summaries' last validation (val/bleu, val/ppl) for the rest"
    else:
        where = (
            f"{s['split']} split, the summaries' last validation (val/bleu, val/ppl); sentences not recorded "
            f"(no run saved eval/{s['split']}.json, so no paired tests)"
        )
    signature = f" BLEU: sacreBLEU {s['bleu_signature']}." if s.get("bleu_signature") else ""
    declared = f" (the sweep file states {s['declared_basis']})" if s.get("declared_basis") else ""
    return f"Scores: {where}. Comparison basis{declared}: {s['basis']}.{signature}"


def base_line(s: dict) -> str:
    """The base row's configuration, which a scaled-down study differs from the paper's in (d_model 64, say)."""
    shown = ", ".join(f"{h} {v}" for h, v in s["base_config"].items() if v not in (None, ""))
    return f"Base row: {shown}; a blank config cell in another row is as here."


def noise_line(s: dict) -> str:
    """The base row's spread over seeds; where its seeds trained in member groups, over replicates (a group's mean
    each: `ablate.table.replicates`)."""
    floor = s["noise_floor"]
    grouped = any((floor[m].get("runs") or 0) > (floor[m]["n"] or 0) for m in METRICS)  # a replicate holds several runs
    unit = "replicate" if grouped else "seed"
    parts = []
    for m in METRICS:
        nf = s["noise_floor"][m]
        if nf["sd"] is None:
            parts.append(f"{METRICS[m].label} n/a ({_count(nf['n'], unit)}: no spread to estimate)")
        elif nf["sd"] == 0.0:
            parts.append(f"{METRICS[m].label} no spread (every {unit} scores {nf['mean']:.2f})")
        else:
            parts.append(f"{METRICS[m].label} sd {nf['sd']:.2f}, {with_interval(nf['mean'], nf['low'], nf['high'])}")
    over = f"{s['base_seeds']}, a group counted once by its members' mean" if grouped else _count(s["noise_floor"]["bleu"]["n"], "seed")
    return f"Noise floor (base row over {over}): " + "; ".join(parts) + "."


def plan_lines(table: Table) -> list[str]:
    """How many seeds each tested row would need for the MDE the study aims at (`detectable_effect.seeds_for_mde`) and, for each
    row the plan leaves out, why; no line where no ablation has a test (the scores line or the untested note says why)."""
    target = table.summary["bootstrap"].get("target_mde")
    others = [ln for ln in table.lines if ln["row"] != "base"]
    if not target or not any(ln["bleu"]["p"] is not None and not ln["control"] for ln in others):
        return []
    planned = [ln for ln in others if ln["bleu"]["plan_mde"] is not None]
    left: dict[str, list[str]] = {}
    for ln in others:
        if ln["bleu"]["plan_skipped"]:
            left.setdefault(ln["bleu"]["plan_skipped"], []).append(ln["row"])

    def need(ln: dict) -> str:
        b = ln["bleu"]
        if b["plan_seeds"] is not None:
            unit = b.get("plan_unit") or "seeds"
            return f"{ln['row']} {b['plan_seeds']}" + ("" if unit == "seeds" else f" {unit}")
        beyond = f"its {table.summary['sentences']} sentences alone allow {b['mde_floor']:.2f}"
        more = f"{ln['row']} more than {detectable_effect.MOST_SEEDS}"
        return f"{more} ({beyond})" if b["mde_floor"] > b["plan_mde"] else more

    base_unit = replicate_name(table.base.runs)
    base_seeds = f"{len(set(replicate_index(table.base.runs)))}" + ("" if base_unit == "seeds" else f" {base_unit}")
    tested = sum(ln["bleu"]["p"] is not None and not ln["control"] for ln in table.lines)
    not_planned = "; ".join(f"{', '.join(rows)} ({why})" for why, rows in left.items())
    return [
        f"Seeds for an MDE of {target:g} BLEU, per row (the base keeping its {base_seeds} where "
        f"it has more; Holm over the {_count(tested, 'tested row')}), at the noise each test measured, so as rough as "
        f"its few seeds: {', '.join(map(need, planned)) or 'none'}" + (f"; not planned: {not_planned}" if left else "") + "."
    ]


def reading_lines(s: dict) -> list[str]:
    b = s["bootstrap"]
    controls = bool(s.get("controls"))  # said only where there are some (`ablate.table.controls`)
    # Said only where some row's seeds trained as members (`ablate.table.replicates`).
    grouped = " (a member group's seeds once, by their mean)" if s.get("member_groups") else ""
    return [
        f"[95% CI]: Student-t interval over seeds{grouped}; Δ: row minus base ("
        + ("a control's: minus the base's runs of its seeds; " if controls else "")
        + f"ΔPPL < 0: the row is better) with a Welch interval over seeds{grouped}; seeds: runs in the row, one per seed.",
        f"p: paired test against base on the same sentences (sentence noise from {b['resamples']} bootstrap resamples, "
        f"seed noise from the seeds{grouped}, t with Welch-Satterthwaite df; two-sided); paired CI: its 95% interval of Δ, the one "
        "the verdict reads (per row: not corrected); p Holm: corrected over all rows of the metric"
        + (" but the controls, which are corrected apart" if controls else "")
        + f"; MDE: smallest |Δ| found with {b['power']:.0%} power at the corrected level were the measured SE exact (a lower "
        "bound: with 3 seeds a row the effect found that often is 1.1-1.6x it); '-': no test.",
    ]


def notes(table: Table) -> list[str]:
    s = table.summary
    cost = s.get("training_hours")
    spent = [f"Training time: {cost['sum']:.1f} h summed over {_count(cost['runs'], 'run')}."] if cost else []
    return [
        scores_line(s),
        base_line(s),
        noise_line(s),
        *spent,
        *plan_lines(table),
        *reading_lines(s),
        *(line for statistic in STUDY_STATISTICS for line in statistic.lines(s)),
        *s["notes"],
    ]


def agreement_rows(s: dict) -> list[list[str]]:
    """The verdict counts, header first: per group and overall, per metric ("inconclusive (one seed)" only in a
    study that has such a row)."""
    shown = [v for v in verdicts.VERDICTS if v != verdicts.ONE_SEED or _one_seed_verdicts(s)]
    rows = [["group", "metric", *shown]]
    for m in METRICS:
        counts = s["verdicts"][m]
        for g, c in [*counts["by_group"].items(), ("all", counts["overall"])]:
            rows.append([g, METRICS[m].label, *(str(c[v]) for v in shown)])
    return rows


def _one_seed_verdicts(s: dict) -> bool:
    return any(s["verdicts"][m]["overall"][verdicts.ONE_SEED] for m in METRICS)


def agreement_notes(s: dict) -> list[str]:
    """Spearman's rank correlation with the paper, and the verdict rule."""

    def rho(r: dict) -> str:
        if r["rho"] is None:
            return "n/a (fewer than 3 rows or constant ranks)"
        return f"{r['rho']:+.2f} [{r['low']:+.2f}, {r['high']:+.2f}]"

    sp = s["spearman"]
    return [
        "Spearman's rank correlation of our row means with the paper's (95% interval from resampling rows): "
        + "; ".join(f"{METRICS[m].label} over {_count(sp[m]['rows'], 'row')}: {rho(sp[m])}" for m in METRICS)
        + ".",
        f"Verdict: agree/disagree by the sign of Δ vs the paper's, only when p Holm <= {s['bootstrap']['alpha']} and the "
        f"paired test's interval excludes 0; otherwise inconclusive. 'paper: no change': the paper's Δ is 0 at its printed "
        f"precision (|Δ| < {METRICS['bleu'].tie} BLEU, < {METRICS['ppl'].tie} PPL); '; ours differs' where ours is significant "
        "by the same test."
        + (
            " 'inconclusive (one seed)': significant against sentence noise alone, with one seed (or member group) in "
            "the row and in base, so one seed's luck cannot be told from an effect: no sign is read."
            if _one_seed_verdicts(s)
            else ""
        ),
    ]

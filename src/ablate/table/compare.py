"""Rows of a study compared with its base row and with the paper's Table 3: mean and 95% interval over seeds, Δ
against base with a Welch interval, the paired test of `row_tests`, a verdict per row against the paper's sign,
verdict counts, rank correlation with the paper, and the base row's seed noise (Table 3, `ablate.config.paper`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ablate.config.paper import BASE_VARIANTS, TABLE3, PaperRow, row_group, unlike
from ablate.config.trained import trained_differences
from ablate.table import rank_correlation, replicates, seed_intervals, verdicts
from ablate.table.caveats import limit_notes, member_groups, member_groups_note, partly_diverged, skipped_runs, testing_notes
from ablate.table.controls import find_controls, seeds_of
from ablate.table.finished_runs import Run, check_rows, effective_config, require_base
from ablate.table.paired_bootstrap import SENTENCES_ONLY
from ablate.table.row_tests import no_test, paired_tests
from ablate.table.score_kinds import METRICS, SCORES
from ablate.table.sentence_records import Evidence
from ablate.table.study_statistics import STUDY_STATISTICS

# Table 3's configuration columns: header -> flattened config key.
COLUMNS = {
    "N": "model.enc_layers",
    "d_model": "model.d_model",
    "d_ff": "model.d_ff",
    "h": "model.heads",
    "d_k": "model.d_k",
    "d_v": "model.d_v",
    "P_drop": "model.dropout",
    "eps_ls": "train.label_smoothing",
    "pos": "model.positional",
    "attn": "model.attention",
    "scale": "model.attention_scaling",
    "kv": "model.kv_heads",
    "steps": "train.max_steps",
}


@dataclass
class Row:
    name: str
    group: str
    runs: list[Run] = field(default_factory=list)
    paper: PaperRow | None = None
    unlike_paper: str | None = None  # why a row named as a paper row is not compared with it (`paper_row`)

    def values(self, attr: str) -> list[float]:
        return [getattr(r, attr) for r in self.runs if getattr(r, attr) is not None and math.isfinite(getattr(r, attr))]

    def mean(self, attr: str) -> float | None:
        v = self.values(attr)
        return sum(v) / len(v) if v else None

    def replicate_values(self, attr: str) -> list[float]:
        """One score per replicate: a run trained alone, or a member group by its members' mean (`replicates`)."""
        return replicates.replicate_values(self.runs, attr)

    def interval(self, attr: str) -> dict:
        """Mean, 95% Student-t interval (cut to the score's range: `clipped`), sd and n over replicates (seeds, a
        member group counting once), and the runs scored; bounds and sd are None with one replicate, the bounds with
        replicates all alike, all None with none."""
        v = self.replicate_values(attr)
        iv = seed_intervals.t_interval(v, bounds=SCORES[attr].bounds) if v else seed_intervals.Interval(None, None, None, 0, None)
        runs = len(self.values(attr))
        return {"mean": iv.mean, "low": iv.low, "high": iv.high, "sd": iv.sd, "n": iv.n, "runs": runs, "clipped": iv.clipped}


def stop_reasons(row: Row) -> str:
    """Why the row's runs stopped, e.g. "converged" (all of them) or "converged 2, max_steps 1"; "" if unrecorded."""
    counts: dict[str, int] = {}
    for run in row.runs:
        if run.stop_reason:
            counts[run.stop_reason] = counts.get(run.stop_reason, 0) + 1
    if len(counts) == 1 and sum(counts.values()) == len(row.runs):
        return next(iter(counts))
    return ", ".join(f"{reason} {n}" for reason, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def build_rows(runs: list[Run]) -> list[Row]:
    check_rows(runs)
    by_name: dict[str, Row] = {}
    for run in runs:
        by_name.setdefault(run.row, Row(run.row, row_group(run.row))).runs.append(run)
    base = by_name.get("base")
    for row in by_name.values():
        row.paper, row.unlike_paper = paper_row(row.name, row.runs[0].config, base.runs[0].config if base else None)
    # Table 3's order: groups as the paper has them (base's variants right after base, groups it lacks last, by
    # name), and within a group the paper's rows in its order before ours by name.
    return sorted(by_name.values(), key=lambda r: order_key(r.name, r.group))


def paper_row(name: str, config: dict, base_config: dict | None) -> tuple[PaperRow | None, str | None]:
    """The paper's row a row is compared with, by its name, unless what it changes against the base is not what that
    row changes: then none, and why (`ablate.config.paper.unlike`)."""
    paper = next((p for p in TABLE3 if p.name == name), None)
    if paper is None or base_config is None or name == "base":
        return paper, None
    why = unlike(paper, set(trained_differences(base_config, config)))
    return (None, f"row '{name}' is not compared with the paper's row of its name: it {why}") if why else (paper, None)


def order_key(name: str, group: str) -> tuple:
    """Where a row goes in Table 3's order (see build_rows)."""
    groups = list(dict.fromkeys(p.group for p in TABLE3))
    groups.insert(groups.index("base") + 1, BASE_VARIANTS)
    order = {p.name: i for i, p in enumerate(TABLE3)}
    known = group in groups
    return (not known, groups.index(group) if known else 0, "" if known else group, order.get(name, len(order)), name)


@dataclass
class Table:
    rows: list[Row]
    base: Row
    lines: list[dict]  # one per row: config cells, and per metric a dict of numbers (see `_metric`)
    summary: dict  # scores' split and sentences, basis, noise floor, verdict counts, Spearman, bootstrap settings, notes
    controls: dict = field(default_factory=dict)  # control row name -> the base runs it is compared with (`controls`)

    @property
    def compares_with_paper(self) -> bool:
        """Whether any row besides base is a row of the paper's Table 3 (a study of other variants is not)."""
        return any(row.paper is not None for row in self.rows if row is not self.base)


def make_table(
    runs: list[Run], evidence: Evidence | None = None, n_boot: int = 1000, seed: int = 0, target_mde: float | None = 1.0
) -> Table:
    rows = build_rows(runs)
    require_base(r.name for r in rows)
    base = next(r for r in rows if r.name == "base")
    evidence = evidence or Evidence("valid", runs=len(runs))
    controls = find_controls(rows, base)
    tests = paired_tests(rows, base, evidence, n_boot, seed, target_mde, controls)
    base_cfg = base.runs[0].config
    lines = []
    for row in rows:
        cfg = row.runs[0].config
        line = {"row": row.name, "group": row.group, "seeds": len(row.runs)}
        for col, key in COLUMNS.items():
            # The base row states its values, as Table 3's does; the others only what they change ("" = as base).
            line[col] = cfg.get(key) if row is base else ("" if cfg.get(key) == base_cfg.get(key) else cfg.get(key))
        for m in ("params", "tokens_per_s", "step_ms", "epochs", "flops", "wall_seconds"):
            line[m] = row.mean(m)
        line["updates"] = row.mean("steps")  # trained; the "steps" column is the config's max_steps
        line["stopped"] = stop_reasons(row)
        line["long_bleu"] = row.interval("long_bleu")
        line["control"] = row.name in controls
        for m in METRICS:
            line[m] = _metric(row, base, m, tests.get(row.name, {}).get(m), controls.get(row.name))
        line["paper_params"] = row.paper.params_m if row.paper else None
        line |= {"unlike_paper": row.unlike_paper} if row.unlike_paper else {}
        line["diverged"] = None
        lines.append(line)
    lines += [_diverged_line(name, why, config, base) for name, (why, config) in evidence.diverged.items()]
    lines.sort(key=lambda ln: order_key(ln["row"], ln["group"]))
    table = Table(rows, base, lines, {}, controls)
    table.summary = _summary(table, evidence, n_boot, seed, target_mde)
    return table


def _diverged_line(name: str, why: str, config: dict, base: Row) -> dict:
    """A row none of whose runs finished, all diverged: its configuration, no scores, verdict 'diverged' (no test)."""
    config, base_cfg = effective_config(config), base.runs[0].config
    row = Row(name, row_group(name))
    row.paper, row.unlike_paper = paper_row(name, config, base_cfg)
    line = {
        "row": name,
        "group": row.group,
        "seeds": 0,
        **{c: "" if config.get(k) == base_cfg.get(k) else config.get(k) for c, k in COLUMNS.items()},
    }
    line |= dict.fromkeys(("params", "tokens_per_s", "step_ms", "epochs", "flops", "wall_seconds", "updates"))
    line |= {"stopped": "diverged", "long_bleu": row.interval("long_bleu"), "control": False}
    for m in METRICS:
        line[m] = _metric(row, base, m, no_test(why)) | {"verdict": "diverged"}  # why: "diverged: ..."
    line |= {"unlike_paper": row.unlike_paper} if row.unlike_paper else {}
    return line | {"paper_params": row.paper.params_m if row.paper else None, "diverged": why}


def _metric(row: Row, base: Row, metric: str, test: dict | None, against: Row | None = None) -> dict:
    """One metric of one row: seed interval, Δ against base (Welch), the paired test, the paper and the verdict; a
    control (`against`: the base runs it is compared with) has no verdict."""
    out = row.interval(metric)
    ours, theirs = row.replicate_values(metric), (against or base).replicate_values(metric)
    diff = (
        seed_intervals.welch_interval(ours, theirs)
        if row is not base and ours and theirs
        else seed_intervals.Difference(None, None, None, None, None)
    )
    out.update(delta=diff.delta, delta_low=diff.low, delta_high=diff.high)
    out.update(test or no_test())
    paper_base = next(p for p in TABLE3 if p.name == "base")
    out["paper"] = getattr(row.paper, metric) if row.paper else None
    digits = SCORES[metric].digits  # the paper's printed precision: its Δ is exact there (no float residue)
    out["paper_delta"] = round(getattr(row.paper, metric) - getattr(paper_base, metric), digits) if row.paper else None
    if row is base or against is not None:
        out["verdict"] = None
    else:
        tested = out["test_low"] is not None
        delta, interval = (out["test_delta"], (out["test_low"], out["test_high"])) if tested else (out["delta"], None)
        seed_noise = out["seed_variance"] != SENTENCES_ONLY
        out["verdict"] = verdicts.verdict(delta, out["p_holm"], out["paper_delta"], SCORES[metric].tie, interval, seed_noise=seed_noise)
    return out


def _training_hours(runs: list) -> dict | None:
    """What the study cost: training wall time summed over the runs that recorded it (None if none did)."""
    timed = [r.wall_seconds for r in runs if r.wall_seconds is not None]
    return {"sum": sum(timed) / 3600, "runs": len(timed)} if timed else None


def _recorded_basis(table: Table) -> str:
    """The basis the runs' summaries record; where rows differ, the rows off the most common one (a control trained
    for longer, say) are named beside theirs."""
    by_basis: dict[str, list[str]] = {}
    for row in table.rows:
        for basis in dict.fromkeys(str(r.summary.get("basis") or "not recorded") for r in row.runs):
            by_basis.setdefault(basis, []).append(row.name)
    if len(by_basis) == 1:
        return next(iter(by_basis))
    (common, _), *others = sorted(by_basis.items(), key=lambda kv: -len(kv[1]))
    return "; ".join([common] + [f"{basis} ({', '.join(rows)})" for basis, rows in others])


def _summary(table: Table, ev: Evidence, n_boot: int, seed: int, target_mde: float | None) -> dict:
    others = [ln for ln in table.lines if ln["row"] != "base" and not ln["diverged"]]  # diverged rows: the note says so
    base_line = next(ln for ln in table.lines if ln["row"] == "base")
    runs = [r for row in table.rows for r in row.runs]
    summary = {
        "split": ev.split,
        "dataset": ev.dataset,
        "sentences": ev.sentences,
        "bleu_signature": ev.bleu_signature,
        "subset": ev.subset,
        "checkpoints": ev.checkpoints,
        "runs": ev.runs,
        "runs_with_eval_records": ev.runs_with_records,
        "basis": _recorded_basis(table),
        "declared_basis": "; ".join(sorted({str(r.config["sweep.basis"]) for r in runs if r.config.get("sweep.basis")})) or None,
        "base_config": {col: base_line[col] for col in COLUMNS},
        "noise_floor": {m: {k: base_line[m][k] for k in ("mean", "low", "high", "sd", "n", "runs")} for m in METRICS},
        "base_seeds": replicates.seeds_in_groups(table.base.runs),  # "12 seeds in 3 groups": what the floor is over
        "bootstrap": {"resamples": n_boot, "seed": seed, "alpha": 0.05, "power": 0.8, "level": 0.95, "target_mde": target_mde or None},
        "skipped_runs": [{"run": run, "reason": why} for run, why in ev.skipped.items()],
        "notes": skipped_runs(ev.skipped, ev.skipped_what, list(ev.diverged)) + list(ev.notes),
        "training_hours": _training_hours(runs),
        "controls": _controls(table),
    }
    summary["notes"] += partly_diverged(ev.some_diverged, {ln["row"]: ln["seeds"] for ln in table.lines})
    summary["notes"] += testing_notes(table, others, ev.runs_with_records)
    for statistic in STUDY_STATISTICS:  # each its own entry of the summary, one value per metric
        summary[statistic.key] = {m: statistic.measure(table, m, seed) for m in METRICS}
    summary["notes"] += limit_notes(table.rows, summary["controls"])
    summary["notes"] += [line["unlike_paper"] for line in table.lines if line.get("unlike_paper")]
    summary["member_groups"] = member_groups(table.rows)
    if summary["member_groups"]:
        summary["notes"].append(member_groups_note(summary["member_groups"]))
    if table.compares_with_paper:
        summary["verdicts"] = {m: _counts([ln for ln in others if not ln["control"]], m) for m in METRICS}
        summary["spearman"] = {m: _spearman([ln for ln in table.lines if not ln["diverged"]], m, n_boot, seed) for m in METRICS}
    return summary


def _controls(table: Table) -> dict:
    """Per control: its seeds and the base's it is compared with (all of the base's where it lacks one of them)."""
    rows = {row.name: row for row in table.rows}
    return {name: {"seeds": seeds_of(rows[name]), "base_seeds": seeds_of(against)} for name, against in table.controls.items()}


def _counts(lines: list[dict], metric: str) -> dict:
    counted = verdicts.count_verdicts((ln["group"], ln[metric]["verdict"]) for ln in lines)
    return {"by_group": counted.by_group, "overall": counted.overall}


def _spearman(lines: list[dict], metric: str, n_boot: int, seed: int) -> dict:
    """Spearman's rho of our row means vs the paper's, with a 95% interval from resampling rows."""
    paired = [(ln[metric]["mean"], ln[metric]["paper"]) for ln in lines if ln[metric]["paper"] is not None and not ln["control"]]
    rho, low, high = rank_correlation.spearman_with_interval([o for o, _ in paired], [p for _, p in paired], n_boot=n_boot, seed=seed)
    return {"rho": rho, "low": low, "high": high, "rows": sum(o is not None for o, _ in paired)}

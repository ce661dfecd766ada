"""Paired significance of each row against the base row on the same sentences, from the runs' evaluation records
(`ablate.evaluation.records`): read and align them, score every run on the sentences all share, bootstrap each row against
base (seed noise included), one Holm correction over the rows of a metric, and each row's minimum detectable effect.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from ablate.evaluation.records import EvalFile, EvalFileError, eval_path, parse_eval, read_eval_file
from ablate.table import stats
from ablate.table.load import Run

METRICS = ("bleu", "ppl")


@dataclass
class Evidence:
    """What a study's evaluation records say: the split, the sentences scored, the checkpoints, and remarks."""

    split: str
    dataset: str | None = None
    sentences: int | None = None  # sentences every run with a record was scored on
    subset: str | None = None
    checkpoints: list[str] = field(default_factory=list)
    runs_with_records: int = 0
    bleu_signature: str | None = None  # sacreBLEU's, of the BLEU the table shows
    runs: int = 0
    notes: list[str] = field(default_factory=list)
    per_run: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # run.source -> {"bleu": (n, 10), "ppl": (n, 2)}
    skipped: dict[str, str] = field(default_factory=dict)  # runs left out -> why (`load.runs_from_wandb`, `left_out`)
    skipped_what: str = "W&B run"  # what those are, as the note names them
    diverged: dict[str, tuple[str, dict]] = field(default_factory=dict)  # row none of whose runs finished -> (why, config)


def _record(run: Run, split: str) -> EvalFile | None:
    """The run's record: RUN_DIR/eval/{split}.json, else its summary's `eval/{split}` (how W&B runs carry it)."""
    if run.run_dir is not None and eval_path(run.run_dir, split).exists():
        return read_eval_file(eval_path(run.run_dir, split), split)
    nested = run.summary.get("eval")
    data = run.summary.get(f"eval/{split}", nested.get(split) if isinstance(nested, dict) else None)
    return None if data is None else parse_eval(data, f"{run.source} (summary key eval/{split})", split)


def collect(runs: list[Run], split: str, evaluate: Callable[[Run], EvalFile] | None = None) -> Evidence:
    """Read every run's record, align them on common sentences and set each run's `bleu`/`ppl` to its scores there.

    A run without a record keeps its summary's scores, or with `evaluate` (the test split) gets one made for it.
    """
    records: dict[str, EvalFile] = {}
    for run in runs:
        rec = _record(run, split)
        if rec is None and evaluate is not None:
            rec = evaluate(run)
        if rec is not None:
            records[run.source] = rec
    ev = Evidence(split, runs=len(runs), runs_with_records=len(records))
    if not records:  # the summaries' BLEU, with the signatures they were scored with
        ev.bleu_signature = "; ".join(sorted({str(r.summary["bleu_signature"]) for r in runs if r.summary.get("bleu_signature")})) or None
        return ev
    bleu = {source: np.asarray(rec.sentence_bleu_stats(), dtype=np.int64).reshape(len(rec.indices), -1) for source, rec in records.items()}
    # Re-scored here from text with this sacreBLEU; a text-free record's statistics keep the signature they were made with.
    signatures = {source: stats.bleu_signature() if r.hypotheses is not None else r.bleu_signature for source, r in records.items()}
    _check_same_bleu(signatures)
    ev.bleu_signature = "; ".join(sorted(set(signatures.values())))
    common = _common_indices(records, bleu, ev)
    for run in runs:
        rec = records.get(run.source)
        if rec is None:
            continue
        keep = [i for i, idx in enumerate(rec.indices) if idx in common]
        ev.per_run[run.source] = {
            "bleu": bleu[run.source][keep],
            "ppl": stats.ppl_stats([rec.nll[i] for i in keep], [rec.tokens[i] for i in keep]),
        }
        run.bleu, run.ppl = stats.corpus_bleu(ev.per_run[run.source]["bleu"]), stats.corpus_ppl(ev.per_run[run.source]["ppl"])
    first = next(iter(records.values()))
    ev.dataset, ev.sentences = first.dataset, len(common)
    subsets = {r.subset for r in records.values()}
    aligned = len(subsets) == 1 and all(len(r.indices) == len(common) for r in records.values())
    ev.subset = next(iter(subsets)) if aligned else f"the {len(common)} sentences common to all runs"
    ev.checkpoints = sorted({r.checkpoint for r in records.values()})
    return ev


def _check_same_bleu(signatures: dict[str, str]) -> None:
    """Statistics of one BLEU only: a record scored with another tokeniser, casing or smoothing would compare as if
    the systems differed. sacreBLEU's version alone may differ (its statistics do not change with it)."""

    def metric(signature: str) -> str:
        return "|".join(p for p in signature.split("|") if not p.startswith("version:"))

    first, *rest = signatures.items()
    if other := next(((src, sig) for src, sig in rest if metric(sig) != metric(first[1])), None):
        raise EvalFileError(
            f"evaluation records scored with different BLEU: {first[0]} has {first[1]} but {other[0]} has {other[1]}; "
            "score every run with the same sacreBLEU settings"
        )


def _common_indices(records: dict[str, EvalFile], bleu: dict[str, np.ndarray], ev: Evidence) -> set[int]:
    """Sentences every record scored; records must agree on dataset and on each shared sentence's reference (its
    text where both records hold it, else its length in sacreBLEU's tokens)."""
    datasets = {r.dataset for r in records.values()}
    if len(datasets) > 1:
        raise EvalFileError(f"evaluation records of different datasets in one study: {sorted(datasets)}")
    common = set.intersection(*(set(r.indices) for r in records.values()))
    if not common:
        raise EvalFileError(f"the runs' eval/{ev.split} records share no sentence (indices do not overlap)")
    if any(len(r.indices) != len(common) for r in records.values()):
        low, high = min(len(r.indices) for r in records.values()), max(len(r.indices) for r in records.values())
        ev.notes.append(f"The runs scored different sentences ({low} to {high}); every score here is on the {len(common)} they share.")
    text: dict[int, tuple[str, str]] = {}
    length: dict[int, tuple[int, str]] = {}
    for source, r in records.items():
        for i, idx in enumerate(r.indices):
            if idx not in common:
                continue
            ref_len = int(bleu[source][i, 1])
            if length.setdefault(idx, (ref_len, r.source))[0] != ref_len:
                raise EvalFileError(f"{r.source}: the reference of sentence {idx} differs from {length[idx][1]}'s (its length)")
            if r.references is not None and text.setdefault(idx, (r.references[i], r.source))[0] != r.references[i]:
                raise EvalFileError(f"{r.source}: the reference of sentence {idx} differs from {text[idx][1]}'s")
    return common


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
    would take (`stats.seeds_for_mde`), or why the row has no plan.

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
            against, row_stats = _row_stats(controls.get(row.name, base), evidence), _row_stats(row, evidence)
            if against is None or row_stats is None:
                continue
            pair = stats.paired_bleu_stats if metric == "bleu" else stats.paired_ppl_stats
            t = pair(against[metric], row_stats[metric], n_boot=n_boot, seed=seed)
            # No variance at all (every resample and seed gives the same Δ): a "p" and "MDE" would be artefacts of se = 0.
            (flat if t.se == 0.0 else tests)[row.name] = t
        adjusted, family_size = {}, {}
        for family in ([n for n in tests if n not in controls], [n for n in tests if n in controls]):
            adjusted.update(zip(family, stats.holm([tests[n].p_value for n in family])))
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
                    skipped = "one seed in the row or in base, so no seed variance measured to plan from"
                else:
                    plan = stats.seeds_for_mde(t.noise, target_mde, m=family_size[name])
            out[name][metric] = fields | _plan_fields(plan, skipped)
    return out


def _tested(t: stats.PairedTest, p_holm: float, m: int) -> dict:
    """A paired test's fields; the MDE at Holm's strictest level over its family of m rows."""
    return {
        "p": t.p_value,
        "p_holm": p_holm,
        "mde": stats.mde(t.se, m=m, df=t.df),
        "test_low": t.low,
        "test_high": t.high,
        "se": t.se,
        "df": None if math.isinf(t.df) else t.df,  # None: no seed part, or seeds that all scored alike
        "seed_variance": t.seed_variance,
        "n_boot": t.n_boot,
        "untested": None,
    }


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
    return {
        "p": None,
        "p_holm": None,
        "mde": None,
        "test_low": None,
        "test_high": None,
        "se": None,
        "df": None,
        "seed_variance": None,
        "n_boot": None,
        "untested": reason,
        **_plan_fields(None),
    }


def _plan_fields(plan: stats.SeedPlan | None, skipped: str | None = None) -> dict:
    """A seed plan as flat fields (one CSV column each): the MDE aimed at, the seeds it takes, the sentences' floor;
    or, for a row the plan leaves out, why (`skipped`)."""
    if plan is None:
        return {"plan_mde": None, "plan_seeds": None, "mde_floor": None, "plan_skipped": skipped}
    return {"plan_mde": plan.target, "plan_seeds": plan.seeds, "mde_floor": plan.floor, "plan_skipped": None}


def _why_untested(name: str, rows: list, base, evidence: Evidence) -> str:
    row = next(r for r in rows if r.name == name)
    lacking = [r for r in (base, row) if _row_stats(r, evidence) is None]
    return " and ".join(
        f"{len([x for x in r.runs if x.source not in evidence.per_run])} of {len(r.runs)} runs of "
        f"'{r.name}' saved no eval/{evidence.split}.json"
        for r in lacking
    )

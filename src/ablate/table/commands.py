"""`ablate table STUDY`: a finished sweep in the layout of the paper's Table 3, beside the paper's figures, with
seed intervals, paired tests against the base row and a verdict per row on the split `--split` names."""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path

from ablate.files.destination import ARCHIVE_INCOMPLETE, check_output
from ablate.table import file_writes, page, terminal
from ablate.table.caveats import skipped_runs
from ablate.table.compare import make_table
from ablate.table.finished_runs import require_base, runs_from_dirs, runs_from_wandb, select, unpruned
from ablate.table.latex import to_latex
from ablate.table.left_out import LeftOut, in_study, left_out, study_trials
from ablate.table.plot import plot
from ablate.table.render import steady, to_agreement_csv, to_csv, to_json, to_markdown
from ablate.table.sentence_records import collect, unrecorded

DEFAULT_OUT = Path("tables")


def table_cli(args: argparse.Namespace) -> int:
    if args.plugins:
        from ablate.plugins import load_plugins

        load_plugins(args.plugins)
    _check_arguments(args)
    source, planned = Path(args.study), []
    if source.is_file():  # a sweep file: tabulate its out_dir, naming the rows it lists that never ran
        from ablate.sweep.load import load_sweep

        sweep = load_sweep(source, to_run=False)
        source, planned = sweep.out_dir, [str(row) for row in sweep.variants]
    if not source.exists():
        raise FileNotFoundError(f"no such study directory: {source}")
    if (source / ARCHIVE_INCOMPLETE).exists():  # an archive cut short while moving in (ablate.archive.staging)
        raise ValueError(f"{source} is an incomplete archive ({ARCHIVE_INCOMPLETE} is there): archive the study into it again")
    trials = None if args.wandb else study_trials(source)  # read once: a running sweep may change it meanwhile
    runs, skipped = runs_from_wandb(source) if args.wandb else (in_study(source, runs_from_dirs(source), trials), {})
    found = LeftOut() if args.wandb else left_out(source, runs, trials)  # every run folder not tabulated, named with why
    found.not_run([r for r in planned if not args.rows or r in args.rows], {r.row for r in runs}, args.study)
    skipped |= found.runs
    left = "; left out: " + "; ".join(f"{run} ({why})" for run, why in skipped.items()) if skipped else ""
    if not runs:
        kind = "W&B offline runs with a summary" if args.wandb else "finished runs (config.yaml + summary.json)"
        raise ValueError(f"found no {kind} under {source}{left}")
    runs = select(runs, args.rows, args.seeds)
    require_base((r.row for r in runs), left=left)  # why it is missing, said before any work
    stem = Path(args.out or DEFAULT_OUT / source.resolve().name) / args.name
    if args.at_update is not None:
        return _at_update_cli(runs, stem, source, args.at_update, args.metric or "val/ppl", args.title, args.force, found)
    runs, pruned = unpruned(runs)  # its curve counts at an update it reached (above); its final scores are no seed's
    skipped |= pruned
    if pruned:
        require_base((r.row for r in runs), "finished runs", f"; left out: {'; '.join(pruned)}")
    targets = {suffix: stem.with_name(stem.name + suffix) for suffix in SUFFIXES}
    _check_writable(targets, source)  # before a long test-split evaluation, as is the page's check
    evaluate = None
    if args.split == "test":  # summaries hold validation scores only: every run needs a test record, made if missing
        from ablate.table.checkpoint_scoring import evaluator, refuse_unscorable

        lacking = {r.run_dir: r.row for r in unrecorded(runs, args.split) if r.run_dir is not None}
        refuse_unscorable(lacking, args.split, lacking, args.device)
        evaluate = evaluator(args.split, args.device)
    evidence = collect(runs, args.split, evaluate)
    evidence.skipped, evidence.skipped_what = skipped, "W&B run" if args.wandb else "run"
    evidence.diverged = {row: why for row, why in found.diverged.items() if not args.rows or row in args.rows}
    evidence.some_diverged = {
        row: kept
        for row, seeds in found.some_diverged.items()
        if (not args.rows or row in args.rows) and (kept := [s for s in seeds if not args.seeds or s in args.seeds])
    }
    table = make_table(runs, evidence, n_boot=args.boot, seed=args.seed, target_mde=args.target_mde or None)
    chosen = "".join(f", {what} {' '.join(map(str, v))}" for what, v in (("rows", args.rows), ("seeds", args.seeds)) if v)
    title = args.title or f"Table 3 layout: {source.name}{chosen}, {args.split} split ({len(runs)} runs)"
    report = to_json(table, title)
    where = next((f"row '{ln['row']}', {w}" for ln in report["rows"] if (w := _non_finite(ln))), None) or _non_finite(report)
    if where:
        raise ValueError(f"the table holds a non-finite number ({where}): a run's scores or summary are broken")
    page_path, page_text = page.spliced(targets[".md"], to_markdown(table, title))
    if page_path == targets[".md"].resolve():  # not a symlinked page: named as the user named it
        page_path = targets[".md"]
    writers = {
        page_path: lambda p: p.write_text(page_text, encoding="utf-8"),
        targets[".tex"]: lambda p: p.write_text(to_latex(table, title), encoding="utf-8"),
        targets[".csv"]: lambda p: to_csv(table, p),
        targets["-agreement.csv"]: (lambda p: to_agreement_csv(table, p)) if table.compares_with_paper else None,
        targets[".json"]: lambda p: p.write_text(json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False), encoding="utf-8"),
        targets[".png"]: lambda p: plot(table, p, title),
    }
    empty = [page_path] if page.awaiting(page_path) else []  # a page's empty place for the table: nothing to lose
    done = file_writes.write(file_writes.render({p: w for p, w in writers.items() if w}), args.force, empty)
    print("\n".join(terminal.lines(table, title, terminal.terminal_width(), page_path.name)))
    _print_done(done)
    return 0


def _at_update_cli(runs: list, stem: Path, source: Path, update: int, metric: str, title: str | None, force: bool, found: LeftOut) -> int:
    """`--at-update N`: the rows at equal updates from their logged curves (`equal_updates`), as NAME-at-N.md/.json,
    with the runs left out named as under the full table; its outputs refused as the full table's are (`_check_writable`)."""
    from ablate.table.equal_updates import at_update, to_markdown

    targets = [stem.with_name(f"{stem.name}-at-{update}{suffix}") for suffix in (".md", ".json")]
    for target in targets:
        check_output(target, "--out", owns=[source])
    result = at_update(runs, update, metric)
    result["skipped_runs"] = [{"run": run, "reason": why} for run, why in found.runs.items()]
    text = to_markdown(result, title) + "".join(f"{line}\n" for line in skipped_runs(found.runs, "run", list(found.diverged)))
    files = {targets[0]: text.encode("utf-8"), targets[1]: json.dumps(steady(result), indent=2, allow_nan=False).encode("utf-8")}
    done = file_writes.write(files, force)
    print(text, end="")
    _print_done(done)
    return 0


def _print_done(done: dict[Path, str]) -> None:
    """A line per file: wrote, replaced or unchanged, and its path (whole, to copy, whatever the width)."""
    for path, state in done.items():
        print(f"{state:<9} {path}")


SUFFIXES = (".md", ".tex", ".csv", "-agreement.csv", ".json", ".png")
MIN_BOOT = 10  # below this the bootstrap variance of the sentences is too rough to test with


def _check_arguments(args: argparse.Namespace) -> None:
    if args.boot < MIN_BOOT:
        raise ValueError(f"--boot: expected at least {MIN_BOOT} bootstrap resamples (default 1000), got {args.boot}")
    if not (math.isfinite(args.target_mde) and args.target_mde >= 0):
        raise ValueError(f"--target-mde: expected a finite ΔBLEU >= 0 (0: no seed plan), got {args.target_mde}")
    if args.at_update is not None and (args.split != "valid" or args.wandb):
        raise ValueError("--at-update reads the validation curves in run directories: --split test and --wandb do not apply")
    if args.metric is not None and args.at_update is None:
        raise ValueError("--metric goes with --at-update N (the logged metric to compare at update N)")
    if not args.name or args.name in (".", "..") or any(sep in args.name for sep in ("/", os.sep)):
        raise ValueError(f"--name: expected a file name stem without a folder (e.g. table3), got {args.name!r}")


def _check_writable(targets: dict[str, Path], source: Path) -> None:
    """Every output can be written (`ablate.files.destination.unwritable`) where a table may go (ablate.files.destination:
    not a link, not in another study or run than the one tabulated), and the page is one the table can go into."""
    for target in targets.values():
        check_output(target, "--out", owns=[source])
    page.check(targets[".md"])


def _non_finite(value, where: str = "") -> str | None:
    """The JSON path of the first NaN or infinity in `value`, else None."""
    if isinstance(value, float) and not math.isfinite(value):
        return where or "the top"
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    return next((w for k, v in items if (w := _non_finite(v, f"{where}[{k!r}]" if where else repr(k)))), None)

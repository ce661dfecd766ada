"""`ablate sweep FILE` (plan with --dry-run, run N workers on one study, summarise it) and `ablate status TARGET`:
the commands' bodies (their flags: ablate.sweep.flags)."""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import optuna
from optuna.trial import TrialState
from rich.console import Console

from ablate.data.location import corpus_problem
from ablate.files.atomic import missing_folders, remove_empty
from ablate.files.destination import check_output
from ablate.messages.redact import redact, remember
from ablate.run import PREEMPTED_EXIT
from ablate.sweep import probe
from ablate.sweep.devices import AUTO, Layout, assign, combination_problem, mps_status, parse_trials_per_gpu, visible_gpus
from ablate.sweep.failure_report import cannot_go_on, report_failures, report_interrupted, report_orphans, rerun
from ablate.sweep.live import LiveView, plain_every_s
from ablate.sweep.load import load_sweep
from ablate.sweep.long_table import print_table
from ablate.sweep.member_checks import few_groups_note, members_problem
from ablate.sweep.parent_watch import watched_env
from ablate.sweep.picture import plain_lines, render
from ablate.sweep.plan import plan_for
from ablate.sweep.results_files import summarize
from ablate.sweep.results_terminal import print_summary
from ablate.sweep.snapshot import snapshot
from ablate.sweep.spec import Sweep
from ablate.sweep.status import existing_study, resolve
from ablate.sweep.storage import MEMBERS_ENV, RUN_FROM_ENV, STORAGE_ENV, claim_lock, dashboard_hint, storage_url
from ablate.sweep.study_folder import study_folder_problem
from ablate.sweep.trial import Stop
from ablate.sweep.wandb_summary import log_wandb_table
from ablate.sweep.worker import open_sweep_study, run_worker

ALL_FAILED_EXIT = 1  # the study ran, and no row has a result to compare


def dry_run(sweep: Sweep, console: Console) -> None:
    console.print(
        f"[bold]{sweep.name}[/]: {type(plan_for(sweep)).__name__.lower()}, base {sweep.base}, objective "
        f"{sweep.objective.direction} {' + '.join(f'{w:g}*{m}' for m, w in sweep.objective.terms.items())}"
    )
    if sweep.overrides:
        console.print("every trial: " + ", ".join(f"{k}={v}" for k, v in sweep.overrides.items()))
    header, rows, closing = plan_for(sweep).describe()
    print_table(console, header, rows)
    where = "" if sweep.storage is None else f", the study in {redact(storage_url(sweep.out_dir, sweep.storage))}"
    console.print(f"{closing}, into {sweep.out_dir}/{where}", soft_wrap=True)  # whole: a path to copy (ablate table, status)
    for note in filter(None, (few_groups_note(sweep), no_base_note(sweep))):
        console.print(f"note: {note}")


def no_base_note(sweep: Sweep) -> str | None:
    """A variants sweep trains without a row named base, but `ablate table` compares every row with it: said at once."""
    if sweep.variants and "base" not in sweep.variants:
        return f"no row is named 'base' ({', '.join(map(str, sweep.variants))}): `ablate table` compares every row with the base row, so it will refuse this study; name the reference row base"
    return None


def corpus_problems(sweep: Sweep, fetch: bool) -> str | None:
    """Why the trials would find no corpus (ablate.data.location), for the base and each row's own data section:
    `ablate train` refuses a wrong ABLATE_DATA_DIR at once, and a sweep that did not started every trial to fail."""
    configs = [sweep.row_config({}), *(sweep.row_config(overrides) for overrides in sweep.variants.values())]
    for data in {repr(cfg.data): cfg.data for cfg in configs}.values():
        if problem := corpus_problem(data, fetch):
            return f"the trials' corpus: {problem}"
    return None


def gpu_layout(sweep: Sweep, trials_per_gpu_from: str, console: Console) -> Layout:
    """Where the sweep's trials run: the visible GPUs (none when trials train on CPU), each with its trials_per_gpu
    (measured for "auto", checked for an explicit N > 1; see ablate.sweep.probe)."""
    base = sweep.row_config({}).train
    gpus = [] if base.accelerator == "cpu" else visible_gpus()
    if not gpus:
        if sweep.members_auto:  # nothing to measure: each trial alone
            console.print("members auto: 1 (trials train on CPU; give members a number to group them there)")
            sweep.set_members(1)
        if sweep.trials_per_gpu != 1:
            why = "train.accelerator is cpu" if base.accelerator == "cpu" else "no GPU visible"
            console.print(f"trials_per_gpu {sweep.trials_per_gpu} ignored: trials train on CPU ({why})")
        return Layout([])
    members, measured = 1, None
    if sweep.members_auto:
        members, measured = probe.resolve_members(sweep, sweep.trials_per_gpu, gpus, console.print)
        sweep.set_members(members)
    per_gpu = probe.resolve(sweep, sweep.trials_per_gpu, trials_per_gpu_from, gpus, console.print, members, measured)
    return Layout(gpus, per_gpu, sweep.gpus_per_trial)


def launch_workers(
    sweep: Sweep, url: str, devices: list[str | None], on_line: Callable[[str], None] | None = None, since: int = 0
) -> list[int]:
    """A worker process per entry of `devices`, all on one study; a worker given a device sees only it (its
    CUDA_VISIBLE_DEVICES; None on CPU). A signal to this process (a preempted job, a Ctrl-C) reaches every worker as
    SIGTERM: each passes it to its trial, which saves, and stops. With `on_line`, each line the workers print is handed
    to it (the live view shows it) instead of to the terminal. A worker watches this process: should it die unhandled
    (SIGKILL), each worker stops as on SIGTERM (ablate.sweep.parent_watch), so no orphan starts a new row."""
    procs = []
    for i, device in enumerate(devices):
        # The URL (it may hold a password) travels by environment, not argv; so does this run's first trial number.
        env = watched_env({**os.environ, STORAGE_ENV: url, RUN_FROM_ENV: str(since)})
        if "members.size" in sweep.overrides:  # --members reaches the workers, which load the sweep file themselves
            env[MEMBERS_ENV] = f"{sweep.overrides['members.size']}{'!' if sweep.members_forced else ''}"  # !: over the rows' own
        if device is not None:
            env["CUDA_VISIBLE_DEVICES"] = device
        cmd = [
            sys.executable,
            "-m",
            "ablate.sweep.worker",
            str(sweep.path),
            str(i),
            str(sweep.n_trials or 0),
            *([device] if device else []),
        ]
        procs.append(
            subprocess.Popen(cmd, env=env, **({} if on_line is None else {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT}))
        )
    readers = [threading.Thread(target=_pass_lines, args=(p.stdout, on_line), daemon=True) for p in procs if p.stdout is not None]
    for reader in readers:
        reader.start()

    def forward(signum, frame):
        Stop.note(signum)
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)

    for signum in Stop.SIGNALS:
        signal.signal(signum, forward)
    codes = [p.wait() for p in procs]
    for reader in readers:
        reader.join(timeout=10)
    return codes


def _pass_lines(stream, on_line: Callable[[str], None]) -> None:
    for raw in stream:
        on_line(raw.decode(errors="replace").rstrip("\n"))


def _apply_flags(sweep: Sweep, args: argparse.Namespace) -> str:
    """`--n-trials`, `--members` and `--trials-per-gpu` over the file's values, each refused where it cannot apply;
    where trials_per_gpu came from, as its errors name it."""
    if args.n_trials is not None:
        if sweep.variants:  # its trials are its rows times their seeds: the count was taken and ignored
            raise ValueError(f"--n-trials is a search's budget; {sweep.path} is a variants sweep, which trains every row once per seed")
        sweep.n_trials = args.n_trials
    flag = getattr(args, "members", None) is not None
    if flag:
        sweep.members_auto = args.members == AUTO
        sweep.set_members(1 if sweep.members_auto else int(args.members), force=True)
    problem = members_problem(sweep)  # the file's members, or the flag's over them
    if problem:
        raise ValueError(f"--members: {problem}" if flag else f"{sweep.path}: {problem}")
    if args.trials_per_gpu is None:
        return f"{sweep.path}: trials_per_gpu"
    sweep.trials_per_gpu = parse_trials_per_gpu(args.trials_per_gpu, "--trials-per-gpu")
    if problem := combination_problem(sweep.trials_per_gpu, sweep.gpus_per_trial, "--trials-per-gpu"):
        raise ValueError(f"{sweep.path}: {problem}")
    return "--trials-per-gpu"


def _open_study(sweep: Sweep, url: str) -> optuna.Study:
    """The study, its out_dir made; its result files checked before any trial trains."""
    for name in ("results.csv", "results.json"):  # refused now, not after the study has trained (ablate.files.destination)
        check_output(sweep.out_dir / name, f"{sweep.path}: out_dir's", owns=[sweep.out_dir], writes_records=True)
    made = missing_folders(sweep.out_dir)
    sweep.out_dir.mkdir(parents=True, exist_ok=True)
    try:
        study = open_sweep_study(sweep, url).study
    except BaseException:  # a storage out of reach or damaged: no empty out_dir left behind
        remove_empty(made)
        raise
    return study


def _report(
    sweep: Sweep, study: optuna.Study, url: str, args: argparse.Namespace, codes: list, workers: int, since: int, console: Console
) -> int:
    """The study's results (terminal, results files, W&B), its failures and interruptions named, and the exit code
    (sweep_cli's docstring)."""
    if any(codes):
        console.print(f"[yellow]worker exit codes: {codes}[/]")
    rows = summarize(sweep, study)
    print_summary(rows, console)
    log_wandb_table(sweep, rows, url)  # the study's storage names its one summary run
    console.print(f"results: {sweep.out_dir / 'results.csv'}; {dashboard_hint(url)}")
    none_finished = report_failures(study)
    # Runs whose workers died more often than a run retries, or with the last worker: said, and exit 75 (run it again).
    in_file = set(sweep.rows()) if sweep.variants else None
    unfinished = not Stop.requested and (report_interrupted(study, in_file) | report_orphans(study, codes))
    if not (none_finished or Stop.requested) and "base" in sweep.variants:  # ablate table compares rows with the base
        console.print(f"next, the study in Table 3's layout: ablate table {shlex.quote(str(sweep.out_dir))}", soft_wrap=True)
    if Stop.requested:
        started = any(t.number >= since and "out_dir" in t.user_attrs for t in study.get_trials(deepcopy=False))
        said = "running trials saved a checkpoint and continue from it" if started else "no trial had started"
        console.print(f"[yellow]stopped by a signal:[/] {said}; continue with: {rerun(args, workers)}")
        return Stop.exit_code()
    if full := [str(i) for i, code in enumerate(codes) if code == PREEMPTED_EXIT]:  # a full disk, a lost server: its line above
        print(f"ablate sweep: warning: worker {', '.join(full)} stopped, as it said; continue: {rerun(args, workers)}", file=sys.stderr)
    return ALL_FAILED_EXIT if none_finished else PREEMPTED_EXIT if unfinished or full else 0


def sweep_cli(args: argparse.Namespace) -> int:
    """Run the sweep; its exit code (also in `ablate sweep --help`): 0 the study ran and some row has a result, rows
    that failed by themselves named on stderr with their logs as a warning (the study still compares the others);
    ALL_FAILED_EXIT (1) every row that ran failed, each named with its log; PREEMPTED_EXIT (75) or INTERRUPTED_EXIT
    (130) stopped by a signal, running trials saved, a rerun continues; PREEMPTED_EXIT too when runs were interrupted
    more often than a run retries them (workers killed), each named, or a full disk or a lost server stopped the
    sweep: a rerun continues them. A usage or sweep-file error is ablate's 2."""
    console = Console(width=None if sys.stdout.isatty() else 160)  # logs and pipes get whole rows
    if args.storage:
        # W&B records the command line of the summary run; keep a password given by --storage out of it. Remembered
        # first: in `--storage=URL`, a password holding a space or a '/' is masked only as one already seen.
        remember(args.storage)
        sys.argv = [redact(a) for a in sys.argv]
    for flag, value in (("--n-trials", args.n_trials), ("--workers", args.workers)):
        if value is not None and value < 1:  # 0 would run an empty study (or be ignored), as a negative number would
            raise ValueError(f"{flag}={value} must be an integer >= 1")
    sweep = load_sweep(args.file)
    per_gpu_from = _apply_flags(sweep, args)
    if problem := study_folder_problem(sweep.out_dir, sweep.name):  # another study's, a run: refused, dry run too
        raise ValueError(f"{sweep.path}: {problem}")
    # ABLATE_DATA_DIR or data.dir wrong, dry run too; a corpus only a download brings is fetched once, here, before
    # the study's folder and storage exist (a failed download leaves neither), or refused. A dry run fetches nothing.
    if problem := corpus_problems(sweep, fetch=not args.dry_run):
        raise ValueError(f"{sweep.path}: {problem}")
    if args.dry_run:
        dry_run(sweep, console)
        return 0
    if not console.is_terminal:  # plain progress lines: a bad ABLATE_PROGRESS_EVERY stops it before its study exists
        plain_every_s()
    placed = gpu_layout(sweep, per_gpu_from, console)
    if sweep.members_auto and (problem := members_problem(sweep)):  # the K the probe chose
        raise ValueError(f"members auto: {problem}")
    for note in (few_groups_note(sweep), no_base_note(sweep)):  # members fixed now (`members: auto` measured)
        if note:
            console.print(f"[yellow]note:[/] {note}")
    workers = args.workers or (max(placed.slots, 1) if placed.gpus else sweep.workers)
    devices = assign(placed.gpus, workers, placed.trials_per_gpu, placed.gpus_per_trial, "--workers") if placed.gpus else [None] * workers
    url = storage_url(sweep.out_dir, sweep.storage, args.storage)
    study = _open_study(sweep, url)
    since = len(study.get_trials(deepcopy=False))  # this run's trials are numbered from here
    optuna.storages.fail_stale_trials(study)
    with claim_lock(url):  # two sweeps started at once (a job array) each queued every row
        queued = plan_for(sweep).queue(study)
    done = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
    fewer = ""
    left = len(study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))
    if placed.gpus and sweep.variants and not args.workers and max(left, 1) < workers:
        # A packed GPU has more slots than a short study has rows: workers beyond them would only start and stop.
        devices = devices[: max(left, 1)]
        workers, fewer = len(devices), f" ({len(devices)} worker{'s' * (len(devices) > 1)} for the {left} trials left)"
    console.print(
        f"study '{sweep.name}' at {redact(url)}: {done} trials finished, {queued} queued"
        f"{placed.describe(mps_status() if placed.gpus else None)}{fewer}"
    )
    live = console.is_terminal  # a live display; else plain progress lines (logs, CI), never an escape code
    codes = []
    try:
        with LiveView(url, sweep.name, console, live=live) as view:
            if workers == 1 and not live and not placed.gpus:
                run_worker(sweep, url, 0, since=since)
            else:  # on a terminal even one worker runs apart, so its messages reach the view rather than tear it; on GPUs, pinned
                codes = launch_workers(sweep, url, devices, view.post if live else None, since)
        return _report(sweep, study, url, args, codes, workers, since, console)
    except Exception as e:  # a full disk, the study's server lost: trials started save, and a rerun continues them
        if (code := cannot_go_on(e, rerun(args, workers))) is None:
            raise
        return code


def status_cli(args: argparse.Namespace) -> int:
    """`ablate status TARGET`: the picture `ablate sweep` shows live (ablate.sweep.picture), printed once for a study
    running elsewhere or finished, read from its storage and, where this machine can see them, its trials' run
    directories. Nothing is written."""
    url, name = resolve(args.target, args.study)
    study = existing_study(url, name, hint=Path(args.target).name)
    snap = snapshot(study, root=Path(args.target) if Path(args.target).is_dir() else None)  # a copy reads its own trials/
    console = Console(width=None if sys.stdout.isatty() else 160)
    if console.is_terminal:
        console.print(f"study '{study.study_name}' at {redact(url)}")
        console.print(render(snap, all_trials=True))
    else:  # logs and pipes: plain lines, no escape codes
        print(f"study '{study.study_name}' at {redact(url)}")
        print("\n".join(plain_lines(snap, all_trials=True)))
    return 0

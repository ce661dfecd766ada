"""One chunk of a study longer than any one machine: resume from the committed archive, train for a set time, stop,
and bring back what finished (docs/table3-gpu.md). Checkpoints never travel between chunks: a trial cut off by the
chunk's end starts over in a later chunk, and a trial the archive holds is never trained again.

    python benchmarks/study_chunk.py SWEEP ARCHIVE [--minutes 8] [--reserve 90] [--trials-per-gpu N] [--workers N]
                                     [--logs DIR] [--clean] [--device auto] [--split test] [--allow-code-change]

1. refuses to start if ARCHIVE/chunks.jsonl (one line a chunk: machine, ablate code, minutes, trials) says the
   study's earlier chunks ran other ablate code, or if the archive is not exactly the study's finished trials;
2. copies ARCHIVE (the study as committed by `ablate archive`: study.db and its finished runs) into the sweep's
   out_dir, which must be absent or empty (--clean empties it: a chunk starts from the archive alone);
3. runs `ablate sweep SWEEP`, and meanwhile scores each run that finishes on the test split from its selected
   checkpoint (as `ablate archive --split test` does), so little is left to score when the chunk ends;
4. at MINUTES less RESERVE seconds sends the sweep SIGTERM: its running trials save, are recorded as preempted and
   are left out of the archive (no summary.json), so their rows start over, as new trials, next chunk;
5. sets aside a run whose trial the study does not mark COMPLETE (stopped just after writing its summary), runs
   `ablate archive OUT_DIR ARCHIVE --split test`, and checks the result: each run a COMPLETE trial with
   eval/SPLIT.json and no checkpoint, each row and seed once; then prints what finished, what was cut, what is
   left and the minutes spent, and adds the chunk's line to ARCHIVE/chunks.jsonl.

LOGS (default $OUT, else runs/chunks/DATE) gets chunk.log (this report), sweep.log, archive.log, chunk.json and
archive-update.tar.gz: ARCHIVE's new and changed files, to unpack with `tar -xzf archive-update.tar.gz -C ARCHIVE`
where the archive is committed. Exit 0: archived and consistent; 1: a problem, said; 2: refused before running.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from ablate.archive.study_db import DATABASE
from ablate.sweep.load import load_sweep
from ablate.sweep.storage import storage_url

sys.path.insert(0, str(Path(__file__).parent))
from chunk_history import CHUNKS, code_fingerprint, code_refusal, file_hashes, machine, pack_changes, read_history  # noqa: E402
from chunk_report import report, say  # noqa: E402
from chunk_scorer import Scorer  # noqa: E402
from chunk_trials import TrialRecord, archive_problems, read_trials, run_dirs, summarize  # noqa: E402

GRACE_S = 60.0  # after SIGTERM, how long the sweep may take to stop before it is killed
SWEEP_STOPPED = (0, 75, 130)  # ablate sweep's exits for "ran" and "stopped by a signal" (ablate sweep --help)


def run_sweep(args, stop_at: float, log: Path, logs: Path) -> int:
    """`ablate sweep` until it ends or `stop_at` (or a signal to this script), then SIGTERM; its exit code."""
    cmd = [sys.executable, "-m", "ablate.cli", "sweep", str(args.sweep)]
    cmd += ["--trials-per-gpu", args.trials_per_gpu] if args.trials_per_gpu else []
    cmd += ["--workers", str(args.workers)] if args.workers else []
    say(log, "$ " + " ".join(cmd[2:]).replace("ablate.cli", "ablate", 1))
    stopped = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopped.set())
    with open(logs / "sweep.log", "ab") as out:
        # Its own process group (not session: what a machine's end kills, it must too), for the kill below.
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, process_group=0)
        while proc.poll() is None and time.monotonic() < stop_at and not stopped.is_set():
            time.sleep(1.0)
        if proc.poll() is None:
            say(log, "chunk time is up: SIGTERM to the sweep" if not stopped.is_set() else "signal: SIGTERM to the sweep")
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(GRACE_S)
            except subprocess.TimeoutExpired:
                say(log, f"the sweep did not stop within {GRACE_S:.0f} s: killing its process group")
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return proc.returncode


def set_aside(out_dir: Path, trials: list[TrialRecord], log: Path) -> list[str]:
    """Move out of the study every run with a summary whose trial is not COMPLETE, so it is not archived."""
    done = {t.number for t in trials if t.state == "COMPLETE"}
    moved = []
    for number, run in run_dirs(out_dir).items():
        if number not in done:
            aside = out_dir.parent / f"{out_dir.name}.set-aside" / run.name
            aside.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(run), aside)
            say(log, f"set aside {run.name}: it wrote its summary, but its trial was stopped before it was recorded finished")
            moved.append(run.name)
    return moved


def prepare(args, sweep, log: Path) -> list[TrialRecord]:
    """The sweep's out_dir made a copy of the archive (refused when it holds anything, unless --clean); its trials."""
    out_dir, aside = sweep.out_dir, sweep.out_dir.parent / f"{sweep.out_dir.name}.set-aside"
    if storage_url(out_dir, sweep.storage) != f"sqlite:///{(out_dir / DATABASE).resolve()}":
        raise SystemExit(
            f"{args.sweep}: the study must live in {out_dir / DATABASE} (no storage: key, no $ABLATE_SWEEP_STORAGE) to be archived"
        )
    if out_dir.exists() and any(out_dir.iterdir()):
        if not args.clean:
            raise SystemExit(
                f"{out_dir} is not empty: a chunk starts from the archive alone; pass --clean to empty it (its checkpoints go)"
            )
        shutil.rmtree(out_dir)
        shutil.rmtree(aside, ignore_errors=True)
        say(log, f"emptied {out_dir} (--clean)")
    if args.archive.is_dir():
        shutil.copytree(args.archive, out_dir, dirs_exist_ok=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    trials = read_trials(out_dir / DATABASE, sweep.name)
    if problems := archive_problems(out_dir, trials, args.split):
        raise SystemExit(f"{args.archive} is not a consistent archive of the study, so no chunk runs from it:\n  " + "\n  ".join(problems))
    return trials


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sweep", type=Path, help="the study's sweep file")
    p.add_argument("archive", type=Path, help="the committed archive (ablate archive's DEST); absent for the first chunk")
    p.add_argument("--minutes", type=float, default=8.0, help="the whole chunk, archiving included (default 8)")
    p.add_argument("--reserve", type=float, default=90.0, help="seconds kept for stopping, scoring and archiving (default 90)")
    p.add_argument("--trials-per-gpu", help="passed to ablate sweep (N or auto)")
    p.add_argument("--workers", type=int, help="passed to ablate sweep")
    p.add_argument("--logs", type=Path, help="where the logs and the tarball go (default $OUT, else runs/chunks/DATE)")
    p.add_argument("--clean", action="store_true", help="empty the sweep's out_dir first (a warm machine's last chunk)")
    p.add_argument("--device", default="auto", help="where finished runs are scored (cpu, cuda, auto)")
    p.add_argument("--scorers", type=int, default=4, help="processes scoring finished runs during the sweep (default 4)")
    p.add_argument("--split", default="test", choices=["valid", "test"], help="the split every archived run is scored on")
    p.add_argument("--allow-code-change", action="store_true", help="run although the archive's chunks ran other ablate code")
    return p.parse_args(argv)


def archive_chunk(args, sweep, logs: Path, log: Path) -> list[str]:
    """Set aside runs the study does not mark finished, `ablate archive` the rest; the problems the archive has."""
    set_aside(sweep.out_dir, read_trials(sweep.out_dir / DATABASE, sweep.name), log)
    cmd = [sys.executable, "-m", "ablate.cli", "archive", str(sweep.out_dir), str(args.archive), "--split", args.split]
    with open(logs / "archive.log", "ab") as out:
        code = subprocess.run([*cmd, "--device", args.device], stdout=out, stderr=subprocess.STDOUT).returncode
    problems = [f"ablate archive exited {code} (archive.log)"] if code else []
    return problems + archive_problems(args.archive, read_trials(args.archive / DATABASE, sweep.name), args.split)


def run_chunk(args, sweep, before: list[TrialRecord], t0: float, logs: Path, log: Path) -> dict:
    """Sweep until the chunk's time is up, scoring finished runs meanwhile; archive; the chunk's record."""
    scorer = Scorer(sweep.out_dir / "trials", args.split, args.device, log, args.scorers)
    scorer.start()
    t1 = time.monotonic()
    rc = run_sweep(args, t0 + args.minutes * 60 - args.reserve, log, logs)
    t2 = time.monotonic()
    scorer.halt.set()
    scorer.join()
    problems = [f"ablate sweep exited {rc} (sweep.log)"] if rc not in SWEEP_STOPPED else []
    problems += archive_chunk(args, sweep, logs, log)
    summary = summarize(sweep, before, read_trials(args.archive / DATABASE, sweep.name))
    minutes = {"setup": (t1 - t0) / 60, "sweep": (t2 - t1) / 60, "stop, score, archive": (time.monotonic() - t2) / 60}
    minutes["chunk"] = sum(minutes.values())
    report(log, summary, minutes)
    extra = {"sweep_exit": rc, "trials_per_gpu": args.trials_per_gpu, "scored_during_sweep": len(scorer.scored)}
    return {**extra, "problems": problems, "minutes": {k: round(v, 2) for k, v in minutes.items()}, **summary}


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    t0, began = time.monotonic(), datetime.now(timezone.utc)
    logs = args.logs or Path(os.environ.get("OUT") or f"runs/chunks/{began:%Y%m%dT%H%M%S}")
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / "chunk.log"
    sweep = load_sweep(args.sweep)
    history, code = read_history(args.archive), code_fingerprint()
    hashes = file_hashes(args.archive)
    try:
        if why := code_refusal(history, code, args.allow_code_change):
            raise SystemExit(why)
        if args.minutes * 60 <= args.reserve:
            raise SystemExit(f"--minutes {args.minutes:g} less --reserve {args.reserve:g} s leaves no time to train")
        before = prepare(args, sweep, log)
    except SystemExit as e:
        say(log, f"refused: {e}")
        return 2
    say(log, f"chunk {len(history) + 1} of study '{sweep.name}' on {machine()}, ablate code {code}: {len(before)} trials in the archive")
    record = {"date": began.isoformat(timespec="seconds"), "machine": machine(), "code": code}
    record |= run_chunk(args, sweep, before, t0, logs, log)
    if (args.archive / DATABASE).is_file():  # the chunk's line in the archive: its cost, trials and code, for the plan
        with open(args.archive / CHUNKS, "a") as f:
            f.write(json.dumps(record | {"left": len(record["left"])}) + "\n")
    changed = pack_changes(args.archive, hashes, logs / "archive-update.tar.gz")
    (logs / "chunk.json").write_text(json.dumps(record | {"archive_files_changed": len(changed)}, indent=2))
    for problem in record["problems"]:
        say(log, f"PROBLEM: {problem}")
    say(log, f"sweep exit {record['sweep_exit']}; {len(changed)} archive files new or changed: {logs / 'archive-update.tar.gz'}")
    return 1 if record["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())

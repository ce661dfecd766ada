"""The headline figures of one part of benchmarks/gpu_check.sh, from the files the part wrote, against issue 30's
targets. A figure whose run did not finish is reported as missing, never guessed.

Run: python benchmarks/gpu_check_report.py speed|train|sweep|members DIR [SEQUENTIAL_DB PACKED_DB]
"""

from __future__ import annotations

import csv
import json
import statistics
import sys
from pathlib import Path

TARGETS = {
    "overhead": 1.15,
    "mfu_big": 0.40,
    "mfu_base": 0.30,
    "peer_ratio": 1.2,
    "val_share": 0.20,
    "packing": 5.0,
    "members": 8.0,
    "members_vs_packing": 2.0,
}


def _load(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _check(value: float | None, target: float, above: bool) -> str:
    if value is None:
        return "missing"
    return "meets" if (value >= target if above else value <= target) else "below target" if above else "above target"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def speed(folder: Path) -> list[str]:
    lines = []
    overhead = _load(folder / "overhead.json")
    ratio = None if overhead is None else overhead.get("ratio")
    lines.append(
        f"overhead: ablate step / bare loop = {ratio if ratio is None else f'{ratio:.3f}'} (target <= 1.15: {_check(ratio, 1.15, False)})"
    )
    for name, target in (("base", TARGETS["mfu_base"]), ("big", TARGETS["mfu_big"]), ("big-compiled", TARGETS["mfu_big"])):
        run = _load(folder / f"{name}.json")
        if run is None:
            lines.append(f"{name}: missing")
            continue
        ours = run["results"]["ablate"]
        mfu, peers = ours.get("mfu"), run.get("ratio_vs_best")
        lines.append(
            f"{name}: {ours['tgt_tokens_per_s']:,.0f} tgt tok/s, {ours['model_tflops']:.1f} model TFLOP/s, MFU {_pct(mfu)} "
            f"(target >= {target:.0%}: {_check(mfu, target, True)}); vs the faster peer {peers:.2f}x (target >= 1.2: "
            f"{_check(peers, TARGETS['peer_ratio'], True)})"
        )
    return lines


def _utilisation(path: Path) -> str:
    try:
        rows = [r for r in csv.reader(path.open()) if len(r) >= 3]
        util = [float(r[1]) for r in rows]
    except (OSError, ValueError):
        return "GPU utilisation: not sampled"
    if not util:
        return "GPU utilisation: not sampled"
    return f"GPU utilisation (nvidia-smi, {len(util)} samples): median {statistics.median(util):.0f}%, mean {statistics.mean(util):.0f}%"


def train(folder: Path) -> list[str]:
    lines = []
    small = _load(folder / "small-summary.json")
    if small is None:
        lines.append("multi30k-small: missing (no summary.json)")
    else:
        wall, val = small.get("wall_seconds"), small.get("speed/val_seconds")
        share = None if not wall or val is None else val / wall
        lines.append(
            f"multi30k-small: {small.get('steps')} steps, {small.get('speed/tokens_per_s', 0):,.0f} tgt tok/s, "
            f"{small.get('speed/step_ms', 0):.1f} ms/step, MFU {_pct(small.get('speed/mfu'))}, validation {val} s of {wall} s "
            f"= {_pct(share)} (target <= 20%: {_check(share, TARGETS['val_share'], False)})"
        )
    lines.append(_utilisation(folder / "nvidia-smi.csv"))
    big = _load(folder / "big-summary.json")
    if big is None:
        lines.append("big (ablate train): missing")
    else:
        mfu = big.get("speed/mfu")
        lines.append(
            f"big (ablate train, validation excluded): {big.get('speed/tokens_per_s', 0):,.0f} tgt tok/s, "
            f"{big.get('speed/model_tflops', 0):.1f} model TFLOP/s, MFU {_pct(mfu)} (target >= 40%: {_check(mfu, 0.40, True)})"
        )
    return lines


def _trials(db: Path) -> list:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = f"sqlite:///{db}"
    summaries = optuna.get_all_study_summaries(url)
    study = optuna.load_study(study_name=summaries[0].study_name, storage=url)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    return sorted(done, key=lambda t: t.datetime_start)


def _rate(trials: list) -> tuple[float, float]:
    span = (max(t.datetime_complete for t in trials) - min(t.datetime_start for t in trials)).total_seconds()
    return span, len(trials) * 3600 / span


def sweep(folder: Path, sequential_db: Path, packed_db: Path, label: str = "packed", target: str = "packing") -> list[str]:
    """Trials per hour of a study (`packed`: trials_per_gpu; `members`: a row's seeds as one model) against one trial
    at a time; without the one-at-a-time study (its part did not run in this call), the rate alone."""
    if not packed_db.exists():
        return [f"missing (no {packed_db.name}: the {label} sweep did not start, or was cut at the part limit; see its log)"]
    try:
        packed = _trials(packed_db)
    except Exception as e:  # an unreadable or unfinished study: say so, the rest of the check goes on
        return [f"missing ({type(e).__name__}: {e})"]
    if len(packed) < 2:
        return [f"too few finished trials ({label} {len(packed)})"]
    span, packed_rate = _rate(packed)
    try:
        seq = _trials(sequential_db)
    except Exception:
        seq = []
    if len(seq) < 2:
        return [
            f"{label} {len(packed)} trials in {span:.0f} s = {packed_rate:.0f} trials/h (no one-at-a-time study in this call to compare)"
        ]
    each = statistics.median((t.datetime_complete - t.datetime_start).total_seconds() for t in seq[1:])
    seq_rate = 3600 / each
    ratio = packed_rate / seq_rate
    return [
        f"one at a time {each:.1f} s a trial (median of {len(seq) - 1}, from the second) = {seq_rate:.0f} trials/h; "
        f"{label} {len(packed)} trials in {span:.0f} s = {packed_rate:.0f} trials/h; {ratio:.1f}x "
        f"(target >= {TARGETS[target]:g}x: {_check(ratio, TARGETS[target], True)})"
    ]


def members_vs_packed(members_db: Path, packed_db: Path) -> list[str]:
    """Issue 37: a row's seeds as one member group against the same kind of trials packed several to a GPU
    (the sweep part's `trials_per_gpu` study, this call): trials per hour over the same span rule, target >= 2x."""
    if not (members_db.exists() and packed_db.exists()):
        return ["no packed study in this call to compare (run `gpu_check.sh sweep,members`)"]
    try:
        grouped, packed = _trials(members_db), _trials(packed_db)
    except Exception as e:  # an unreadable or unfinished study: say so
        return [f"missing ({type(e).__name__}: {e})"]
    if len(grouped) < 2 or len(packed) < 2:
        return [f"too few finished trials (members {len(grouped)}, packed {len(packed)})"]
    (_, members_rate), (_, packed_rate) = _rate(grouped), _rate(packed)
    ratio = members_rate / packed_rate
    return [
        f"members {members_rate:.0f} trials/h against packed {packed_rate:.0f}: {ratio:.1f}x "
        f"(target >= {TARGETS['members_vs_packing']:g}x: {_check(ratio, TARGETS['members_vs_packing'], True)})"
    ]


def members(folder: Path) -> list[str]:
    """Issue 37: all K members' throughput over one run alone (trials per hour at equal steps; target >= 8x)."""
    lines, packed = [], _load(folder / "packed.json")  # benchmarks/packed_runs.py: the row's runs as trials_per_gpu auto packs them
    for path in sorted(folder.glob("members-*.json"), key=lambda p: int(p.stem.split("-")[1])) or [folder / "members-8.json"]:
        run = _load(path)
        if run is None:
            lines.append(f"{path.stem}: missing")
            continue
        ratio, mfu, peak = run["ratio_members_vs_one_run"], run.get("mfu", {}), run.get("peak_mib", {})
        lines.append(
            f"K={run['members']}: {run['tokens_per_s']['members']:,.0f} tgt tok/s (all members) vs one run "
            f"{run['tokens_per_s']['one_run']:,.0f}: {ratio:.2f}x (trials/h; target >= 8x: {_check(ratio, TARGETS['members'], True)}); "
            f"vs the runs one after another {run['ratio_members_vs_runs']:.2f}x; K=1 step / run step "
            f"{run['ratio_member1_step_vs_run']:.3f}; MFU members {_pct(mfu.get('members'))}, one run {_pct(mfu.get('run-0'))}; "
            f"padded {run['padded_share']:.1%}; "
            + (f"peak MiB run {peak['run-0']:.0f}, K members {peak['members']:.0f}" if peak else "peak memory not measured at this K")
        )
        lines[-1] += "; " + _against_packed(run, packed)
    return lines


def _against_packed(run: dict, packed: dict | None) -> str:
    """Issue 37's second gate at the table3-gpu base row: K members' tokens/s over N runs' at once in N processes."""
    if packed is None:
        return "vs packed runs: missing (no packed.json: benchmarks/packed_runs.py did not finish; see packed.log)"
    ratio = run["tokens_per_s"]["members"] / packed["tokens_per_s"]["packed"]
    fits = {True: "", False: ", their peaks do not fit with the probe's headroom"}.get(packed.get("fits"), "")
    return (
        f"vs {packed['processes']} runs packed at once ({packed['tokens_per_s']['packed']:,.0f} tgt tok/s, {packed['mps']}{fits}): "
        f"{ratio:.2f}x (target >= {TARGETS['members_vs_packing']:g}x: {_check(ratio, TARGETS['members_vs_packing'], True)})"
    )


def main(argv: list[str]) -> int:
    part, folder = argv[0], Path(argv[1])
    parts = {"speed": lambda: speed(folder), "train": lambda: train(folder), "members": lambda: members(folder)}
    parts["sweep"] = lambda: sweep(folder, Path(argv[2]), Path(argv[3]))
    parts["members-sweep"] = lambda: sweep(folder, Path(argv[2]), Path(argv[3]), "members", "members")
    parts["members-vs-packed"] = lambda: members_vs_packed(Path(argv[2]), Path(argv[3]))
    lines = parts[part]()
    print("\n".join(f"{part}: {line}" for line in lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""Sweep overhead: wall time of `ablate sweep` over K rows against K plain `ablate train` runs of the same configs.

Both sides run the same resolved configs one after another (one worker, so the CPU is not shared), each in a fresh
process as a user would start them; the sweep side adds the study (SQLite), the worker loop, trial processes,
heartbeats and the summary (table, CSV, W&B Table). Sides alternate per round so background drift hits both.
Run: ABLATE_DATA_DIR=../shared/data python benchmarks/sweep_overhead.py [--sweep sweeps/quickstart.yaml] [--rounds 1]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from ablate.config import to_yaml
from ablate.sweep.load import load_sweep


def run(cmd: list[str], log: Path) -> float:
    started = time.perf_counter()
    with open(log, "ab") as f:
        subprocess.run(cmd, check=True, stdout=f, stderr=subprocess.STDOUT)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweep", default="sweeps/quickstart.yaml")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the work dir")
    args = parser.parse_args()

    sweep = load_sweep(args.sweep)
    work = Path(tempfile.mkdtemp(prefix="ablate-sweep-overhead-"))
    log = work / "log.txt"
    plain_times, sweep_times = [], []
    try:
        for r in range(args.rounds):
            # Plain runs: the exact configs the sweep's trials get (same seed, same logging), via `ablate train`.
            def plain(r: int = r) -> float:
                total = 0.0
                for row, seed in sweep.rows():
                    cfg = sweep.config_for(
                        sweep.variants[row],
                        seed,
                        work / f"plain{r}" / row,
                        {"logging.group": sweep.name, "logging.name": row, "logging.progress": False},
                    )
                    path = work / f"plain{r}-{row}.yaml"
                    path.write_text(to_yaml(cfg))
                    total += run([sys.executable, "-m", "ablate.cli", "train", str(path)], log)
                return total

            def swept(r: int = r) -> float:
                doc = yaml.safe_load(Path(args.sweep).read_text())
                doc["out_dir"] = str(work / f"sweep{r}")
                doc["base"] = [str(Path(b).resolve()) for b in sweep.base]
                path = work / f"sweep{r}.yaml"
                path.write_text(yaml.safe_dump(doc))
                return run([sys.executable, "-m", "ablate.cli", "sweep", str(path), "--workers", "1"], log)

            order = [("plain", plain), ("sweep", swept)] if r % 2 == 0 else [("sweep", swept), ("plain", plain)]
            for name, fn in order:
                t = fn()
                (plain_times if name == "plain" else sweep_times).append(t)
                print(f"round {r + 1}: {name:5s} {len(sweep.rows())} trials in {t:7.1f} s", flush=True)
        k = len(sweep.rows())
        p, s = sum(plain_times) / len(plain_times), sum(sweep_times) / len(sweep_times)
        print(f"sweep {sweep.name}: K={k} trials, mean over {args.rounds} round(s)")
        print(f"K x ablate train: {p:.1f} s; ablate sweep --workers 1: {s:.1f} s")
        print(f"sweep overhead: {s - p:+.1f} s total, {(s - p) / k:+.1f} s per trial, ratio sweep/plain {s / p:.3f}")
    finally:
        if args.keep:
            print(f"work dir kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("WANDB_MODE", "offline")
    sys.exit(main())

"""Loading a large sweep file: wall time of `ablate sweep FILE --dry-run` for a file of N rows (each changing two
keys of the base), S seeds a row, in a fresh process as a user would run it (imports, validation of every row, the
basis check and the printed table included). Issue 38 item 9 asks for under 10 s at 5,000 rows.
Run: ABLATE_DATA_DIR=../shared/data python benchmarks/sweep_dry_run.py [--rows 5000] [--seeds 1] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def sweep_file(folder: Path, rows: int, seeds: int, base: str) -> Path:
    variants = {"base": {}} | {
        f"r{i}": {"train.lr_scale": round(0.1 + i * 1e-4, 6), "model.d_ff": 128 + (i % 4) * 64} for i in range(1, rows)
    }
    doc = {"name": "big", "base": str(ROOT / base), "variants": variants, "out_dir": str(folder / "out")}
    if seeds > 1:
        doc["seeds"] = list(range(1, seeds + 1))
    path = folder / "big.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--base", default="experiments/quickstart.yaml")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = sweep_file(Path(tmp), args.rows, args.seeds, args.base)
        times = []
        for _ in range(args.rounds):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "ablate.cli", "sweep", str(path), "--dry-run"], check=True, stdout=subprocess.DEVNULL)
            times.append(time.perf_counter() - started)
    print(
        f"{args.rows} rows x {args.seeds} seed(s): dry run {statistics.median(times):.1f} s median of {args.rounds} ({', '.join(f'{t:.1f}' for t in times)})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""benchmarks/gpu_check.sh end to end on a CPU at toy sizes (--tiny): every part runs, writes its logs, and the
tarball holds them, so the script a GPU session runs (with minutes that cannot be spent twice) is known to work."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(1500)
def test_gpu_check_runs_every_part_at_toy_sizes_and_packs_the_logs(tmp_path):
    data = Path(os.environ.get("ABLATE_DATA_DIR", ROOT.parent / "shared" / "data"))
    if not (data / "multi30k").is_dir():
        pytest.skip(f"needs the Multi30k files under {data} (ABLATE_DATA_DIR)")
    env = {**os.environ, "ABLATE_DATA_DIR": str(data), "OUT": str(tmp_path / "out"), "ABLATE_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run(
        ["bash", "benchmarks/gpu_check.sh", "all", "--tiny"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1400
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = (tmp_path / "out" / "summary.txt").read_text()
    with tarfile.open(tmp_path / "out" / "gpu-check.tar.gz") as tar:
        names = set(tar.getnames())
    for part in ("sync", "speed", "train", "sweep", "members", "profile"):
        assert f"{part}: " in summary and any(n.startswith(f"./{part}/") for n in names), (part, summary, sorted(names))
    assert "./summary.txt" in names
    assert "sync: 2 passed" in summary  # the CPU form of the sync check: the detector and its own check
    assert "overhead: ablate step / bare loop = " in summary and "overhead: ablate step / bare loop = None" not in summary
    for model in ("base", "big"):  # big-compiled is left out at toy sizes (inductor's CPU build takes minutes)
        assert f"speed: {model}: " in summary and f"speed: {model}: missing" not in summary
    assert "train: multi30k-small: " in summary and "validation" in summary and "(no summary.json)" not in summary
    assert "trials/h" in summary  # both sweep arms finished trials
    assert "members: K=2: " in summary and "(trials/h; target >= 8x" in summary  # the members part measured its ratio
    assert "vs 2 runs packed at once (" in summary and "(target >= 2x" in summary  # and against the row's runs packed
    assert "members-sweep: one at a time" in summary and "members 2 trials in" in summary  # and a member sweep, end to end
    assert "members-vs-packed: members " in summary and "trials/h against packed" in summary  # and against packing
    for k in (1, 2):  # the profile part: one run's step and a member group's, host time a step each
        assert f"profile: per step ({k} member{'s' if k > 1 else ''}): host " in summary

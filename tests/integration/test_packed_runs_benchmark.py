"""benchmarks/packed_runs.py end to end on a tiny corpus: N runs train at once in N spawned processes and their
aggregate throughput is reported, the baseline gpu_check's members part holds members against."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import tiny_experiment

from ablate.config import to_yaml

pytestmark = pytest.mark.slow  # spawned processes train a tiny model; each case starts a Python that imports torch

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def test_packed_runs_reports_the_aggregate_throughput_of_processes_training_at_once(tmp_path):
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(to_yaml(tiny_experiment(tmp_path, data={"max_tokens": 128})))
    out = tmp_path / "packed.json"
    args = ["--config", str(cfg), "--processes", "2", "--steps", "2", "--rounds", "2", "--json", str(out)]
    proc = subprocess.run([sys.executable, str(BENCH / "packed_runs.py"), *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert (result["processes"], result["rounds"], len(result["rounds_tokens_per_s"])) == (2, 2, 2)
    speeds = result["tokens_per_s"]
    assert speeds["packed"] > 0 and speeds["packed"] == pytest.approx(2 * speeds["per_process"])
    assert min(result["rounds_tokens_per_s"]) <= speeds["packed"] <= max(result["rounds_tokens_per_s"])
    assert result["mps"].startswith("CUDA MPS: ") and "fits" not in result  # no device memory to check on a CPU


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_packed_runs_refuses_a_process_count_that_is_not_a_whole_number(value):
    proc = subprocess.run(
        [sys.executable, str(BENCH / "packed_runs.py"), "--processes", value], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2 and f"--processes: expected a whole number >= 1 or auto, got '{value}'" in proc.stderr


def test_a_terminated_measurement_leaves_no_process_behind(tmp_path):
    import os
    import signal
    import time

    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(to_yaml(tiny_experiment(tmp_path, data={"max_tokens": 128})))
    args = ["--config", str(cfg), "--processes", "2", "--steps", "2", "--rounds", "100000"]  # far longer than the test
    proc = subprocess.Popen([sys.executable, str(BENCH / "packed_runs.py"), *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    children: set[int] = set()
    deadline = time.time() + 120
    while len(children) < 2 and time.time() < deadline and proc.poll() is None:  # the two trainers (and a resource tracker)
        time.sleep(0.2)
        with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
            children = {int(pid) for pid in f.read().split()}
    assert len(children) >= 2, proc.stderr.read().decode()[-2000:] if proc.poll() is not None else children
    time.sleep(3)  # into their training
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    time.sleep(2)
    alive = [pid for pid in children if os.path.exists(f"/proc/{pid}") and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"]
    assert alive == [], alive

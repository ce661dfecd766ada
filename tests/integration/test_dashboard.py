"""A finished variants sweep in optuna-dashboard, looked at as a user would: in a real (headless) browser.

Needs optuna-dashboard (the `dev` extra) and Debian's Chromium (`apt-get install -y chromium`); installs nothing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from helpers import sweep_writer

pytestmark = pytest.mark.slow  # two real tiny sweeps, then a browser

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def dashboard(tmp_path):
    """optuna-dashboard on 127.0.0.1 over a study file; yields a function opening a page of it in Chromium."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing (Debian: apt-get install -y chromium)")
    exe = shutil.which("optuna-dashboard", path=str(Path(sys.executable).parent)) or shutil.which("optuna-dashboard")
    if exe is None:
        pytest.skip("optuna-dashboard is not installed (pip install -e '.[dev]')")
    procs = []

    def start(db: Path) -> tuple[str, list[dict]]:
        """Serve the study file; returns the dashboard's address and its studies."""
        port = free_port()
        procs.append(
            subprocess.Popen(
                [exe, f"sqlite:///{db}", "--host", "127.0.0.1", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        )
        base = f"http://127.0.0.1:{port}"
        for _ in range(60):
            try:
                with urllib.request.urlopen(f"{base}/api/studies", timeout=2) as r:
                    return base, json.load(r)["study_summaries"]
            except OSError:
                time.sleep(0.5)
        raise AssertionError("optuna-dashboard did not answer within 30 s")

    def page(url: str, ready: str) -> str:
        """The page's text once its JavaScript rendered `ready`: Chromium's virtual-time budget (10 s, then 30 s, then
        90 s) bounds how long the page's scripts may run, and an overloaded machine can need more than the first."""
        for budget_ms in (10_000, 30_000, 90_000):
            profile = tmp_path / f"chromium-{len(list(tmp_path.glob('chromium-*')))}"
            profile.mkdir()
            proc = subprocess.run(
                [str(CHROMIUM), *FLAGS, f"--virtual-time-budget={budget_ms}", f"--user-data-dir={profile}", "--dump-dom", url],
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert proc.returncode == 0, proc.stderr[-2000:]
            html = re.sub(r"<(style|script)[^>]*>.*?</\1>", " ", proc.stdout, flags=re.S)
            text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))
            if ready in text:
                break
        return text

    yield start, page
    for p in procs:
        p.terminate()
        p.wait(timeout=30)


def test_a_variants_study_shows_its_rows_in_optuna_dashboard_also_after_a_row_was_added(tmp_path, dashboard):
    start, page = dashboard
    write = sweep_writer(tmp_path, {"max_steps": 10, "val_every_steps": 10, "num_threads": 1, "val_max_sentences": 10}, name="dash")
    variants = {"base": {}, "A-h1": {"model.heads": 1}}
    env = {**os.environ, "ABLATE_SWEEP_HEARTBEAT": "1", "WANDB_MODE": "offline", "OMP_NUM_THREADS": "1"}
    for added in ({}, {"E-learned": {"model.positional": "learned"}}):  # run, add a row to the file, run again
        variants.update(added)
        path = write(variants=variants)
        proc = subprocess.run(
            [sys.executable, "-m", "ablate.cli", "sweep", str(path), "--workers", "2"], capture_output=True, text=True, timeout=600, env=env
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    base, studies = start(tmp_path / "sweep" / "study.db")
    assert [s["study_name"] for s in studies] == ["dash"]
    study = f"{base}/dashboard/studies/{studies[0]['study_id']}"
    trials = page(f"{study}/trials?numbers=0,1,2", ready="Trial 2 (trial_id=")
    assert "dash (id=1)" in trials and "3 Trials" in trials, trials
    for number in range(3):
        assert re.search(rf"Trial {number} \(trial_id=\d+\) Complete", trials), trials
    rows = {value: name for name, value in re.findall(r"Parameter (row(?:_\d+)?) (\S+)", trials)}
    assert rows == {"base": "row", "A-h1": "row", "E-learned": "row_2"}, trials  # the added row: a new name, nothing refused
    analytics = page(f"{study}/analytics", ready="Trial Param row Objective Value")
    # The slice plot of `row`: objective per row, the rows' names on its axis.
    slice_plot = re.search(r"Slice .*?Parameter: Param row (.*?) Trial Param row Objective Value", analytics)
    assert slice_plot and {"base", "A-h1"} <= set(slice_plot.group(1).split()), analytics

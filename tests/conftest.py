"""Fixtures every test folder may use."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def postgres_url():
    """A real PostgreSQL server: $ABLATE_TEST_POSTGRES_URL (started by .ci/run), else one started here by
    .ci/postgres.sh, and stopped at the end of the session; skips, saying why, when none can start."""
    url = os.environ.get("ABLATE_TEST_POSTGRES_URL")
    if url:
        yield url
        return
    datadir = Path(tempfile.mkdtemp(prefix="ablate-pg-"))  # not under pytest's 0700 tmp: the server runs as postgres
    port = str(56000 + os.getpid() % 1000)
    proc = subprocess.run(["bash", str(ROOT / ".ci" / "postgres.sh"), str(datadir), port], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        shutil.rmtree(datadir, ignore_errors=True)
        pytest.skip(f"no PostgreSQL server could be started: {proc.stderr.strip()[-500:]}")
    yield proc.stdout.strip()
    bindir = sorted(Path("/usr/lib/postgresql").glob("*/bin"))[-1]
    stop = [str(bindir / "pg_ctl"), "-D", str(datadir), "stop", "-m", "fast"]
    subprocess.run((["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []) + stop, capture_output=True)
    shutil.rmtree(datadir, ignore_errors=True)


# All slow, and importing test_bad_inputs builds its cases.
GENERATED = ("test_bad_inputs.py", "test_output_paths.py", "test_signal_cases.py")


def pytest_ignore_collect(collection_path, config):
    """The generated fault cases (tests/faults/test_bad_inputs.py: 549, all slow, and the files built on its
    artefacts) are built only when slow tests may run: building them costs every default collection seconds, in each
    xdist worker."""
    if collection_path.name in GENERATED and "not slow" in (config.getoption("markexpr") or ""):
        return True
    return None

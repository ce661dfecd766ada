"""Fixtures every test folder may use."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# A suite started in the background (`cmd &` in a script, nohup, some CI runners) inherits SIGINT ignored, and so does
# every `ablate` it starts: Python then installs no KeyboardInterrupt for it, and a test's Ctrl-C before ablate sets its
# own handler does nothing. The tests run as from a terminal, where Ctrl-C reaches every process.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# A researcher's own variants through the model's invariants (docs/variants.md, "Checking a variant of your own"):
# ABLATE_TEST_PLUGINS names their files or modules (os.pathsep between), registered before any test module is
# collected, so the covering sets of tests/unit/model take them in as they take in ablate's own.
if os.environ.get("ABLATE_TEST_PLUGINS"):
    from ablate.plugins import load_plugins

    load_plugins(os.environ["ABLATE_TEST_PLUGINS"].split(os.pathsep))


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


@pytest.fixture
def shm_dir():
    """A new folder under /dev/shm (a tmpfs in /dev: its files are files, not streams), removed after the test;
    skipped where there is no writable /dev/shm."""
    if not os.access("/dev/shm", os.W_OK | os.X_OK):
        pytest.skip("no writable /dev/shm here")
    folder = Path(tempfile.mkdtemp(dir="/dev/shm", prefix="ablate-test-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


# All slow, and importing test_bad_inputs builds its cases.
GENERATED = ("test_bad_inputs.py", "test_output_paths.py", "test_signal_cases.py")
# A module-level `pytestmark` that is `pytest.mark.slow` or a list holding it: every test in the file is slow.
SLOW_MODULE = re.compile(r"^pytestmark = (pytest\.mark\.slow\b|\[\s*(pytest\.mark\.\w+[^\n]*\n\s*)*pytest\.mark\.slow\b)", re.M)


def _slow_deselected(config) -> bool:
    """Whether `-m` deselects every slow test: `not slow` is one of its `and` terms (the default addopts' `not slow
    and not gpu`); `-m slow`, no `-m` or `not slow or gpu` keep them."""
    markexpr = config.getoption("markexpr") or ""
    return "not slow" in (term.strip().strip("()") for term in markexpr.split(" and "))


def _all_slow(path: Path) -> bool:
    """Whether a test file marks itself slow as a whole (a module-level `pytestmark = pytest.mark.slow`)."""
    return path.name.startswith("test_") and path.suffix == ".py" and SLOW_MODULE.search(path.read_text(encoding="utf-8")) is not None


def pytest_ignore_collect(collection_path, config):
    """A test file whose tests are all deselected is not imported, when `-m` deselects slow tests (the default set):
    the generated fault cases (tests/faults/test_bad_inputs.py: 549, all slow, and the files built on its artefacts),
    and every file with a module-level `pytestmark = pytest.mark.slow` (most of tests/faults, tests/integration and
    tests/compat). Importing them, with pytest's assertion rewriting, cost every default collection seconds in each
    xdist worker, only for pytest to deselect what they hold."""
    if not _slow_deselected(config):
        return None
    if collection_path.name in GENERATED or _all_slow(Path(collection_path)):
        return True
    return None


# Tests write only under their tmp_path: a relative default (a sweep's runs/sweeps/NAME) resolved against the cwd
# lands in the checkout, and the next run of the suite, or a user's `git status`, finds it there.
_CACHES = (".pytest_cache", ".ruff_cache", ".hypothesis", ".coverage")


def _root_entries() -> set[str]:
    return {p.name for p in ROOT.iterdir() if p.name not in _CACHES and not p.name.startswith(".coverage")}


_BEFORE = _root_entries()  # at import, before any test: pytest_sessionstart comes before a conftest under tests/ loads


def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workerinput"):  # an xdist worker: its controller checks once all have ended
        return
    new = sorted(_root_entries() - _BEFORE)
    if new:
        session.config.get_terminal_writer().line(
            f"\ntests left {', '.join(new)} in the checkout {ROOT} (write under tmp_path); failing the session", red=True
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED

"""Issue 38, the one rule for signals, against every command that writes: SIGINT and SIGTERM at named points of its
atomic writes (tests/fault_injection.py's `signal_on_write`, the command run through that file as a wrapper: a real
signal the process sends itself at the point, no sleeping): "before" its first write, "between" the temporary
written and the rename over each of its outputs, "after" that rename. Each case runs on a copy of test_bad_inputs'
artefacts (a trained run, a finished study, its archive) with earlier outputs planted where the command writes,
under the same address-space limit and timeout, and fails on a traceback, a hang, a wrong exit code (130 for SIGINT,
143 for SIGTERM; `ablate sweep`'s own 130 and 75), other than one line saying so, a point never reached, a temporary
file or folder (or an archive's marker) left behind, a file the command does not write changed, or an output that is
neither whole as it was nor whole as the command writes it (files written together, the table's, all one or all the
other). And the issue's case end to end: `ablate average` signalled by another process while its temporary is
written (the injection point announces it and waits). 100 cases, about 20 minutes with `-n 0` on the 2 shared CPU cores (2026-11-27).
Run: pytest -m slow tests/faults/test_signal_cases.py -n 2
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

import pytest
from fault_injection import TESTS, digest
from helpers import snapshot
from test_bad_inputs import TIMEOUT_S, _env, _limit, template, workspace  # noqa: F401 (template: the shared fixture)

pytestmark = pytest.mark.slow

CKPT = "run/checkpoints/last.ckpt"
TABLE = [f"tables/table3{suffix}" for suffix in (".md", ".tex", ".csv", ".json", ".png")]
AT_UPDATE = ["tables/table3-at-2.md", "tables/table3-at-2.json"]
EVAL_RECORD = "sweep/trials/*/eval/test.json"
PAGE = "# Table 3 layout: an earlier table\n<!-- ablate table: begin -->\nan earlier table\n<!-- ablate table: end -->\n"


def _child() -> None:
    """The harness's limits, and Ctrl-C as a terminal delivers it: an xdist worker runs with SIGINT ignored, a child
    inherits that, and Python installs its KeyboardInterrupt handler only where SIGINT is not ignored."""
    _limit()
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Command:
    """One writing command: its argv, the earlier outputs planted before it runs (path -> bytes), the outputs whose
    renames are signal points (relative fnmatch patterns), every file it may change (patterns), and the files it
    writes together (all new or all as they were)."""

    def __init__(self, argv, planted=None, renames=(), writes=None, together=(), codes=(130, 143)):
        self.argv, self.planted, self.renames, self.together, self.codes = argv, planted or {}, list(renames), list(together), codes
        self.writes = list(writes if writes is not None else renames)


COMMANDS = {
    "average": Command(
        ["average", CKPT, "run/checkpoints/best.ckpt", "--output", "run/avg5.ckpt", "--force"],
        {"run/avg5.ckpt": b"an earlier average\n"},
        ["run/avg5.ckpt"],
    ),
    "translate": Command(
        ["translate", CKPT, "--input", "corpus/five.en", "--device", "cpu", "--output", "run/five.hyp", "--force"],
        {"run/five.hyp": b"an earlier translation\n" * 5},
        ["run/five.hyp"],
    ),
    "evaluate": Command(
        ["evaluate", CKPT, "--split", "test", "--device", "cpu", "--hyp-out", "run/test.hyp", "--save-eval", "--force"],
        {"run/test.hyp": b"an earlier hypothesis\n", "run/eval/test.json": b'{"an earlier": "record"}\n'},
        ["run/test.hyp", "run/eval/test.json"],
    ),
    "table": Command(
        ["table", "sweep", "--out", "tables", "--force"],
        {path: (PAGE if path.endswith(".md") else f"an earlier {path}\n").encode() for path in TABLE},
        TABLE,
        writes=["tables/*"],
        together=TABLE,
    ),
    "table-at-update": Command(
        ["table", "sweep", "--out", "tables", "--at-update", "2", "--force"],
        {f"tables/table3-at-2{suffix}": f"an earlier table{suffix}\n".encode() for suffix in (".md", ".json")},
        AT_UPDATE,
        writes=["tables/*"],
        together=AT_UPDATE,
    ),
    "table-test": Command(  # each run's test record made first (RUN/eval/test.json), then the table
        ["table", "sweep", "--out", "tables", "--split", "test", "--device", "cpu", "--force"],
        {path: (PAGE if path.endswith(".md") else f"an earlier {path}\n").encode() for path in TABLE},
        [EVAL_RECORD],
        writes=["tables/*", EVAL_RECORD],
        together=TABLE,
    ),
    "archive-new": Command(["archive", "sweep", "arch2"], {}, ["arch2", ".arch2.archive-*.tmp/study.db"], writes=["arch2", "arch2/*"]),
    "archive-test": Command(  # each run's test record made first, in the study it archives, then the archive
        ["archive", "sweep", "arch2", "--split", "test", "--device", "cpu"],
        {},
        [EVAL_RECORD, "arch2"],
        writes=["arch2", "arch2/*", EVAL_RECORD],
    ),
    "archive-update": Command(["archive", "sweep", "arch"], {}, ["arch/study.db", "arch/trials/*/summary.json"], writes=["arch/*"]),
    "sweep": Command(
        ["sweep", "sweep.yaml"],
        {},
        ["sweep/results.csv", "sweep/results.json"],
        writes=["sweep/results.*", "sweep/study.db"],  # a re-run opens the study: its database is its own
        codes=(130, 75),  # docs/sweeps.md: Ctrl-C 130, SIGTERM 75 (running trials saved; none runs here)
    ),
}
TEMPORARY = ("*.tmp", "*.tmp/*", "*/.archive-incomplete", ".archive-incomplete")


def points(command: Command) -> list[tuple[str, str]]:
    """(point, the target pattern): before the command's first write, and between and after each output's rename."""
    return [("before", "*")] + [(at, out) for out in command.renames for at in ("between", "after")]


CASES = [
    pytest.param(name, at, out, sig, id=f"{name}-{at}-{out if out != '*' else 'first-write'}-{sig}")
    for name, command in COMMANDS.items()
    for at, out in points(command)
    for sig in ("SIGINT", "SIGTERM")
]


@pytest.mark.parametrize("name, at, out, sig", CASES)
def test_a_signal_while_writing_leaves_whole_files_and_no_temporary(template, tmp_path, name, at, out, sig):  # noqa: F811
    command = COMMANDS[name]
    w = workspace(template, tmp_path)
    for path, data in command.planted.items():
        (w / path).parent.mkdir(parents=True, exist_ok=True)
        (w / path).write_bytes(data)
    before = _files(w)
    record = tmp_path / "fired.json"
    pattern = "*" if out == "*" else f"{w}/{out}"
    argv = [str(TESTS / "fault_injection.py"), at, sig, pattern, str(record), "--", *command.argv]
    try:
        proc = subprocess.run(
            [sys.executable, *argv], cwd=w, env=_env(w), capture_output=True, text=True, timeout=TIMEOUT_S, preexec_fn=_child
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"ablate {' '.join(command.argv)} with {sig} {at} {out} ran past {TIMEOUT_S} s (a hang)")
    shown = f"ablate {' '.join(command.argv)}, {sig} {at} {out} -> exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert record.exists(), f"the point was never reached: {shown}"
    fired = json.loads(record.read_text())
    assert "Traceback" not in proc.stdout + proc.stderr, shown
    assert proc.returncode == command.codes[sig == "SIGTERM"], shown
    said = [line for line in (proc.stdout + proc.stderr).splitlines() if "stopped by" in line]
    assert len(said) == 1, f"not one line saying the command stopped: {shown}"
    after = _files(w)
    left = sorted(k for k in after.keys() - before.keys() if any(fnmatch(k, t) for t in TEMPORARY))
    assert not left, f"left behind: {left}: {shown}"
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    foreign = [k for k in changed if not any(fnmatch(k, p) for p in command.writes)]
    assert not foreign, f"changed, though the command does not write them: {foreign}: {shown}"
    target = Path(fired["target"])
    now = digest(target)
    if any(fnmatch(str(target.relative_to(w)), t) for t in TEMPORARY):  # a file of a temporary folder: gone with it
        assert not target.exists(), shown
    elif at == "before":
        assert now == fired["now"], f"{target} changed, though the signal came before the command wrote: {shown}"
    elif at == "between":  # as it was, or (a signal held while a set of files moves in) whole as written
        assert now in (fired["now"], fired["new"]), f"{target} is neither as it was nor as written: {shown}"
    else:
        assert now == fired["now"], f"{target} is not what the rename put there: {shown}"
    group = [k for k in command.together if k in changed]
    assert not group or group == command.together, f"of the files written together only {group} changed: {shown}"


def _files(w: Path) -> dict[str, bytes]:
    """Every file and folder of the workspace but lock files and the caches (a tokenizer cached is no output)."""
    return {k: v for k, v in snapshot(w).items() if not k.endswith(".lock") and not k.startswith("cache/")}


def test_the_cases_cover_every_writing_command_and_point():
    """Every writing command but train (its own signal tests: test_interrupt.py), both signals, each point."""
    assert {c.values[0].split("-")[0] for c in CASES} == {"average", "translate", "evaluate", "table", "archive", "sweep"}
    assert {(c.values[1], c.values[3]) for c in CASES} == {(a, s) for a in ("before", "between", "after") for s in ("SIGINT", "SIGTERM")}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_average_signalled_from_outside_while_it_writes_keeps_the_earlier_average(template, tmp_path, sig):  # noqa: F811
    """The issue's case end to end: `ablate average` stopped by a signal from another process (a job's SIGTERM, a
    user's Ctrl-C) while its temporary is written, caught there by the same injection point, which waits for it."""
    w = workspace(template, tmp_path)
    earlier = w / "run" / "avg5.ckpt"
    earlier.write_bytes((w / "run" / "checkpoints" / "best.ckpt").read_bytes())  # an earlier average: a whole checkpoint
    kept = earlier.read_bytes()
    fifo = tmp_path / "at-the-point"
    os.mkfifo(fifo)
    command = ["average", CKPT, "run/checkpoints/step=2.ckpt", "--output", "run/avg5.ckpt", "--force"]
    wrapper = [str(TESTS / "fault_injection.py"), "between", f"await:{fifo}", str(earlier), str(tmp_path / "fired.json"), "--"]
    proc = subprocess.Popen(
        [sys.executable, *wrapper, *command], cwd=w, env=_env(w), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_child,
    )  # fmt: skip
    try:
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # the child opens it for writing only at the point
        with os.fdopen(fd) as announced:
            ready, _, _ = select.select([announced], [], [], TIMEOUT_S)
            assert ready and announced.readline().startswith("between"), f"never reached the rename: {proc.poll()}"
        temporary = [p for p in (w / "run").iterdir() if fnmatch(p.name, ".avg5.ckpt.*.tmp")]
        assert len(temporary) == 1 and temporary[0].stat().st_size > 0, "not caught while writing its temporary"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        proc.kill()
    name = "SIGTERM" if sig == signal.SIGTERM else "Ctrl-C (SIGINT)"
    assert proc.returncode == 128 + sig, f"exit {proc.returncode}\n{out}\n{err}"
    assert out == "" and err.splitlines() == [f"ablate average: stopped by {name}; no file was left half-written or temporary"], err
    assert not [p.name for p in (w / "run").iterdir() if p.name.endswith(".tmp")], "a temporary was left behind"
    assert earlier.read_bytes() == kept, "the earlier average was changed"

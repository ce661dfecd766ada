"""Issue 38, the one rule for outputs, against every command that writes a path a user names: generated collisions
(each command x output = one of its inputs, by its name or a hard link; a symlink to a file elsewhere; a path inside
a study or a run the command does not own). Each runs `python -m ablate.cli` on a copy of test_bad_inputs' artefacts
(a trained run, a finished study, its archive) under the same address-space limit and timeout, and must exit 2 with
one line naming the output, every file of the workspace byte for byte as it was (the victim behind a link too).
Run: pytest -m slow tests/faults/test_output_paths.py -n 2
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from bad_input_cases import ARCH_TRIAL, TRIAL
from helpers import snapshot
from test_bad_inputs import TIMEOUT_S, _env, _limit, template, workspace  # noqa: F401 (template: the shared fixture)

pytestmark = pytest.mark.slow

CKPT = "run/checkpoints/last.ckpt"
# command -> (argv with {out}, its inputs: what output = input is tried with, the run it owns or None)
COMMANDS = {
    "translate": (["translate", CKPT, "--input", "corpus/five.en", "--device", "cpu", "--output", "{out}"], ["corpus/five.en", CKPT]),
    "evaluate": (
        ["evaluate", CKPT, "--src", "corpus/five.en", "--ref", "corpus/five.de", "--device", "cpu", "--hyp-out", "{out}"],
        ["corpus/five.en", "corpus/five.de", CKPT],
    ),
    "average": (["average", CKPT, "run/checkpoints/best.ckpt", "--output", "{out}", "--force"], [CKPT, "run/checkpoints/best.ckpt"]),
    "table": (["table", "sweep", "--out", "{out}"], []),  # writes a folder of tables: never one of its inputs
    "archive": (["archive", "sweep", "{out}"], []),
}
FOLDER_OUTPUT = {"table", "archive"}


def collisions(command: str) -> list[tuple[str, str]]:
    """(case id, the output path, relative to the workspace; 'link:NAME' makes NAME a symlink to victim.txt)."""
    _, inputs = COMMANDS[command]
    found = [(f"input-{Path(i).name}", i) for i in inputs] + [(f"hardlink-{Path(i).name}", f"hard:{i}") for i in inputs[:1]]
    if command == "table":
        found.append(("symlink", "tables-linked"))  # its page table3.md a link
    elif command != "archive":
        found.append(("symlink", "link:out.txt"))
    found += [("inside-study", f"arch/{'new' if command in FOLDER_OUTPUT else 'out.txt'}")]
    found += [("inside-run", f"{ARCH_TRIAL if command != 'average' else TRIAL}/{'new' if command in FOLDER_OUTPUT else 'out.txt'}")]
    if command == "archive":
        found.append(("inside-its-study", "sweep/arch"))
    return found


CASES = [pytest.param(cmd, out, id=f"{cmd}-{name}") for cmd in COMMANDS for name, out in collisions(cmd)]
CASES.append(pytest.param("sweep", "results.csv", id="sweep-results-symlink"))


def _prepare(w: Path, command: str, out: str) -> str:
    victim = w / "elsewhere" / "victim.txt"
    victim.parent.mkdir()
    victim.write_text("a file of the user's, elsewhere\n")
    if command == "sweep":
        (w / "sweep" / "results.csv").unlink()
        (w / "sweep" / "results.csv").symlink_to(victim)
        return "sweep/results.csv"
    if out.startswith("link:"):
        (w / out[5:]).symlink_to(victim)
        return out[5:]
    if out.startswith("hard:"):
        (w / "hard").hardlink_to(w / out[5:])
        return "hard"
    if out == "tables-linked":
        (w / out).mkdir()
        (w / out / "table3.md").symlink_to(victim)
    return out


@pytest.mark.parametrize("command, out", CASES)
def test_an_output_that_breaks_the_rule_is_refused_naming_it(template, tmp_path, command, out):  # noqa: F811
    w = workspace(template, tmp_path)
    out = _prepare(w, command, out)
    before = snapshot(w)
    argv = ["sweep", "sweep.yaml"] if command == "sweep" else [a.replace("{out}", out) for a in COMMANDS[command][0]]
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "ablate.cli", *argv], cwd=w, env=_env(w), capture_output=True, text=True, timeout=TIMEOUT_S,
            preexec_fn=_limit,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"ablate {' '.join(argv)} ran past {TIMEOUT_S} s")
    shown = f"ablate {' '.join(argv)} -> exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    errors = [line for line in proc.stderr.splitlines() if line.startswith(f"ablate {argv[0]}: error: ")]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and len(errors) == 1, shown
    assert Path(out).name in errors[0] or os.path.basename(out.rstrip("/")) in errors[0], shown
    assert any(why in errors[0] for why in ("is the input", "symbolic link", "is inside the", "would be inside the study")), shown
    after = snapshot(w)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k) and not k.endswith(".lock"))
    assert not changed, f"{changed} changed: {shown}"

"""Issue 18 item 7: a key given twice in a sweep or config file is an error naming the file, the key and both lines.

Today PyYAML keeps the last of two equal keys silently: a sweep with two rows of one name runs one of them, and a
config with a section or key written twice trains on whichever came last. Desired: exit 2, the message naming the
file, the key and the line numbers of both occurrences (1-based), wherever in the file the duplicate is.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import ablate, run_cli, write_experiment

PAD = "# padding, so that the duplicate lines have numbers no path or count in the message could hold by chance\n" * 9


def line_numbers(path: Path, line: str) -> list[int]:
    return [n for n, text in enumerate(path.read_text().splitlines(), 1) if text == line]


def assert_names_the_duplicate(rc: int, output: str, path: Path, key: str, lines: list[int]) -> None:
    assert len(lines) == 2
    assert rc == 2, f"exit {rc}; the file loaded: {output[-1500:]}"
    assert str(path) in output, output[-1500:]
    rest = output.replace(str(path), "<file>")
    assert key in rest, rest[-1500:]
    missing = [n for n in lines if not re.search(rf"(?<!\d){n}(?!\d)", rest)]
    assert not missing, f"line(s) {missing} not named: {rest[-1500:]}"


SWEEP_HEAD = """name: dup
base: {base}
out_dir: {out}
objective: {{metric: val/loss, direction: minimize}}
"""

SWEEPS = {
    "row-name": (
        "  A-h1:",
        "A-h1",
        """variants:
  base: {}
  A-h1:
    model.heads: 1
  A-h2:
    model.heads: 2
  A-h1:
    model.heads: 4
""",
    ),
    "override-in-a-row": (
        "    model.heads: 2",
        "model.heads",
        """variants:
  base: {}
  A-h2:
    model.heads: 1
    model.d_ff: 64
    model.heads: 2
""",
    ),
    "top-level": (
        "out_dir: {out}",
        "out_dir",
        """out_dir: {out}
variants:
  base: {}
""",
    ),
}


@pytest.mark.parametrize("case", list(SWEEPS))
def test_a_duplicate_key_in_a_sweep_file_is_an_error(tmp_path, capsys, case):
    marker, key, body = SWEEPS[case]
    (tmp_path / "base.yaml").write_text("model: {d_model: 32, heads: 4}\n")
    fields = {"base": tmp_path / "base.yaml", "out": tmp_path / "out"}
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP_HEAD.format(**fields) + PAD + body.replace("{out}", str(fields["out"])))
    if case == "override-in-a-row":
        lines = line_numbers(path, "    model.heads: 1") + line_numbers(path, "    model.heads: 2")
    else:
        lines = line_numbers(path, marker.replace("{out}", str(fields["out"])))
    rc, output = run_cli(capsys, "sweep", str(path), "--dry-run")
    assert_names_the_duplicate(rc, output, path, key, lines)


CONFIGS = {
    "nested-key": ("model.heads", "model:\n  heads: 4\n  d_model: 32\n" + PAD + "  heads: 8\n", "  heads: "),
    "section": ("model", "model:\n  heads: 4\ntrain:\n  max_steps: 5\n" + PAD + "model:\n  d_model: 64\n", "model:"),
}


@pytest.mark.parametrize("case", list(CONFIGS))
def test_a_duplicate_key_in_a_config_file_is_an_error_for_params(tmp_path, capsys, case):
    key, text, marker = CONFIGS[case]
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    lines = [n for n, line in enumerate(text.splitlines(), 1) if line.startswith(marker)]
    rc, output = run_cli(capsys, "params", str(path))
    # The key as written (heads) or dotted (model.heads): the last part must be named either way.
    assert_names_the_duplicate(rc, output, path, key.rsplit(".", 1)[-1], lines)


@pytest.mark.slow  # today the run trains (several seconds)
def test_a_duplicate_key_in_a_config_file_is_an_error_for_train(tmp_path):
    path = write_experiment(tmp_path, max_steps=4, val_every_steps=2, log_every_steps=2)
    path.write_text(path.read_text() + PAD + "seed: 1\n" + PAD + "seed: 2\n")
    lines = [n for n, line in enumerate(path.read_text().splitlines(), 1) if line.startswith("seed:")]
    proc = ablate("train", str(path))
    assert_names_the_duplicate(proc.returncode, proc.stdout + proc.stderr, path, "seed", lines)
    assert not (tmp_path / "run").exists()  # refused before anything was written

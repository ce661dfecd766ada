"""Issue 18 item 6: corpus lines dropped (blank, too long) are reported, recorded, and bounded; control characters warn.

Today the counts go only to a log.info nobody sees, summary.json has none, any share of the corpus may be dropped
silently, and a NUL (or other control character) in a sentence trains silently as <unk>. Desired:

- the counts are printed, naming the files, how many pairs and why;
- summary.json keeps them, in this structure (the fix follows it):
      summary["data"]["dropped"]["train"] == {"files": [SRC_PATH, TGT_PATH], "pairs": LINES_READ,
                                              "empty": N_BLANK_ON_EITHER_SIDE, "too_long": N_OVER_DATA_MAX_LEN}
  ("too_long": pairs with more than data.max_len tokens on a side, which training drops);
- more than `data.max_dropped_share` of the pairs dropped (default 0.01) fails before training, naming that
  setting; a larger share given explicitly is accepted;
- a control character other than tab in a line warns, naming the file and the 1-based line (`PATH:LINE`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import TRANSLATE, WORDS, ablate, write_experiment

pytestmark = pytest.mark.slow  # short training runs

N_TRAIN = 400


def experiment(tmp_path: Path) -> tuple[Path, Path]:
    """A 4-step run's config and its corpus folder."""
    return write_experiment(tmp_path, max_steps=4, val_every_steps=2, log_every_steps=2, keep_last=2), tmp_path / "corpus"


def edit_lines(path: Path, edits: dict[int, str]) -> None:
    """Replace 1-based lines of a corpus file."""
    lines = path.read_text().split("\n")
    for number, text in edits.items():
        lines[number - 1] = text
    path.write_text("\n".join(lines))


def too_long_pair() -> tuple[str, str]:
    src = " ".join(WORDS[i % len(WORDS)] for i in range(40))  # 40 words: more than data.max_len=32 tokens
    return src, " ".join(TRANSLATE[w] for w in src.split())


def test_dropped_pairs_are_printed_and_kept_in_the_summary(tmp_path):
    config, corpus = experiment(tmp_path)
    long_src, long_tgt = too_long_pair()
    edit_lines(corpus / "train.en", {10: "", 20: "   ", 30: long_src})  # 2 blank sources, 1 pair too long: 0.75 %
    edit_lines(corpus / "train.de", {30: long_tgt})
    proc = ablate("train", str(config))
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    dropped = summary.get("data", {}).get("dropped", {}).get("train")
    assert dropped is not None, f"summary.json has no data.dropped.train: keys {sorted(summary)}"
    assert (dropped["empty"], dropped["too_long"], dropped["pairs"]) == (2, 1, N_TRAIN), dropped
    assert dropped["files"] == [str(corpus / "train.en"), str(corpus / "train.de")], dropped
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if str(corpus / "train") in line]
    assert any(re.search(r"(?<![\d.])2(?![\d.])", line) and re.search(r"empty|blank", line) for line in lines), lines
    assert any(re.search(r"(?<![\d.])1(?![\d.])", line) and re.search(r"long|max_len", line) for line in lines), lines


def test_dropping_more_than_data_max_dropped_share_fails_naming_the_setting(tmp_path):
    config, corpus = experiment(tmp_path)
    edit_lines(corpus / "train.de", {n: "" for n in range(1, 401, 40)})  # 10 blank targets: 2.5 % > the default 1 %
    proc = ablate("train", str(config))
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ablate train: error:")]
    assert proc.returncode == 2 and errors, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    assert "data.max_dropped_share" in errors[-1] and str(corpus / "train") in errors[-1], errors[-1]
    assert not (tmp_path / "run" / "checkpoints").exists()  # refused before training

    allowed = ablate("train", str(config), "data.max_dropped_share=0.05")
    assert allowed.returncode == 0, allowed.stderr[-3000:]


def test_a_control_character_in_a_line_warns_naming_the_file_and_line(tmp_path):
    config, corpus = experiment(tmp_path)
    edit_lines(corpus / "train.en", {5: "the dog\x00 runs"})
    edit_lines(corpus / "train.de", {7: "eht\x07x god"})
    proc = ablate("train", str(config))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert f"{corpus / 'train.en'}:5" in out and f"{corpus / 'train.de'}:7" in out, out[-2000:]

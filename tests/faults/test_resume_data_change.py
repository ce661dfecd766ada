"""A corpus edited between a run's start and its resume (issue 32 item 5).

Today, editing a corpus file in place (same name, one line changed) and then `ablate train --resume` gives the
tokenizer cache a new key, so a new tokenizer is trained and the data re-encoded with it while the checkpoint's
weights learned the old ids: training goes on, with no word. Desired: a run records a fingerprint of its corpus
files and tokenizer at its start; a resume (`--resume` or `--auto-resume`) whose files differ is refused before
anything in the run directory changes, naming the file and what changed; `--accept-data-change` goes on anyway,
always with the run's own tokenizer; a run directory from before fingerprints resumes with a one-line note.
The run here was preempted (SIGTERM) at step 7 of 20.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import torch
from fault_injection import fault_plugin
from helpers import ablate, snapshot, write_experiment
from lightning.pytorch.callbacks import Callback

pytestmark = pytest.mark.slow  # one trained run (about 10 s) plus a few seconds per resume


@pytest.fixture(scope="module")
def preempted(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("data-change")
    proc = ablate("train", str(write_experiment(tmp, max_steps=20, plugins=[fault_plugin(tmp, signal_at="7:TERM")])))
    assert proc.returncode == 75, proc.stderr[-3000:]
    shutil.copytree(tmp / "run", tmp / "pristine")
    shutil.copytree(tmp / "corpus", tmp / "pristine-corpus")
    return tmp


@pytest.fixture
def run(preempted) -> tuple[Path, Path, Path]:
    """(config, out_dir, corpus folder) of the preempted run, both restored in place (the config names their paths)."""
    for name, pristine in (("run", "pristine"), ("corpus", "pristine-corpus")):
        shutil.rmtree(preempted / name)
        shutil.copytree(preempted / pristine, preempted / name)
    return preempted / "run.yaml", preempted / "run", preempted / "corpus"


def edit_line(path: Path, number: int, text: str) -> None:
    """Replace one line of a corpus file in place: same name, same line count."""
    lines = path.read_text().splitlines()
    lines[number] = text
    path.write_text("".join(line + "\n" for line in lines))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def steps(run_dir: Path) -> int:
    return json.loads((run_dir / "summary.json").read_text())["steps"]


class TokenizerProbe(Callback):
    """The bytes of the tokenizer the run's data module encodes with, as training starts."""

    def __init__(self):
        self.used: list[bytes] = []

    def on_fit_start(self, trainer, module):
        self.used.append(trainer.datamodule.tokenizer.path.read_bytes())


@pytest.mark.parametrize(("edited", "flag"), [("train.de", "--resume"), ("valid.en", "--auto-resume")])
def test_a_resume_after_a_corpus_edit_is_refused_naming_the_file_and_touching_nothing(run, edited, flag):
    config, run_dir, corpus = run
    edit_line(corpus / edited, 3, "the old dog sleeps" if edited.endswith(".en") else "eht xdlo xgod xspeels")
    before = snapshot(run_dir)
    proc = ablate("train", str(config), flag)
    assert snapshot(run_dir) == before, f"the run directory changed: {sorted(set(snapshot(run_dir)) ^ set(before))}"
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ablate train: error:")]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert errors and str(corpus / edited) in errors[-1] and "sha256" in errors[-1], proc.stderr[-2000:]
    assert "--accept-data-change" in errors[-1], errors[-1]
    untouched = "train.en" if edited != "train.en" else "train.de"
    assert str(corpus / untouched) not in errors[-1], errors[-1]  # only what changed is named


def test_accept_data_change_resumes_with_the_runs_own_tokenizer_and_records_the_new_files(run):
    from ablate.data.tokenizer import load_or_train_tokenizer
    from ablate.experiment import load_config
    from ablate.run.train import train

    config, run_dir, corpus = run
    run_tokenizer = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["tokenizer_model"]
    for number in range(0, 400, 4):  # words and letters the corpus never had: its tokenizer would change
        edit_line(corpus / "train.en", number, "the quokka jumps over a fox")
    cfg = load_config([str(config)])
    assert sha256(load_or_train_tokenizer(cfg.data, corpus / "train.en", corpus / "train.de").path.read_bytes()) != sha256(run_tokenizer)

    probe = TokenizerProbe()
    summary = train(cfg, callbacks=[probe], resume=True, accept_data_change=True)
    assert summary["steps"] == 20
    assert probe.used and sha256(probe.used[0]) == sha256(run_tokenizer), "the resumed run encoded its data with another tokenizer"
    record = json.loads((run_dir / "fingerprint.json").read_text())
    earlier = json.loads((run_dir / "fingerprint.before-resume-1.json").read_text())
    now = sha256((corpus / "train.en").read_bytes())
    assert record["corpus"]["train.en"]["sha256"] == now != earlier["corpus"]["train.en"]["sha256"]
    assert record["tokenizer"]["sha256"] == earlier["tokenizer"]["sha256"] == sha256(run_tokenizer)


def test_a_run_records_its_fingerprint_and_resumes_normally_on_the_same_files(run):
    config, run_dir, corpus = run
    record = json.loads((run_dir / "fingerprint.json").read_text())
    names = {f"{split}.{lang}" for split in ("train", "valid", "test") for lang in ("en", "de")}
    assert set(record["corpus"]) == names
    for name in names:
        entry = record["corpus"][name]
        data = (corpus / name).read_bytes()
        assert entry["path"] == str(corpus / name) and entry["size"] == len(data) and entry["sha256"] == sha256(data)
    saved = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["tokenizer_model"]
    assert record["tokenizer"]["sha256"] == sha256(saved)

    (corpus / "train.en").touch()  # a new mtime, the same bytes: not a change
    proc = ablate("train", str(config), "--auto-resume")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert steps(run_dir) == 20 and "fingerprint" not in proc.stderr
    assert not list(run_dir.glob("fingerprint.before-*"))


def test_a_run_dir_without_a_fingerprint_resumes_with_a_note(run):
    config, run_dir, corpus = run
    (run_dir / "fingerprint.json").unlink(missing_ok=True)
    proc = ablate("train", str(config), "--resume")
    assert proc.returncode == 0, proc.stderr[-3000:]
    notes = [line for line in proc.stderr.splitlines() if "no fingerprint" in line]
    assert len(notes) == 1 and str(run_dir) in notes[0], proc.stderr[-3000:]
    assert steps(run_dir) == 20


def test_a_forced_change_of_tokenizer_settings_keeps_the_runs_tokenizer_and_says_so(run, caplog):
    """data.character_coverage changed with --force gives the tokenizer cache a new key, as a corpus edit does: the
    resumed run still encodes with its own tokenizer, and says the setting applies to a new run only."""
    from ablate.data.tokenizer import load_or_train_tokenizer
    from ablate.experiment import load_config
    from ablate.run import resume_checks
    from ablate.run import train as train_module

    config, run_dir, corpus = run
    run_tokenizer = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["tokenizer_model"]
    cfg = load_config([str(config)], ["data.character_coverage=0.98"])
    assert sha256(load_or_train_tokenizer(cfg.data, corpus / "train.en", corpus / "train.de").path.read_bytes()) != sha256(run_tokenizer)
    probe = TokenizerProbe()
    resume_checks.log.addHandler(caplog.handler)
    try:
        assert train_module.train(cfg, callbacks=[probe], resume=True, force=True)["steps"] == 20
    finally:
        resume_checks.log.removeHandler(caplog.handler)
    assert probe.used and sha256(probe.used[0]) == sha256(run_tokenizer), "the resumed run encoded its data with another tokenizer"
    assert "the resumed run keeps its tokenizer: data.character_coverage apply to a new run only" in caplog.text
    assert not list(run_dir.glob("fingerprint.before-*"))  # the corpus did not change: the start's record stands

"""`ablate archive`: a study's evidence without checkpoints, W&B files or corpus text, that tabulates exactly as the
study does, never replaces a newer archive with an older study, and scores finished runs on test before their
checkpoints are left behind."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest

from ablate.archive import archive
from ablate.cli import main
from ablate.eval_file import read_eval_file, write_eval_file
from ablate.table.load import runs_from_dirs
from ablate.table.significance import collect

REFS = ["a dog runs on the beach .", "two men play chess in a park .", "the girl reads a red book .", "a cat sleeps ."]
HYPS = {1: ["a dog runs on a beach .", "two men play chess .", "a girl reads a book .", "the cat sleeps ."], 2: REFS}


def finished_run(study: Path, name: str, seed: int, splits=("valid",)) -> Path:
    run = study / "trials" / name
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "last.ckpt").write_bytes(b"weights")
    (run / "wandb" / "offline-run-x").mkdir(parents=True)
    (run / "wandb" / "offline-run-x" / "run-x.wandb").write_bytes(b"w&b")
    (run / "config.yaml").write_text(f"seed: {seed}\nsweep:\n  row: base\n")
    (run / "summary.json").write_text(json.dumps({"last": {"val/bleu": 1.0}, "steps": 100}))
    (run / "metrics.csv").write_text("step,val/ppl\n100,9.5\n")
    (run / "train.log.lock").write_text("")
    for split in splits:
        write_eval_file(
            run,
            split,
            dataset="multi30k",
            checkpoint="avg.ckpt",
            indices=range(len(REFS)),
            hypotheses=HYPS[seed],
            references=REFS,
            nll=[3.0, 4.0, 5.0, 1.5],
            tokens=[7, 8, 7, 4],
        )
    return run


def study_db(study: Path, finished: int) -> None:
    s = optuna.create_study(storage=f"sqlite:///{study / 'study.db'}", study_name="t")
    for _ in range(finished):
        s.tell(s.ask(), 1.0)


@pytest.fixture
def study(tmp_path) -> Path:
    root = tmp_path / "study"
    finished_run(root, "0000-base-s1", 1)
    finished_run(root, "0001-base-s2", 2)
    (root / "trials" / "0002-base-s3" / "checkpoints").mkdir(parents=True)  # still training: no summary
    study_db(root, 2)
    return root


def test_archive_keeps_evidence_without_text_weights_or_wandb(study, tmp_path):
    dest = tmp_path / "archive"
    report = archive(study, dest)
    assert report.trials == ["trials/0000-base-s1", "trials/0001-base-s2"] and report.unfinished == ["0002-base-s3"]
    files = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert files == [
        "study.db",
        *(
            f"trials/{t}/{f}"
            for t in ("0000-base-s1", "0001-base-s2")
            for f in ("config.yaml", "eval/valid.json", "metrics.csv", "summary.json")
        ),
    ]
    text = "".join(p.read_text(errors="replace") for p in dest.rglob("*.json"))
    assert not any(sentence in text for sentence in REFS + HYPS[1])  # no corpus text, no hypothesis
    rec = read_eval_file(dest / "trials/0000-base-s1/eval/valid.json", "valid")
    assert rec.hypotheses is None and rec.references is None and len(rec.bleu_stats) == 4
    assert optuna.load_study(study_name="t", storage=f"sqlite:///{dest / 'study.db'}").trials[1].state.name == "COMPLETE"


def test_archived_study_tabulates_as_the_study(study, tmp_path):
    archive(study, tmp_path / "archive")
    live, kept = runs_from_dirs(study), runs_from_dirs(tmp_path / "archive")
    ev_live, ev_kept = collect(live, "valid"), collect(kept, "valid")
    assert [r.bleu for r in kept] == [r.bleu for r in live] and [r.ppl for r in kept] == [r.ppl for r in live]
    assert kept[1].bleu == pytest.approx(100.0) and 0 < kept[0].bleu < 99  # seed 2 copies the references
    for a, b in zip(live, kept):
        assert (ev_kept.per_run[b.source]["bleu"] == ev_live.per_run[a.source]["bleu"]).all()
    assert ev_kept.bleu_signature == ev_live.bleu_signature and ev_kept.sentences == 4


def test_archive_never_replaces_a_newer_archive_and_keeps_what_dest_has(study, tmp_path):
    dest = tmp_path / "archive"
    archive(study, dest)
    (dest / "trials" / "0009-extra").mkdir()
    (dest / "trials" / "0009-extra" / "summary.json").write_text("{}")
    older = tmp_path / "older"
    finished_run(older, "0000-base-s1", 1)
    study_db(older, 1)
    before = (dest / "study.db").read_bytes()
    with pytest.raises(ValueError, match=r"holds 2 finished trials the study's .* does not \(t trial 0, t trial 1\)"):
        archive(older, dest)
    assert (dest / "study.db").read_bytes() == before and (dest / "trials" / "0009-extra" / "summary.json").exists()
    with pytest.raises(ValueError, match="inside the study"):
        archive(study, study / "archive")


def test_archive_refuses_a_copy_another_machine_continued_from_the_same_archive(study, tmp_path):
    """Two machines restore one archive and each finishes a different trial: the first to archive back extends it (a
    superset of its trials), the second would drop that trial from the database, so it is refused, naming it."""
    import shutil

    dest = tmp_path / "archive"
    archive(study, dest)
    machines = {}
    for name in ("a", "b"):
        machines[name] = tmp_path / name
        shutil.copytree(dest, machines[name])
        s = optuna.load_study(study_name="t", storage=f"sqlite:///{machines[name] / 'study.db'}")
        s.tell(s.ask(), 2.0)
    archive(machines["a"], dest)
    assert len(optuna.load_study(study_name="t", storage=f"sqlite:///{dest / 'study.db'}").trials) == 3
    before = (dest / "study.db").read_bytes()
    with pytest.raises(ValueError, match=r"holds 1 finished trials the study's .* does not \(t trial 2\).*another machine"):
        archive(machines["b"], dest)
    assert (dest / "study.db").read_bytes() == before


def test_archive_scores_runs_without_a_test_record_first(study, tmp_path):
    scored = []

    def evaluate(run: Path) -> None:
        scored.append(run.name)
        finished_run(tmp_path / "scratch" / run.name, "x", 1, splits=("test",))
        (run / "eval" / "test.json").write_bytes((tmp_path / "scratch" / run.name / "trials/x/eval/test.json").read_bytes())

    (study / "trials/0001-base-s2/eval/test.json").write_bytes(
        (study / "trials/0001-base-s2/eval/valid.json").read_bytes().replace(b'"valid"', b'"test"')
    )
    report = archive(study, tmp_path / "archive", evaluate, "test")
    assert scored == ["0000-base-s1"] and report.evaluated == ["trials/0000-base-s1"]
    assert read_eval_file(tmp_path / "archive/trials/0000-base-s1/eval/test.json", "test").bleu_stats is not None


def test_archive_refuses_a_malformed_record_naming_it(study, tmp_path, capsys):
    (study / "trials/0001-base-s2/eval/valid.json").write_text('{"split": "valid"}')
    assert main(["archive", str(study), str(tmp_path / "archive")]) == 2
    err = capsys.readouterr().err
    assert "0001-base-s2/eval/valid.json" in err and "missing key 'nll'" in err


def test_archive_command_reports_what_it_kept(study, tmp_path, capsys):
    assert main(["archive", str(study), str(tmp_path / "archive")]) == 0
    out = capsys.readouterr().out
    assert "archived 2 finished runs" in out and "with the study database" in out and "0002-base-s3" in out

"""The GPU study's flow rehearsed on a CPU (docs/table3-gpu.md): a two-trial tiny study run through two chunks of
benchmarks/study_chunk.py, its archive "committed" between them into a fresh clone with no runs/ folder, where the
second chunk finishes the trial the first cut and trains nothing the first finished; and benchmarks/pilot_plan.py,
which turns a pilot into the study's seeds, checked against `ablate table`'s own seed plan on the CPU study."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from types import SimpleNamespace

import optuna
import pytest
import yaml
from helpers import tiny_experiment

from ablate.config import to_yaml
from ablate.sweep.ledger import row_of
from ablate.table.finished_runs import check_rows, runs_from_dirs

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import pilot_plan  # noqa: E402
import study_chunk  # noqa: E402

TRAIN = {"max_steps": 10, "val_every_steps": 5, "keep_last": 2, "final_average": 2, "val_bleu": False, "beam_size": 1, "num_threads": 1}
SWEEP = {
    "name": "tiny",
    "base": "experiments/tiny.yaml",
    "objective": {"metric": "val/bleu", "direction": "maximize"},
    "seeds": [1],
    # base finishes in seconds; long trains for 60 s of wall time, longer than all of chunk 1's sweep on any machine
    "variants": {"base": {}, "long": {"train.max_steps": 100000, "train.max_time": 60}},
    "workers": 1,
    "out_dir": "runs/sweeps/tiny",
}


def clone(tmp_path: Path, name: str, sweep: dict = SWEEP) -> Path:
    """A checkout as a fresh machine gets it: the experiment and sweep files, no runs/ and no tokenizer cache."""
    root = tmp_path / name
    (root / "experiments").mkdir(parents=True)
    (root / "sweeps").mkdir()
    (root / "experiments" / "tiny.yaml").write_text(to_yaml(tiny_experiment(tmp_path, train=TRAIN, data={"cache_dir": None})))
    (root / "sweeps" / "tiny.yaml").write_text(yaml.safe_dump(sweep, sort_keys=False))
    return root


def pin_code(tmp_path: Path) -> Path:
    """A copy of ablate's source for every chunk to import, as a GPU session carries the study's pinned wheel: the
    checkout's src/ may change between chunks (others edit it), which the chunk would rightly refuse."""
    shutil.copytree(ROOT / "src" / "ablate", tmp_path / "pin" / "ablate", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "pin"


def chunk(root: Path, pin: Path, minutes: float, *flags: str) -> tuple[subprocess.CompletedProcess, dict]:
    logs = root / "chunk-logs"
    env = {k: v for k, v in os.environ.items() if k not in ("ABLATE_SWEEP_STORAGE", "OUT")}
    env |= {"ABLATE_CACHE": str(root / ".cache"), "WANDB_MODE": "disabled", "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(pin), *filter(None, [os.environ.get("PYTHONPATH")])])
    cmd = [sys.executable, str(ROOT / "benchmarks" / "study_chunk.py"), "sweeps/tiny.yaml", "studies/tiny", "--workers", "1"]
    cmd += ["--minutes", str(minutes), "--reserve", "20", "--device", "cpu", "--logs", str(logs), *flags]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    record = json.loads((logs / "chunk.json").read_text()) if (logs / "chunk.json").is_file() else {}
    return proc, record


def trials(db: Path) -> list:
    copy = db.parent / "read.db"
    shutil.copyfile(db, copy)
    try:
        return optuna.load_study(study_name="tiny", storage=f"sqlite:///{copy}").get_trials()
    finally:
        copy.unlink()


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def rows(record: dict, key: str) -> list[tuple]:
    return [(t["row"], t["seed"]) for t in record[key]]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_chunks_finish_each_trial_once_and_restart_the_cut_one_from_scratch(tmp_path):
    pin = pin_code(tmp_path)
    first = clone(tmp_path, "clone1")
    proc, rec = chunk(first, pin, 1.2)  # the sweep is stopped at 52 s: base finished, long still training
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert rows(rec, "finished") == [("base", 1)] and rows(rec, "cut") == [("long", 1)], rec
    assert rec["left"] == [["long", 1]] and rec["problems"] == [] and rec["sweep_exit"] == 75
    archive1 = first / "studies" / "tiny"
    assert sorted(p.name for p in (archive1 / "trials").iterdir()) == ["0000-base-s1"]  # the cut trial is left out
    assert (archive1 / "trials" / "0000-base-s1" / "eval" / "test.json").is_file() and not list(archive1.rglob("*.ckpt"))
    states = {t.number: (t.state.name, row_of(t), t.user_attrs.get("preempted")) for t in trials(archive1 / "study.db")}
    assert states == {0: ("COMPLETE", ("base", 1), None), 1: ("FAIL", ("long", 1), True)}
    assert (first / "runs" / "sweeps" / "tiny" / "trials" / "0001-long-s1" / "checkpoints").is_dir()  # saved, never carried

    # "Commit" and clone: the tarball the chunk brought back, unpacked into a fresh checkout's empty archive folder.
    second = clone(tmp_path, "clone2")
    with tarfile.open(first / "chunk-logs" / "archive-update.tar.gz") as tar:
        tar.extractall(second / "studies" / "tiny", filter="data")
    assert files(second / "studies" / "tiny") == files(archive1) and not (second / "runs").exists()

    # A run the database does not mark finished makes the archive unusable: the chunk refuses before training.
    third = clone(tmp_path, "clone3")
    shutil.copytree(archive1, third / "studies" / "tiny")
    shutil.copytree(archive1 / "trials" / "0000-base-s1", third / "studies" / "tiny" / "trials" / "0001-long-s1")
    proc3, _ = chunk(third, pin, 1.0)
    assert proc3.returncode == 2 and "0001-long-s1: a run whose trial the study does not mark finished" in proc3.stdout, proc3.stdout

    proc, rec = chunk(second, pin, 4.0)  # ends when the study does
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert rec["finished"] == [{"trial": 2, "row": "long", "seed": 1, "minutes": rec["finished"][0]["minutes"]}], rec
    assert rec["cut"] == [] and rec["left"] == [] and rec["problems"] == [] and rec["sweep_exit"] == 0
    sweep_log = (second / "chunk-logs" / "sweep.log").read_text()
    assert "trial 2 (long-s1) started in" in sweep_log and "continues" not in sweep_log and "(base-s1) started" not in sweep_log
    archive2 = second / "studies" / "tiny"
    assert sorted(p.name for p in (archive2 / "trials").iterdir()) == ["0000-base-s1", "0002-long-s1"]
    before, after = files(archive1 / "trials" / "0000-base-s1"), files(archive2 / "trials" / "0000-base-s1")
    assert after == before  # the first chunk's run, byte for byte
    done = [t for t in trials(archive2 / "study.db") if t.state.name == "COMPLETE"]
    assert sorted((row_of(t), t.number) for t in done) == [(("base", 1), 0), (("long", 1), 2)]  # each row and seed once
    assert "continues" not in next(t for t in done if t.number == 2).user_attrs  # from scratch, not from trial 1's checkpoint
    assert not (second / "runs" / "sweeps" / "tiny" / "trials" / "0000-base-s1" / "checkpoints").exists()  # never retrained
    assert (archive2 / "trials" / "0002-long-s1" / "eval" / "test.json").is_file() and not list(archive2.rglob("*.ckpt"))
    check_rows(runs_from_dirs(archive2))  # `ablate table` would accept it: no row and seed twice
    history = [json.loads(line) for line in (archive2 / "chunks.jsonl").read_text().splitlines()]
    assert len(history) == 2 and history[0]["code"] == history[1]["code"] and history[1]["finished_in_all"] == 2


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_member_group_cut_by_a_chunks_end_trains_again_as_a_group_in_the_next(tmp_path):
    """Each row's two seeds train as one member model (docs/members.md): the chunk archives the finished group's
    members as ordinary trials, and the cut group's members start over together, as new trials, next chunk."""
    pin = pin_code(tmp_path)
    sweep = {**SWEEP, "seeds": [1, 2], "members": 2}
    first = clone(tmp_path, "clone1", sweep)
    proc, rec = chunk(first, pin, 1.2)  # stopped at 52 s: base's group finished, long's still training
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert rows(rec, "finished") == [("base", 1), ("base", 2)] and rows(rec, "cut") == [("long", 1), ("long", 2)], rec
    assert rec["problems"] == [] and rec["sweep_exit"] == 75
    archive1 = first / "studies" / "tiny"
    assert sorted(p.name for p in (archive1 / "trials").iterdir()) == ["0000-base-s1", "0001-base-s2"]
    assert not list(archive1.rglob("*.ckpt"))
    for name, index in (("0000-base-s1", 0), ("0001-base-s2", 1)):  # trained as members, archived as runs
        config = yaml.safe_load((archive1 / "trials" / name / "config.yaml").read_text())
        assert config["members"]["index"] == index and (archive1 / "trials" / name / "eval" / "test.json").is_file()

    second = clone(tmp_path, "clone2", sweep)
    with tarfile.open(first / "chunk-logs" / "archive-update.tar.gz") as tar:
        tar.extractall(second / "studies" / "tiny", filter="data")
    proc, rec = chunk(second, pin, 4.0)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert [(t["trial"], t["row"], t["seed"]) for t in rec["finished"]] == [(4, "long", 1), (5, "long", 2)], rec
    assert rec["cut"] == [] and rec["left"] == [] and rec["problems"] == [] and rec["sweep_exit"] == 0
    archive2 = second / "studies" / "tiny"
    assert sorted(p.name for p in (archive2 / "trials").iterdir()) == ["0000-base-s1", "0001-base-s2", "0004-long-s1", "0005-long-s2"]
    done = [t for t in trials(archive2 / "study.db") if t.state.name == "COMPLETE"]
    assert sorted(row_of(t) for t in done) == [("base", 1), ("base", 2), ("long", 1), ("long", 2)]  # each once
    assert not list(archive2.rglob("*.ckpt"))
    check_rows(runs_from_dirs(archive2))
    history = [json.loads(line) for line in (archive2 / "chunks.jsonl").read_text().splitlines()]
    assert len(history) == 2 and history[1]["finished_in_all"] == 4


def test_a_chunk_refuses_a_used_out_dir_and_other_code(tmp_path, monkeypatch):
    root = clone(tmp_path, "clone")
    monkeypatch.chdir(root)
    out_dir = root / "runs" / "sweeps" / "tiny"
    out_dir.mkdir(parents=True)
    (out_dir / "left-over").write_text("a warm machine's last chunk")
    argv = ["sweeps/tiny.yaml", "studies/tiny", "--logs", str(tmp_path / "logs"), "--minutes", "1", "--reserve", "10"]
    assert study_chunk.main(argv) == 2
    assert "is not empty: a chunk starts from the archive alone" in (tmp_path / "logs" / "chunk.log").read_text()
    (root / "studies" / "tiny").mkdir(parents=True)
    (root / "studies" / "tiny" / "chunks.jsonl").write_text(json.dumps({"code": "0123456789abcdef"}) + "\n")
    assert study_chunk.main([*argv, "--clean"]) == 2
    assert "the archive's chunks ran ablate code 0123456789abcdef" in (tmp_path / "logs" / "chunk.log").read_text()
    assert (out_dir / "left-over").is_file()  # refused before --clean emptied anything


def run(seed: int, steps: int, ppl: float, bleu: float) -> SimpleNamespace:
    return SimpleNamespace(config={"seed": seed}, steps=steps, ppl=ppl, bleu=bleu)


def test_convergence_needs_three_seeds_a_small_ppl_bound_and_a_small_bleu_gain():
    base = [run(s, 100, 10.0, 30.0) for s in (1, 2, 3)]
    flat = {"base": base, "base-2x": [run(1, 200, 9.99, 30.1), run(2, 200, 9.98, 30.2), run(3, 200, 9.995, 29.9)]}
    assert pilot_plan.convergence(flat, "base", ["base-2x"])["converged"] is True
    improving = {"base": base, "base-2x": [run(1, 200, 9.5, 30.1), run(2, 200, 9.6, 30.2), run(3, 200, 9.55, 29.9)]}
    assert "upper bound +" in pilot_plan.convergence(improving, "base", ["base-2x"])["why"]
    assert pilot_plan.convergence(improving, "base", ["base-2x"])["converged"] is False
    bleu_up = {"base": base, "base-2x": [run(1, 200, 9.99, 30.5), run(2, 200, 9.98, 30.4), run(3, 200, 9.995, 30.3)]}
    assert pilot_plan.convergence(bleu_up, "base", ["base-2x"])["converged"] is False
    two = {"base": base, "base-2x": flat["base-2x"][:2]}
    assert pilot_plan.convergence(two, "base", ["base-2x"])["converged"] is False
    worse = {"base": base, "base-2x": [run(1, 200, 10.5, 29.0), run(2, 200, 10.4, 29.2), run(3, 200, 10.6, 29.1)]}
    assert "past the optimum" in pilot_plan.convergence(worse, "base", ["base-2x"])["why"]


@pytest.mark.slow
def test_pilot_plan_on_the_cpu_study_matches_ablate_tables_seed_plan(tmp_path):
    study = ROOT / "studies" / "table3-small"
    if not (study / "study.db").is_file():
        pytest.skip("needs the CPU study's archive")
    from ablate.table.compare import make_table
    from ablate.table.sentence_records import collect

    out = tmp_path / "plan.json"
    argv = [str(study), "--longer", "base-2x", "base-2x-seed5", "--reference", str(study), "--json", str(out)]
    assert pilot_plan.main(argv) == 0
    plan = json.loads(out.read_text())
    assert plan["convergence"]["seeds"] == [2, 5] and plan["convergence"]["converged"] is False  # 2 seeds decide nothing
    assert plan["convergence"]["ppl_improvement"]["mean"] > 0.05  # the CPU study's runs were still improving
    assert plan["plan"]["seeds"] >= 10 and plan["plan"]["base_seeds"] >= 20 and plan["plan"]["predicted_rows"] >= 14
    # The MDE model is `ablate table`'s: with its family (11 rows) and the base's 5 seeds kept, each reference row needs
    # the seeds the table's own plan line gives.
    runs = runs_from_dirs(study)
    table = make_table(runs, collect(runs, "valid"), target_mde=1.0)
    var = plan["base_noise"]["variance"]
    for ref in plan["reference"]:
        line = next(ln for ln in table.lines if ln["row"] == ref["row"])
        need = next(n for n in range(2, 101) if pilot_plan.mde(ref["sentences"], ref["ratio"] * var, var, n, max(n, 5), 11) <= 1.0)
        assert need == line["bleu"]["plan_seeds"], ref["row"]


@pytest.mark.slow  # builds every row of the study on the meta device: seconds
def test_the_gpu_study_keeps_the_papers_ratios_at_dk_8_or_more_with_its_pilot_at_l_and_2l(monkeypatch):
    from collections import Counter

    from ablate.config.paper import TABLE3
    from ablate.sweep.load import load_sweep

    monkeypatch.chdir(ROOT)
    study, paper = load_sweep("sweeps/table3-gpu.yaml"), load_sweep("sweeps/table3.yaml")
    order = ["base", "A", "B", "D", "E", "C", "big"]  # the groups whose effect should not depend on the data's size first
    assert list(study.variants) == [r.name for g in order for r in TABLE3 if r.group == g]
    ours0, theirs0 = study.config_for({}), paper.config_for({})
    for row in TABLE3:
        ours, theirs = study.config_for(study.variants[row.name]), paper.config_for(paper.variants[row.name])
        assert min(ours.model.head_dims) >= 8, row.name
        for key in ("enc_layers", "dec_layers", "d_model", "d_ff", "heads"):
            ratio = getattr(ours.model, key) / getattr(ours0.model, key)
            assert ratio == getattr(theirs.model, key) / getattr(theirs0.model, key), (row.name, key)
        for i in (0, 1):
            assert ours.model.head_dims[i] / ours0.model.head_dims[i] == theirs.model.head_dims[i] / theirs0.model.head_dims[i], row.name
        assert (ours.model.dropout, ours.train.label_smoothing, ours.model.positional) == (
            theirs.model.dropout,
            theirs.train.label_smoothing,
            theirs.model.positional,
        )
        assert ours.train.max_steps == ours0.train.max_steps  # big too: every trial fits one chunk
    seeds = Counter(row for row, _ in study.rows())
    assert seeds.pop("base") >= 20 and min(seeds.values()) >= 10
    assert (study.basis.stop, study.basis.weights, study.basis.exempt) == ("steps", "last-5", ())
    pilot = load_sweep("sweeps/table3-gpu-pilot.yaml")
    runs = {row: [s for r, s in pilot.rows() if r == row] for row in pilot.variants}
    assert runs["base"] == runs["base-2x"] and len(runs["base"]) >= 3 and not set(runs["base"]) & {s for _, s in study.rows()}
    assert pilot.config_for(pilot.variants["base-2x"]).train.max_steps == 2 * ours0.train.max_steps
    assert pilot.config_for({}) == study.config_for({})  # the pilot's base is the study's

"""Real sweeps: trials train in child processes, workers share one study, W&B runs are grouped.

Each test writes a tiny corpus and base config; a trial trains a 1+1 layer model for a few dozen
steps, so a whole sweep takes seconds to a minute on 2 CPU cores.
"""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import optuna
import pytest
import yaml
from fault_injection import fault_plugin
from helpers import trial_states
from optuna.trial import TrialState

from ablate.files.wandb_offline import find_runs, latest_of_each, read_run
from ablate.sweep.load import load_sweep
from ablate.sweep.worker import open_sweep_study

pytestmark = pytest.mark.slow  # real training runs, sweeps or subprocesses: seconds to a minute each


def run_sweep(path: Path, *args: str, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "ablate.cli", "sweep", str(path), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def trials(path: Path, storage: str | None = None) -> list[optuna.trial.FrozenTrial]:
    sweep = load_sweep(path)
    url = storage or f"sqlite:///{sweep.out_dir.resolve() / 'study.db'}"
    return optuna.load_study(study_name=sweep.name, storage=url).get_trials()


def completed_rows(ts) -> Counter:
    return Counter(t.user_attrs["row"] for t in ts if t.state == TrialState.COMPLETE)


def test_variants_sweep_with_two_workers_runs_each_row_once_logged_to_wandb_groups(sweep_env):
    tmp, write = sweep_env
    path = write(
        name="grid",
        variants={"base": {}, "A-h1": {"model.heads": 1}, "E-learned": {"model.positional": "learned"}, "C-ff32": {"model.d_ff": 32}},
        overrides={"logging.wandb": True, "logging.project": "tests"},
    )
    proc = run_sweep(path, "--workers", "2")
    ts = trials(path)
    assert completed_rows(ts) == Counter({"base": 1, "A-h1": 1, "E-learned": 1, "C-ff32": 1}), [(t.state, t.user_attrs) for t in ts]
    assert {t.user_attrs["worker"] for t in ts if t.state == TrialState.COMPLETE} == {0, 1}, proc.stderr[-3000:]  # both took rows
    assert all(t.state in (TrialState.COMPLETE, TrialState.FAIL) for t in ts)
    for t in ts:
        if t.state == TrialState.COMPLETE:
            out = Path(t.user_attrs["out_dir"])
            assert out.parent == (tmp / "sweep" / "trials").resolve() and out.name == f"{t.number:04d}-{t.user_attrs['row']}"
            assert (out / "summary.json").exists() and (out / "checkpoints" / "last.ckpt").exists()
            assert t.value == pytest.approx(t.user_attrs["val/bleu"])
            assert t.user_attrs["params"] > 0 and t.user_attrs["speed/tokens_per_s"] > 0 and t.user_attrs["wall_seconds"] > 0
    with open(tmp / "sweep" / "results.csv") as f:
        results = list(csv.DictReader(f))
    assert sorted(r["name"] for r in results if r["state"] == "COMPLETE") == ["A-h1", "C-ff32", "E-learned", "base"]
    assert "A-h1" in proc.stdout and "COMPLETE" in proc.stdout
    said = " ".join(proc.stdout.split())  # the table's lines wrap at the console's width
    assert f"next, the study in Table 3's layout: ablate table {tmp / 'sweep'}" in said
    assert re.search(r"BLEU: valid split, 10 of [\d,]+ sentences \(random, seed \d+\)\. PPL: valid split, all [\d,]+ sentences\.", said)

    runs = [read_run(p) for p in find_runs(tmp / "sweep")]
    trial_runs = {r.name: r for r in runs if r.job_type == "sweep-trial"}
    assert set(trial_runs) == {"base", "A-h1", "E-learned", "C-ff32"}
    for name, run in trial_runs.items():
        assert run.group == "grid" and name in run.tags and name.split("-")[0] in run.tags
        assert len(run.tags) == len(set(run.tags))  # row "base" is its own group: tagged once
        assert run.config["sweep.study"] == "grid" and run.config["sweep.row"] == name
        assert {"val/bleu", "val/ppl", "speed/tokens_per_s", "wall_seconds"} <= set(run.summary)
        assert run.summary["params"]["total"] > 0
    assert trial_runs["A-h1"].config["model.heads"] == 1 and trial_runs["E-learned"].config["model.positional"] == "learned"
    summary_runs = [r for r in runs if r.job_type == "sweep-summary"]
    assert len(summary_runs) == 1 and summary_runs[0].group == "grid"
    (logged,) = [row for row in summary_runs[0].history if row.get("trials/_type") == "table-file"]  # the study's W&B Table
    table = json.loads((summary_runs[0].files / logged["trials/path"]).read_text())
    assert sorted(r[table["columns"].index("name")] for r in table["data"]) == ["A-h1", "C-ff32", "E-learned", "base"]
    run_sweep(path)  # the finished sweep run again: its one summary run is updated, no second one added
    summaries = [r for r in map(read_run, find_runs(tmp / "sweep")) if r.job_type == "sweep-summary"]
    assert len(summaries) == 2 and {r.run_id for r in summaries} == {summary_runs[0].run_id}  # an offline directory per update
    assert len(latest_of_each(summaries)[0]) == 1

    # `ablate table` reads the same study from its run directories and from the W&B offline files alike.
    from ablate.cli import main

    assert main(["table", str(path), "--out", str(tmp / "t-dirs")]) == 0
    assert main(["table", str(tmp / "sweep"), "--wandb", "--out", str(tmp / "t-wandb")]) == 0
    from_dirs, from_wandb = ((tmp / d / "table3.csv").read_text() for d in ("t-dirs", "t-wandb"))
    assert from_dirs == from_wandb and "E-learned" in from_dirs and "learned" in from_dirs.split("E-learned", 1)[1]


def test_search_sweep_with_two_workers_runs_exactly_n_trials(sweep_env):
    tmp, write = sweep_env
    path = write(
        name="search",
        n_trials=4,
        sampler={"name": "random", "seed": 0},
        overrides={"logging.wandb": False},
        search={
            "model.heads": {"type": "categorical", "choices": [2, 4]},
            "train.lr_scale": {"type": "float", "low": 0.5, "high": 2.0, "log": True},
        },
        objective={"metric": "val/loss", "direction": "minimize"},
    )
    run_sweep(path, "--workers", "2")
    ts = trials(path)
    done = [t for t in ts if t.state == TrialState.COMPLETE]
    assert len(done) == 4 and len(ts) == 4
    assert {t.user_attrs["worker"] for t in done} == {0, 1}
    for t in done:
        assert 0.5 <= t.params["train.lr_scale"] <= 2.0 and t.params["model.heads"] in (2, 4)
        cfg = yaml.safe_load((Path(t.user_attrs["out_dir"]) / "config.yaml").read_text())
        assert cfg["model"]["heads"] == t.params["model.heads"] and cfg["train"]["lr_scale"] == pytest.approx(t.params["train.lr_scale"])
        assert t.value == pytest.approx(t.user_attrs["val/loss"])
    # Re-running a finished search resumes the study and adds nothing.
    run_sweep(path, "--workers", "2")
    assert len(trials(path)) == 4


def test_pruner_stops_a_bad_trial_early(sweep_env):
    tmp, write = sweep_env
    path = write(
        name="prune",
        n_trials=2,
        objective={"metric": "val/loss", "direction": "minimize"},
        pruner={"name": "median", "n_startup_trials": 1, "n_warmup_steps": 0},
        overrides={"logging.wandb": False, "train.max_steps": 40, "train.val_every_steps": 10, "train.val_bleu": False},
        search={"train.lr_scale": {"type": "categorical", "choices": [2.0, 1e-6]}},
    )
    sweep = load_sweep(path)
    study = open_sweep_study(sweep, f"sqlite:///{(tmp / 'sweep').resolve() / 'study.db'}").study
    study.enqueue_trial({"train.lr_scale": 2.0})  # a good trial first sets the median
    study.enqueue_trial({"train.lr_scale": 1e-6})  # then one that cannot learn
    run_sweep(path, "--workers", "1")
    good, bad = trials(path)
    assert good.state == TrialState.COMPLETE and max(good.intermediate_values) == 40
    assert bad.state == TrialState.PRUNED, bad.user_attrs
    assert max(bad.intermediate_values) < 40  # stopped at its first validation, not trained to the end
    assert bad.intermediate_values[10] > good.intermediate_values[10]
    summary = json.loads((Path(bad.user_attrs["out_dir"]) / "summary.json").read_text())
    assert summary["stop_reason"] == "pruned" and summary["steps"] < 40  # the run says why it stopped early


def test_failing_trial_is_marked_with_its_reason_and_the_sweep_goes_on(sweep_env):
    tmp, write = sweep_env
    (tmp / "nowhere").mkdir()  # training files that are there (`ablate sweep` checks that first) and hold no sentence
    for side in ("en", "de"):
        (tmp / "nowhere" / f"train.{side}").write_text("")
    path = write(
        name="faults",
        overrides={"logging.wandb": False, "train.log_every_steps": 2},
        variants={
            "base": {},
            "nan": {"plugins": [str(fault_plugin(tmp / "faults", nan_from=4, when={"sweep.row": "nan"}))]},
            "no-data": {"data.train_prefix": str(tmp / "nowhere" / "train")},
        },
    )
    run_sweep(path, "--workers", "1")
    by_row = {t.user_attrs["row"]: t for t in trials(path)}
    assert by_row["base"].state == TrialState.COMPLETE
    assert by_row["nan"].state == TrialState.FAIL and "FloatingPointError" in by_row["nan"].user_attrs["fail_reason"]
    assert "nan" in by_row["nan"].user_attrs["fail_reason"] and "step" in by_row["nan"].user_attrs["fail_reason"]
    reason = by_row["no-data"].user_attrs["fail_reason"]
    assert by_row["no-data"].state == TrialState.FAIL and reason.startswith("exit code 1") and "nowhere" in reason


def test_resume_after_the_sweep_is_killed_mid_trial(sweep_env):
    tmp, write = sweep_env
    path = write(
        name="resume",
        overrides={"logging.wandb": False, "train.max_steps": 60},
        variants={"base": {}, "A-h1": {"model.heads": 1}, "A-h2": {"model.heads": 2}},
    )
    cmd = [sys.executable, "-m", "ablate.cli", "sweep", str(path), "--workers", "1"]
    log = open(tmp / "sweep.log", "wb")  # noqa: SIM115 -- the sweep writes it until the test ends
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 240
    try:
        while time.time() < deadline:
            time.sleep(0.5)
            states = trial_states(tmp / "sweep" / "study.db")
            started = list((tmp / "sweep" / "trials").glob("*/train.log"))
            if "COMPLETE" in states and "RUNNING" in states and len(started) >= 2:  # the second trial is training
                time.sleep(1)
                break
        else:
            pytest.fail("the sweep never had one finished and one running trial:\n" + (tmp / "sweep.log").read_text()[-3000:])
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # the sweep process only: its trial notices (parent watch), saves and ends
        proc.wait()
    before = trials(path)
    finished = {t.user_attrs["row"]: t.number for t in before if t.state == TrialState.COMPLETE}
    killed = next(t for t in before if t.state == TrialState.RUNNING)
    out = Path(killed.user_attrs["out_dir"])
    stop = time.time() + 90  # the trial may still be importing torch when its sweep dies: its watch starts after that
    while time.time() < stop and "the process that started it" not in (out / "train.log").read_text():
        time.sleep(0.5)
    assert "the process that started it" in (out / "train.log").read_text()  # it noticed, and stops as on SIGTERM
    sizes = [-1]
    while time.time() < stop and (len(sizes) < 4 or len(set(sizes[-4:])) > 1):  # its last lines: the save, then exit
        sizes.append((out / "train.log").stat().st_size)
        time.sleep(1)
    time.sleep(3)
    assert (out / "train.log").stat().st_size == sizes[-1]  # no orphan trial process kept training

    # Resume with one row added to the file: the killed row is retried, the new row runs, no finished row reruns.
    write(
        name="resume",
        overrides={"logging.wandb": False, "train.max_steps": 60},
        variants={"base": {}, "A-h1": {"model.heads": 1}, "A-h2": {"model.heads": 2}, "A-h4": {"model.heads": 4}},
    )
    run_sweep(path, "--workers", "1")
    after = trials(path)
    assert completed_rows(after) == Counter({"base": 1, "A-h1": 1, "A-h2": 1, "A-h4": 1})
    for row, number in finished.items():
        assert after[number].state == TrialState.COMPLETE and after[number].user_attrs["row"] == row
    assert after[killed.number].state == TrialState.FAIL  # failed by its stale heartbeat
    rerun = [t for t in after if t.user_attrs.get("row") == killed.user_attrs["row"] and t.state == TrialState.COMPLETE]
    assert rerun[0].number > killed.number


def test_an_archived_study_continues_on_a_fresh_machine(sweep_env):
    """The way a study longer than one machine's lease goes on: killed mid-trial, archived (while its database still
    says a trial is RUNNING), its out_dir gone with the machine, the archive copied back and the sweep run again.
    The finished row is not rerun; the killed row, whose run directory the archive left out, starts over; and the
    table reads the continued study."""
    import shutil

    from ablate.cli import main

    tmp, write = sweep_env
    fields = dict(
        name="moved", overrides={"logging.wandb": False, "train.max_steps": 200}, variants={"base": {}, "A-h1": {"model.heads": 1}}
    )
    path = write(**fields)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ablate.cli", "sweep", str(path), "--workers", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + 240
    try:
        while time.time() < deadline:
            time.sleep(0.1)  # the killed trial must still be training: poll often, and train long enough
            states = trial_states(tmp / "sweep" / "study.db")
            training = [
                d
                for d in (tmp / "sweep" / "trials").glob("*")
                if any(d.glob("checkpoints/step=*.ckpt")) and not (d / "summary.json").exists()
            ]
            if "COMPLETE" in states and "RUNNING" in states and training:
                break
        else:
            pytest.fail("the sweep never had one finished and one training trial")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the machine is gone: no handler runs
        proc.wait()
    finished = {t.user_attrs["row"]: t.number for t in trials(path) if t.state == TrialState.COMPLETE}
    assert len(finished) == 1 and "RUNNING" in trial_states(tmp / "sweep" / "study.db")

    assert main(["archive", str(tmp / "sweep"), str(tmp / "kept"), "--split", "test"]) == 0
    shutil.rmtree(tmp / "sweep")
    shutil.copytree(tmp / "kept", tmp / "sweep")
    run_sweep(path, "--workers", "1")

    after = trials(path)
    assert completed_rows(after) == Counter({"base": 1, "A-h1": 1}), [(t.number, t.state, t.user_attrs.get("row")) for t in after]
    ((row, number),) = finished.items()
    assert after[number].state == TrialState.COMPLETE and after[number].user_attrs["row"] == row  # kept, not rerun
    assert main(["table", str(tmp / "sweep"), "--out", str(tmp / "t")]) == 0
    doc = json.loads((tmp / "t" / "table3.json").read_text())
    assert {r["row"] for r in doc["rows"]} == {"base", "A-h1"} and doc["runs_with_eval_records"] == 2


def test_ddp_trial_with_two_cpu_processes(sweep_env):
    tmp, write = sweep_env
    path = write(
        name="ddp",
        gpus_per_trial=2,
        variants={"base": {}},
        overrides={"logging.wandb": False, "train.accelerator": "cpu", "train.max_steps": 10, "train.val_every_steps": 5},
    )
    run_sweep(path, "--workers", "1")
    (t,) = trials(path)
    assert t.state == TrialState.COMPLETE, t.user_attrs
    out = Path(t.user_attrs["out_dir"])
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    assert cfg["train"]["devices"] == 2 and cfg["train"]["strategy"] == "ddp"
    log = (out / "train.log").read_text()
    assert "Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2" in log
    assert (out / "checkpoints" / "last.ckpt").exists()


CLAIMER = """
import sys, optuna
from ablate.sweep.storage import claim_lock
optuna.logging.set_verbosity(optuna.logging.ERROR)
url = sys.argv[1]
study = optuna.load_study(study_name="race", storage=url)
while True:
    with claim_lock(url):
        trial = study.ask()
    if "fixed_params" not in study.get_trials(deepcopy=False)[trial.number].system_attrs:
        break
    print(trial.number, flush=True)
"""


def test_racing_workers_never_claim_the_same_queued_trial(tmp_path):
    """Two processes pop 40 queued trials from one SQLite study as fast as they can, through the claim lock (Optuna's
    own pop is not atomic on SQLite, which ignores SELECT ... FOR UPDATE); each trial goes to exactly one."""
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(study_name="race", storage=url)
    for i in range(40):
        study.enqueue_trial({"x": i})
    procs = [subprocess.Popen([sys.executable, "-c", CLAIMER, url], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    claimed = [int(n) for p in procs for n in p.communicate(timeout=120)[0].split()]
    assert [p.returncode for p in procs] == [0, 0]
    assert sorted(claimed) == list(range(40))


def test_postgres_storage_with_two_workers_never_leaks_the_password(sweep_env, postgres_url):
    import uuid

    from sqlalchemy.engine import make_url

    tmp, write = sweep_env
    password = make_url(postgres_url).password
    assert password, "the test URL must carry a password to check it is never written"
    name = f"pg-{uuid.uuid4().hex[:8]}"
    path = write(
        name=name, variants={"base": {}, "A-h1": {"model.heads": 1}, "A-h2": {"model.heads": 2}}, overrides={"logging.wandb": True}
    )
    proc = run_sweep(path, "--workers", "2", env={"ABLATE_SWEEP_STORAGE": postgres_url})
    ts = trials(path, storage=postgres_url)
    assert completed_rows(ts) == Counter({"base": 1, "A-h1": 1, "A-h2": 1})
    assert {t.user_attrs["worker"] for t in ts if t.state == TrialState.COMPLETE} == {0, 1}
    assert not (tmp / "sweep" / "study.db").exists()  # the study lives in PostgreSQL, not in a local file
    assert "***@127.0.0.1" in proc.stdout and password not in proc.stdout + proc.stderr
    for f in (tmp / "sweep").rglob("*"):
        if f.is_file():
            assert password.encode() not in f.read_bytes(), f"the database password leaked into {f}"


def test_three_seed_variants_sweep_tabulates_intervals_paired_tests_and_verdicts(sweep_env):
    """A variants sweep with 3 seeds, then `ablate table`: every row has N 3, a t interval around its mean, a Welch
    interval around its Δ, a paired-bootstrap p with its Holm correction, an MDE and a verdict, in the JSON, the CSV
    and the Markdown, with the split, sentences, basis and noise floor the summary names."""
    tmp, write = sweep_env
    path = write(
        name="seeds3",
        seeds=[1, 2, 3],
        basis={"stop": "steps", "weights": "final"},
        # As tests/golden/v0_1/tiny.yaml: long enough, with small batches and no smoothing, for rows to differ.
        overrides={
            "train.max_steps": 100,
            "train.val_every_steps": 50,
            "train.lr_scale": 1.0,
            "train.label_smoothing": 0.0,
            "data.max_tokens": 256,
            "train.val_max_sentences": 0,
        },
        variants={"base": {}, "A-h1": {"model.heads": 1}, "E-learned": {"model.positional": "learned"}},
    )
    run_sweep(path, "--workers", "2", timeout=600)
    assert completed_rows(trials(path)) == Counter({"base": 3, "A-h1": 3, "E-learned": 3})

    from ablate.cli import main

    assert main(["table", str(path), "--out", str(tmp / "t"), "--boot", "200"]) == 0
    doc = json.loads((tmp / "t" / "table3.json").read_text())
    rows = {r["row"]: r for r in doc["rows"]}
    assert set(rows) == {"base", "A-h1", "E-learned"} and all(r["seeds"] == 3 for r in rows.values())
    for name, r in rows.items():
        for metric in ("bleu", "ppl"):
            m = r[metric]
            # A model this small may score BLEU 0 in every run (never so in PPL): no spread, so no interval and no test.
            spread = metric == "ppl" or m["low"] is not None
            assert m["n"] == 3 and (not spread or m["low"] <= m["mean"] <= m["high"]), (name, metric, m)
            if name == "base":
                continue
            if m["p"] is None:
                assert metric == "bleu" and m["mde"] is None and m["verdict"] == "inconclusive", m
                continue
            assert m["delta_low"] <= m["delta"] <= m["delta_high"], (name, metric, m)
            assert 0 < m["p"] <= m["p_holm"] <= 1 and m["mde"] >= 0, (name, metric, m)
            assert metric == "bleu" or m["mde"] > 0, m
            assert m["verdict"] in ("agree", "disagree", "inconclusive", "paper: no change", "paper: no change; ours differs"), m
    # Holm over the two tested rows: the smaller p doubled, the larger at least that (capped at 1).
    ps = sorted((rows[n]["bleu"]["p"], rows[n]["bleu"]["p_holm"]) for n in ("A-h1", "E-learned") if rows[n]["bleu"]["p"] is not None)
    if len(ps) == 2:  # (a row with no spread is not tested, and Holm counts only the tested ones)
        assert ps[0][1] == pytest.approx(min(1.0, 2 * ps[0][0])) and ps[1][1] >= ps[0][1]
    assert (doc["split"], doc["sentences"]) == ("valid", 40) and doc["bootstrap"]["resamples"] == 200
    assert doc["noise_floor"]["bleu"]["n"] == 3 and doc["basis"].startswith("equal steps")
    assert doc["declared_basis"] == "stop: steps, weights: final"  # the sweep file's, carried by every trial's config
    counts = doc["verdicts"]["bleu"]["overall"]
    assert sum(counts.values()) == 2, counts  # the two rows besides base, each with one verdict
    with open(tmp / "t" / "table3.csv") as f:
        csv_rows = {r["row"]: r for r in csv.DictReader(f)}
    p_holm = rows["A-h1"]["bleu"]["p_holm"]
    assert csv_rows["A-h1"]["bleu_p_holm"] == "" if p_holm is None else float(csv_rows["A-h1"]["bleu_p_holm"]) == pytest.approx(p_holm)
    md = (tmp / "t" / "table3.md").read_text()
    assert "p Holm" in md and "MDE" in md and "verdict" in md and "Noise floor (base row over 3 seeds)" in md

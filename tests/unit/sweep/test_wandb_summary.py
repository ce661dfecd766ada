"""The study's one W&B summary run (ablate.sweep.wandb_summary): its id is the study in its storage; run again, it is
updated, not added to."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

import pytest
from sweep_files import write
from sweep_summaries import SWEEP

from ablate.files.wandb_offline import find_runs, latest_of_each, read_run
from ablate.sweep.load import load_sweep
from ablate.sweep.results_files import COLUMNS
from ablate.sweep.wandb_summary import log_wandb_table, summary_run_id
from ablate.table.finished_runs import runs_from_wandb


@pytest.mark.slow  # W&B offline runs started and read back: seconds; the default set stays under a minute
def test_the_study_has_one_summary_run_updated_by_each_sweep_run_and_it_is_no_trial(tmp_path):
    """Run twice (a finished sweep run again), the summary run keeps its id: W&B, syncing, updates the one run. Its
    offline files are a directory per update; the latest holds the latest table. `ablate table --wandb` tells it by
    its job type, and its tags are the experiment's and "summary", each once."""
    import wandb

    sweep = load_sweep(write(tmp_path, SWEEP + f"out_dir: {tmp_path}/sweep\n"))
    (tmp_path / "base.yaml").write_text("model: {d_model: 64, heads: 4, d_ff: 128}\nlogging: {tags: [paper, summary, paper]}\n")
    sweep.out_dir.mkdir()
    for rows in ([{"name": "base"}], [{"name": "base"}, {"name": "A-h1"}]):
        log_wandb_table(sweep, [dict.fromkeys(COLUMNS) | r for r in rows])
    wandb.teardown()  # finish() returns before the service writes the run files
    runs = [read_run(p) for p in find_runs(sweep.out_dir)]
    url = f"sqlite:///{(sweep.out_dir / 'study.db').resolve()}"
    assert len(runs) == 2 and {r.run_id for r in runs} == {summary_run_id(sweep, url)}
    assert all(r.job_type == "sweep-summary" and r.tags == ["paper", "summary"] and r.exit_code == 0 for r in runs)
    (latest,), earlier = latest_of_each(runs)
    assert len(earlier) == 1 and latest.started > read_run(next(iter(earlier))).started
    logged = next(h for h in latest.history if h.get("trials/_type") == "table-file")
    assert logged["trials/nrows"] == 2  # the second sweep run's table
    found, skipped = runs_from_wandb(sweep.out_dir)
    assert found == [] and sorted(skipped.values()) == ["a sweep's summary table, not a trial"] * 2


def test_the_summary_run_id_is_the_study_in_its_storage():
    sweep = SimpleNamespace(name="table3 small/v2")
    same = summary_run_id(sweep, "postgresql://me:secret@db/studies")
    assert same == summary_run_id(sweep, "postgresql://me:changed@db/studies")  # a new password: the same study
    assert same.startswith("table3_small_v2-summary-") and len(same) <= 64
    assert same != summary_run_id(sweep, "postgresql://me@other/studies")
    assert same != summary_run_id(SimpleNamespace(name="table3"), "postgresql://me@db/studies")


def test_no_password_goes_into_the_summary_run_id_whatever_it_holds():
    """A '/' in the password, or a `?password=` value, was hashed into the id: open to guessing offline from it, and a
    new summary run after the password changed."""
    sweep = SimpleNamespace(name="t3")
    plain = summary_run_id(sweep, "postgresql://me@db/studies")
    # as ever for a plain password: an existing study's summary run keeps its id
    hashed = hashlib.sha256(b"t3\npostgresql://me@db/studies").hexdigest()[:12]
    assert plain == f"t3-summary-{hashed}" == summary_run_id(sweep, "postgresql://me:secret@db/studies")
    for url in ("postgresql://me:a/b@db/studies", "postgresql://me:c:d/e?f#g h@db/studies", "postgresql://me@db/studies?password=x"):
        assert summary_run_id(sweep, url) == plain, url
    with_option = summary_run_id(sweep, "postgresql://me@db/studies?sslmode=require")
    assert summary_run_id(sweep, "postgresql://me@db/studies?PASSWORD=x&sslmode=require") == with_option != plain
    assert summary_run_id(sweep, "postgresql://me:p/w@db/studies?sslmode=require&password=y") == with_option
    assert summary_run_id(sweep, "sqlite:////data/a:b@c/study.db") != summary_run_id(sweep, "sqlite:////data/a:z@c/study.db")

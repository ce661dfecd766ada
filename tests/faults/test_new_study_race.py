"""Issue 32 item 8: two sweeps that start one new study at the same moment both join it.

Optuna's RDBStorage creates its tables and stamps the alembic version row on a storage's first open; two processes
doing that at once made the loser die with "UNIQUE constraint failed: alembic_version.version_num ... restore it from a
backup" (or "table studies already exists"), though nothing was damaged. Here two processes, held at a barrier until
both are ready, call the function `ablate sweep` and its workers open a study with (ablate.sweep.worker.open_sweep_study)
on a new storage, round after round: every call must succeed, and the storage must hold one study.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import optuna
import pytest
import yaml

ROUNDS = 8

# Each process runs every round: it says it is ready, waits (spinning, so neither sleeps through the other's start)
# until the other is too, then opens the round's study; one JSON line per round says how that went.
RACER = """
import json, os, sys, time
from pathlib import Path
from ablate.sweep.load import load_sweep
from ablate.sweep.storage import storage_url
from ablate.sweep.worker import open_sweep_study

me, folder = sys.argv[1], Path(sys.argv[2])
for sweep_file in sorted(folder.glob("round-*.yaml")):
    sweep = load_sweep(sweep_file)
    url = storage_url(sweep.out_dir, sweep.storage)
    (folder / f"{sweep_file.stem}.ready-{me}").touch()
    while len(list(folder.glob(f"{sweep_file.stem}.ready-*"))) < 2:
        pass
    try:
        study = open_sweep_study(sweep, url).study
        print(json.dumps({"round": sweep_file.stem, "ok": True, "study": study.study_name}), flush=True)
    except Exception as e:
        print(json.dumps({"round": sweep_file.stem, "ok": False, "error": f"{type(e).__name__}: {e}"}), flush=True)
"""


def race(tmp_path: Path, storages: list[str | None]) -> list[dict]:
    """Both racers' results for one round per entry of `storages` (None: the default, out_dir/study.db)."""
    (tmp_path / "base.yaml").write_text("model: {d_model: 32, heads: 4, d_ff: 64}\n")
    for i, storage in enumerate(storages):
        fields = {"name": "race", "base": "base.yaml", "out_dir": str(tmp_path / f"out-{i}"), "variants": {"base": {}}}
        (tmp_path / f"round-{i:02d}.yaml").write_text(yaml.safe_dump({**fields, **({"storage": storage} if storage else {})}))
    procs = [
        subprocess.Popen([sys.executable, "-c", RACER, me, str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for me in ("a", "b")
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        results += [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert len(results) == 2 * len(storages)
    return results


@pytest.mark.slow  # two sweep processes racing: seconds; the default set stays under a minute
def test_two_sweeps_creating_one_new_sqlite_study_at_once_both_join_it(tmp_path, monkeypatch):
    monkeypatch.delenv("ABLATE_SWEEP_STORAGE", raising=False)
    results = race(tmp_path, [None] * ROUNDS)
    assert [r for r in results if not r["ok"]] == []
    for i in range(ROUNDS):
        storage = f"sqlite:///{tmp_path / f'out-{i}' / 'study.db'}"
        assert optuna.get_all_study_names(storage) == ["race"]


@pytest.mark.slow  # two sweep processes racing: seconds; the default set stays under a minute
def test_two_sweeps_creating_one_new_journal_study_at_once_both_join_it(tmp_path, monkeypatch):
    monkeypatch.delenv("ABLATE_SWEEP_STORAGE", raising=False)
    results = race(tmp_path, [f"journal://{tmp_path}/journal-{i}/study.log" for i in range(ROUNDS)])
    assert [r for r in results if not r["ok"]] == []
    for i in range(ROUNDS):
        lines = (tmp_path / f"journal-{i}" / "study.log").read_text().splitlines()
        assert {json.loads(line)["study_name"] for line in lines if json.loads(line)["op_code"] == 0} == {"race"}


@pytest.mark.slow  # starts a PostgreSQL server when CI has not
def test_two_sweeps_creating_one_new_postgresql_study_at_once_both_join_it(tmp_path, monkeypatch, postgres_url):
    """Each round on a new database, so the two racers also create Optuna's tables at once."""
    import sqlalchemy

    monkeypatch.delenv("ABLATE_SWEEP_STORAGE", raising=False)
    server = sqlalchemy.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    names = [f"race_{uuid.uuid4().hex[:12]}" for _ in range(ROUNDS)]
    with server.connect() as con:
        for name in names:
            con.execute(sqlalchemy.text(f"CREATE DATABASE {name}"))
    urls = [postgres_url.rsplit("/", 1)[0] + f"/{name}" for name in names]
    try:
        results = race(tmp_path, urls)
        assert [r for r in results if not r["ok"]] == []
        for url in urls:
            assert optuna.get_all_study_names(url) == ["race"]
    finally:
        with server.connect() as con:
            for name in names:
                con.execute(sqlalchemy.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        server.dispose()

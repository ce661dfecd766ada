"""The sweep's closing hint to Optuna's dashboard (`ablate.sweep.storage.dashboard_hint`): a command the user has, or how
to get it (`pip install -e .` brings no dashboard)."""

from __future__ import annotations

from ablate.sweep import storage


def test_the_hint_says_how_to_install_the_dashboard_where_it_is_missing(monkeypatch):
    url = "sqlite:////tmp/runs/sweeps/q/study.db"
    monkeypatch.setattr(storage.shutil, "which", lambda name: None)
    assert storage.dashboard_hint(url) == f"dashboard: pip install optuna-dashboard, then optuna-dashboard {url}"
    monkeypatch.setattr(storage.shutil, "which", lambda name: f"/venv/bin/{name}")
    assert storage.dashboard_hint(url) == f"dashboard: optuna-dashboard {url}"


def test_a_password_in_the_storage_url_stays_out_of_the_hint(monkeypatch):
    monkeypatch.setattr(storage.shutil, "which", lambda name: None)
    hint = storage.dashboard_hint("postgresql://ablate:s3cret@db:5432/studies")
    assert "s3cret" not in hint and hint.startswith("dashboard: pip install optuna-dashboard, then optuna-dashboard postgresql://")

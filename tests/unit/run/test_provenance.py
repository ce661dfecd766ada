"""Which code a run records it trained with: ablate's commit only where ablate's own source is tracked by the
repository, whether the tree was edited since, and the versions of the libraries its numbers depend on."""

from __future__ import annotations

import subprocess
from importlib import metadata
from pathlib import Path

import pytest

from ablate.run import provenance


def _git(repo: Path, *args: str) -> str:
    cmd = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args]
    return subprocess.run(cmd, cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A git repository holding a stand-in for ablate's source file, committed."""
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    source = root / "pkg" / "provenance.py"
    source.write_text("x = 1\n")
    (root / "README").write_text("a project\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "first")
    monkeypatch.setattr(provenance, "_SOURCE", source)
    return root


def test_clean_checkout_records_its_commit(repo):
    assert provenance.git_state() == (_git(repo, "rev-parse", "HEAD"), False)


def test_an_edited_tree_is_dirty_under_the_same_commit(repo):
    head = _git(repo, "rev-parse", "HEAD")
    (repo / "pkg" / "provenance.py").write_text("x = 2\n")
    assert provenance.git_state() == (head, True)
    (repo / "notes.txt").write_text("untracked files change no code the run ran\n")
    (repo / "pkg" / "provenance.py").write_text("x = 1\n")
    assert provenance.git_state() == (head, False)


def test_an_untracked_ablate_inside_another_project_records_no_commit(repo, monkeypatch):
    """ablate installed (copied) into someone else's git project: that project's commit says nothing of ablate."""
    installed = repo / "venv" / "site-packages" / "ablate" / "provenance.py"
    installed.parent.mkdir(parents=True)
    installed.write_text("x = 1\n")
    monkeypatch.setattr(provenance, "_SOURCE", installed)
    assert provenance.git_state() == (None, None)


def test_no_repository_or_no_git_records_nothing(tmp_path, monkeypatch):
    source = tmp_path / "provenance.py"
    source.write_text("x = 1\n")
    monkeypatch.setattr(provenance, "_SOURCE", source)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert provenance.git_state() == (None, None)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert provenance.git_state() == (None, None)


def test_run_provenance_names_the_versions(repo):
    found = provenance.run_provenance()
    assert found["git_sha"] == _git(repo, "rev-parse", "HEAD") and found["git_dirty"] is False
    assert set(found["versions"]) == {"ablate", "torch", "lightning", "sentencepiece", "sacrebleu"}
    assert found["versions"]["torch"] == metadata.version("torch")
    assert found["versions"]["ablate"] == metadata.version("ablate")


def test_a_library_not_installed_is_none(monkeypatch):
    monkeypatch.setattr(provenance, "LIBRARIES", ("ablate", "surely-not-an-installed-distribution"))
    assert provenance.versions()["surely-not-an-installed-distribution"] is None


def test_recording_the_state_leaves_the_repositorys_index_alone(repo):
    """`git status` refreshed .git/index under its lock when file times were stale: a user's commit at that moment
    (many trials starting at once) failed on "index.lock exists"."""
    import os

    index = repo / ".git" / "index"
    before = index.stat().st_mtime_ns
    os.utime(repo / "README", ns=(before + 10**9, before + 10**9))  # stale in the index's cache: status would refresh
    provenance.git_state()
    assert index.stat().st_mtime_ns == before

"""Which code a run trained with, kept in its summary.json and W&B config: ablate's commit, whether the working tree
differed from it, and the versions of ablate and of the libraries its numbers depend on. A commit alone named two runs
on different (uncommitted) code alike, and an ablate installed inside another git project named that project's commit.
"""

from __future__ import annotations

import subprocess
from importlib import metadata
from pathlib import Path

# The distributions whose versions change a run's numbers or how they are scored.
LIBRARIES = ("ablate", "torch", "lightning", "sentencepiece", "sacrebleu")
_SOURCE = Path(__file__).resolve()  # a file of ablate's own: the repository must track it to speak for ablate


def _git(*args: str) -> subprocess.CompletedProcess | None:
    """A git command run beside ablate's source; None where git is missing, hangs or fails to start."""
    try:
        # --no-optional-locks: `git status` would refresh .git/index under its lock, and a user's own commit or rebase
        # at that moment (many trials starting at once) would fail on "index.lock exists"
        return subprocess.run(["git", "--no-optional-locks", *args], capture_output=True, text=True, timeout=5, cwd=_SOURCE.parent)
    except (OSError, subprocess.SubprocessError):
        return None


def git_state() -> tuple[str | None, bool | None]:
    """ablate's commit and whether tracked files differ from it (uncommitted edits); (None, None) where ablate's source
    is not a file of a git repository: not a checkout, no git, or an installed copy inside someone else's project,
    whose commit says nothing of ablate's code."""
    tracked = _git("ls-files", "--error-unmatch", _SOURCE.name)
    if tracked is None or tracked.returncode != 0:
        return None, None
    head = _git("rev-parse", "HEAD")
    sha = head.stdout.strip() if head is not None and head.returncode == 0 else ""
    if not sha:
        return None, None
    status = _git("status", "--porcelain", "--untracked-files=no")
    dirty = None if status is None or status.returncode != 0 else bool(status.stdout.strip())
    return sha, dirty


def versions() -> dict[str, str | None]:
    """The installed version of each of LIBRARIES (None: not installed), read from package metadata, importing none."""
    found = {}
    for name in LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def run_provenance() -> dict:
    """The summary.json fields that say which code trained the run: git_sha, git_dirty and versions."""
    sha, dirty = git_state()
    return {"git_sha": sha, "git_dirty": dirty, "versions": versions()}

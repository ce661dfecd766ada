"""A study archive's history of chunks (ARCHIVE/chunks.jsonl), the ablate code and machine each ran, the refusal
of a chunk that runs other code, and the archive's files before and after a chunk (the update tarball)."""

from __future__ import annotations

import hashlib
import json
import os
import tarfile
from pathlib import Path

import ablate

CHUNKS = "chunks.jsonl"  # in ARCHIVE: one JSON line per chunk


def file_hashes(root: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under `root` (empty when it does not exist)."""
    if not root.is_dir():
        return {}
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def code_fingerprint() -> str:
    """sha256 over the source of the ablate package this process imports: every chunk of a study must run the same."""
    src = Path(ablate.__file__).parent
    h = hashlib.sha256()
    for p in sorted(src.rglob("*.py")):
        h.update(str(p.relative_to(src)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def machine() -> str:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU ({os.cpu_count()} cores)"


def read_history(archive: Path) -> list[dict]:
    path = archive / CHUNKS
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def code_refusal(history: list[dict], code: str, allowed: bool) -> str | None:
    """Why this chunk must not run: the archive's chunks ran other ablate code (a study runs one version of it)."""
    first = next((h["code"] for h in history if h.get("code")), None)
    if first is None or first == code or allowed:
        return None
    return (
        f"the archive's chunks ran ablate code {first}, this one imports {code} ({Path(ablate.__file__).parent}): every chunk of a "
        "study runs the same code (carry the study's pinned wheel, docs/table3-gpu.md), or pass --allow-code-change to record the change"
    )


def pack_changes(archive: Path, before: dict[str, str], tarball: Path) -> list[str]:
    after = file_hashes(archive)
    changed = sorted(p for p, h in after.items() if before.get(p) != h)
    with tarfile.open(tarball, "w:gz") as tar:
        for rel in changed:
            tar.add(archive / rel, arcname=rel)
    return changed

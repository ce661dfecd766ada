"""The data a run trains on, recorded in RUN/fingerprint.json when it starts (its corpus files and tokenizer) and
checked when it resumes: a corpus edited in place, or a tokenizer other than the run's own, is named before anything
changes (ablate.run.train refuses it unless --accept-data-change). A resume encodes with the run's own tokenizer."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from ablate.files.atomic import replacing, write_file
from ablate.files.json_file import read_json
from ablate.run.run_lock import other_rank
from ablate.run.rundir import FINGERPRINT, RUN_TOKENIZER


def corpus_fingerprint(data_cfg) -> dict[str, dict]:
    """Each corpus file the run reads, by split and language ("train.en"): its absolute path, size and sha256.

    The whole file is hashed, not its size, mtime and ends: the edit to catch is one line in the middle, which keeps
    the ends and can keep the size, and a copy or checkout changes the mtime of files that did not change. The train
    files are hashed anyway for the tokenizer cache key (memoized per process, so counted once): Multi30k's 1.3 MB
    take ~1.5 ms, WMT14's ~1.4 GB about 2 s at the ~600 MiB/s sha256 reads at (plus the disk, when not cached).
    """
    from ablate.data.datasets import resolve_split
    from ablate.data.location import available_splits
    from ablate.data.tokenizer import file_hash

    files = {}
    for split in available_splits(data_cfg):
        for lang, path in zip((data_cfg.src_lang, data_cfg.tgt_lang), resolve_split(data_cfg, split)):
            files[f"{split}.{lang}"] = {"path": str(path.resolve()), "size": path.stat().st_size, "sha256": file_hash(path)}
    return files


def record_fingerprint(out: Path, data_cfg, tokenizer: bytes, when: str) -> None:
    """Write RUN/fingerprint.json: the corpus files as they are now and the run's tokenizer (`when`: "start" or
    "resume-N"). A record it replaces is kept as fingerprint.before-{when}.json. DDP ranks other than 0 write nothing."""
    if other_rank():
        return
    record = {"recorded": when, "corpus": corpus_fingerprint(data_cfg), "tokenizer": {"sha256": hashlib.sha256(tokenizer).hexdigest()}}
    if (out / FINGERPRINT).exists():
        write_file(out / f"fingerprint.before-{when}.json", (out / FINGERPRINT).read_bytes())
    write_file(out / FINGERPRINT, json.dumps(record, indent=2) + "\n")


def data_changes(out: Path, data_cfg, tokenizer: bytes | None, source: Path) -> list[str] | None:
    """How the corpus files differ from the run's fingerprint, and whether `tokenizer` (the bytes in the checkpoint
    `source`, which the resume will encode with) is the one the run started with; [] when nothing changed, None
    when the run recorded no fingerprint (it started before runs did)."""
    path = out / FINGERPRINT
    if not path.exists():
        return None
    try:
        corpus, started_with = _fingerprint_fields(read_json(path, "data fingerprint"), path)
    except ValueError as e:  # bad JSON, bad UTF-8, a duplicate key, a damaged field
        return [f"{e}, so the corpus cannot be checked against it"]
    now, changes = corpus_fingerprint(data_cfg), []
    for name in sorted(set(corpus) | set(now), key=lambda n: (n not in now, n)):
        before, after = corpus.get(name), now.get(name)
        if before is None:
            changes.append(f"{after['path']} ({name}) is read now but was not when the run started")
        elif after is None:
            changes.append(f"{before.get('path')} ({name}) was read when the run started but is not now")
        elif (before.get("size"), before.get("sha256")) != (after["size"], after["sha256"]):
            size = f"size {before.get('size')} -> {after['size']} bytes" if before.get("size") != after["size"] else "same size"
            moved = f", was {before.get('path')}" if before.get("path") != after["path"] else ""
            changes.append(f"{after['path']} ({name}{moved}): {size}, sha256 {str(before.get('sha256'))[:12]} -> {after['sha256'][:12]}")
    if tokenizer is not None and (have := hashlib.sha256(tokenizer).hexdigest()) != started_with:
        changes.append(f"the tokenizer in {source} (sha256 {have[:12]}) is not the one the run started with ({str(started_with)[:12]})")
    return changes


def _fingerprint_fields(record, path: Path) -> tuple[dict, str]:
    """(corpus entries, the tokenizer's sha256) of a fingerprint record, each field of the kind record_fingerprint writes."""

    def entry(e) -> bool:
        return isinstance(e, dict) and isinstance(e.get("path"), str) and type(e.get("size")) is int and isinstance(e.get("sha256"), str)

    if not isinstance(record, dict):
        raise ValueError(f"{path}: not a readable data fingerprint (a {type(record).__name__}, not a mapping)")
    for name, ok in (
        ("recorded", isinstance(record.get("recorded"), str)),
        ("corpus", isinstance(record.get("corpus"), dict)),
        ("tokenizer.sha256", isinstance(record.get("tokenizer"), dict) and isinstance(record["tokenizer"].get("sha256"), str)),
    ):
        if not ok:
            raise ValueError(f"{path}: field {name} is damaged or missing")
    for name, e in record["corpus"].items():
        if not entry(e) or e["size"] < 0:
            raise ValueError(f"{path}: field corpus.{name} is damaged ({e!r:.80}; needs path, size and sha256)")
    return record["corpus"], record["tokenizer"]["sha256"]


def checkpoint_tokenizer(path: Path) -> bytes | None:
    """The SentencePiece model's bytes inside a checkpoint `ablate train` wrote (None: one from before they held it)."""
    from ablate.training.checkpoint import load_checkpoint

    proto = load_checkpoint(path, mmap=True).get("tokenizer_model")
    if proto is not None and not (isinstance(proto, bytes) and proto):
        raise ValueError(f"--resume: {path}: field tokenizer_model is damaged ({type(proto).__name__}, not a SentencePiece model's bytes)")
    return proto


def run_tokenizer(out: Path, proto: bytes, source: Path):
    """The run's own tokenizer as RUN/tokenizer.model (rewritten only if it differs from `proto`), which a resumed run
    encodes its data with: never one the tokenizer cache trains afresh for the corpus as it is now."""
    from ablate.data.tokenizer import Tokenizer

    path = out / RUN_TOKENIZER
    try:
        if not path.is_file() or path.read_bytes() != proto:
            with replacing(path) as tmp:  # loaded before it replaces anything: damaged bytes leave the run as it was
                tmp.write_bytes(proto)
                Tokenizer(tmp)
        return Tokenizer(path)
    except (RuntimeError, ValueError) as e:  # sentencepiece: "could not parse ModelProto"; wrong special ids
        why = re.sub(rf"{re.escape(str(out))}/\S*", "its bytes", str(e).splitlines()[0])[:200]
        raise ValueError(f"--resume: {source}: field tokenizer_model is damaged (not a usable SentencePiece model: {why})") from None

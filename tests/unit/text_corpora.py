"""Tiny parallel corpora and data configs for the data-pipeline tests (corpus, tokenizer, batching, DataModule)."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

from ablate.config import DataConfig

# word-for-word "translations", so a round trip through the pipeline is easy to check
EN = [
    "a",
    "the",
    "dog",
    "cat",
    "man",
    "woman",
    "child",
    "runs",
    "jumps",
    "sits",
    "on",
    "in",
    "under",
    "red",
    "blue",
    "big",
    "small",
    "old",
    "young",
    "house",
]
DE = [
    "ein",
    "der",
    "hund",
    "katze",
    "mann",
    "frau",
    "kind",
    "rennt",
    "springt",
    "sitzt",
    "auf",
    "in",
    "unter",
    "rot",
    "blau",
    "gross",
    "klein",
    "alt",
    "jung",
    "haus",
]


def write(path: Path, lines: list[str], gz: bool = False, newline: str = "\n") -> Path:
    data = "".join(line + newline for line in lines).encode()
    path.write_bytes(gzip.compress(data, mtime=0) if gz else data)
    return path


def corpus(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    src, tgt = [], []
    for _ in range(n):
        words = rng.choices(range(len(EN)), k=rng.randint(1, 12))
        src.append(" ".join(EN[w] for w in words))
        tgt.append(" ".join(DE[w] for w in words))
    return src, tgt


def write_corpus(folder: Path, name: str, n: int, seed: int = 0) -> tuple[Path, Path]:
    src, tgt = corpus(n, seed)
    return write(folder / f"{name}.en", src), write(folder / f"{name}.de", tgt)


def data_cfg(tmp_path: Path, **kw) -> DataConfig:
    defaults = dict(dataset="files", vocab_size=64, max_len=16, max_tokens=64, cache_dir=str(tmp_path / "cache"))
    return DataConfig(**{**defaults, **kw})

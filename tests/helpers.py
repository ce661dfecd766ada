"""Shared test helpers: tiny model configs and batches; unit tests never build paper-sized tensors."""

from __future__ import annotations

from pathlib import Path

import torch

from ablate.config import ModelConfig

VOCAB = 32


def tiny_model(**overrides) -> ModelConfig:
    base = dict(enc_layers=2, dec_layers=2, d_model=16, d_ff=32, heads=4, dropout=0.0, max_positions=64)
    base.update(overrides)
    return ModelConfig(**base)


def random_batch(b: int = 3, s: int = 7, t: int = 6, vocab: int = VOCAB, pad_tail: bool = True):
    """Token ids avoiding pad (0); with pad_tail, later rows end in padding as real batches do."""
    src = torch.randint(4, vocab, (b, s))
    tgt = torch.randint(4, vocab, (b, t))
    if pad_tail:
        for i in range(1, b):
            src[i, s - i :] = 0
            tgt[i, t - i :] = 0
    return src, tgt


def dot_product_attention(heads: int, d_k: int, d_v: int | None = None, kv_heads: int | None = None, scaling=None, d_model: int = 16):
    """A MultiHeadAttention over the scaled dot-product kernel, for tests of the layer around the kernel; `scaling`
    defaults to 1/sqrt(d_k)."""
    from ablate.model.attention import ScaledDotProduct
    from ablate.model.multi_head import MultiHeadAttention
    from ablate.model.scaling import SCALING

    return MultiHeadAttention(
        d_model=d_model,
        heads=heads,
        d_k=d_k,
        d_v=d_v or d_k,
        kv_heads=kv_heads or heads,
        kernel=ScaledDotProduct(heads=heads, d_k=d_k),
        scaling=scaling if scaling is not None else SCALING["inv_sqrt_dk"](heads=heads, d_k=d_k),
    )


WORDS = ["red", "blue", "green", "dog", "cat", "bird", "runs", "sleeps", "eats", "big", "small", "old", "a", "the", "man", "woman"]
TRANSLATE = {w: w[::-1] + "x" for w in WORDS}  # a made-up "German": each word reversed plus x


def write_corpus(folder, n_train: int = 400, n_valid: int = 40, n_test: int = 40, seed: int = 0, gz: bool = False):
    """A tiny synthetic parallel corpus (word-by-word substitution) as PREFIX.{en,de} files; returns the folder."""
    import gzip
    import random
    from pathlib import Path

    rng = random.Random(seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("valid", n_valid), ("test", n_test)):
        src = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 7))) for _ in range(n)]
        tgt = [" ".join(TRANSLATE[w] for w in s.split()) for s in src]
        for lang, lines in (("en", src), ("de", tgt)):
            text = "".join(line + "\n" for line in lines).encode()
            path = folder / f"{split}.{lang}" if not gz else folder / f"{split}.{lang}.gz"
            path.write_bytes(gzip.compress(text) if gz else text)
    return folder


def tiny_sections(tmp_path) -> dict:
    """The model, data (a write_corpus() corpus) and logging sections of every seconds-long test run."""
    corpus = write_corpus(tmp_path / "corpus")
    return {
        "model": {"enc_layers": 1, "dec_layers": 1, "d_model": 32, "d_ff": 64, "heads": 4, "dropout": 0.0},
        "data": {
            "dataset": "files",
            "train_prefix": str(corpus / "train"),
            "valid_prefix": str(corpus / "valid"),
            "test_prefix": str(corpus / "test"),
            "vocab_size": 64,
            "max_len": 32,
            "max_tokens": 512,
            "cache_dir": str(tmp_path / "cache"),
        },
        "logging": {"wandb": False, "progress": False},
    }


def tiny_experiment(tmp_path, **sections):
    """A whole ExperimentConfig for a seconds-long run on write_corpus() data."""
    from ablate.experiment import load_config

    base = tiny_sections(tmp_path)
    base.update(
        {
            "train": {"max_steps": 30, "warmup": 10, "lr_scale": 2.0, "val_every_steps": 15, "log_every_steps": 5, "keep_last": 2},
            "out_dir": str(tmp_path / "run"),
        }
    )
    for section, values in sections.items():
        base.setdefault(section, {}).update(values) if isinstance(values, dict) else base.__setitem__(section, values)
    return load_config(**base)


def sweep_writer(tmp_path, train: dict, **defaults):
    """Writes TMP/base.yaml (tiny_experiment with `train`) once and returns write(**fields), which writes the sweep
    file TMP/sweep.yaml over that base (out_dir TMP/sweep, then `defaults`, then `fields`) and returns its path."""
    from pathlib import Path

    import yaml

    from ablate.config import to_yaml

    tmp_path = Path(tmp_path)
    base = tmp_path / "base.yaml"
    base.write_text(to_yaml(tiny_experiment(tmp_path, train=train)))

    def write(**fields) -> Path:
        path = tmp_path / "sweep.yaml"
        path.write_text(yaml.safe_dump({"base": str(base), "out_dir": str(tmp_path / "sweep"), **defaults, **fields}))
        return path

    return write


def trial_states(db) -> list[str]:
    """Trial states read straight from a study's SQLite file with a connection closed at once, so polling a running
    sweep never holds a lock on it; a journal file (*.log) is replayed, which takes no lock at all."""
    import sqlite3
    from pathlib import Path

    if not Path(db).exists():
        return []
    if Path(db).suffix == ".log":
        from optuna.storages.journal import JournalFileBackend, JournalStorage

        storage = JournalStorage(JournalFileBackend(str(db)))
        return [t.state.name for s in storage.get_all_studies() for t in storage.get_all_trials(s._study_id, deepcopy=False)]
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return [state for (state,) in con.execute("SELECT state FROM trials")]
    except sqlite3.OperationalError:  # the schema is still being created
        return []
    finally:
        con.close()


# -- the CLI in tests ----------------------------------------------------------------------------------------------

TINY_TRAIN = {
    "max_steps": 10,
    "warmup": 10,
    "lr_scale": 2.0,
    "val_every_steps": 5,
    "log_every_steps": 5,
    "keep_last": 5,
    "val_bleu": False,
    "num_threads": 1,
}


def write_experiment(tmp_path, name: str = "run", *, out_dir=None, data: dict | None = None, plugins=(), **train):
    """A seconds-long experiment (tiny_experiment's model on write_corpus data) as the file TMP/NAME.yaml, training
    into out_dir (default TMP/NAME): what a test that drives `ablate` in a subprocess passes it. Returns the path."""
    from pathlib import Path

    import yaml

    tmp_path = Path(tmp_path)
    cfg = tiny_sections(tmp_path)
    cfg["data"].update(data or {})
    cfg.update({"train": {**TINY_TRAIN, **train}, "out_dir": str(out_dir or tmp_path / name), "plugins": [str(p) for p in plugins]})
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def ablate(*args: str, env: dict | None = None, popen: bool = False, timeout: float = 300, **kw):
    """`python -m ablate ARGS` (what the console script runs) in a subprocess, text output captured: its CompletedProcess, or with `popen` the
    running Popen (to signal it)."""
    import os
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "ablate", *args]
    env = {**os.environ, **(env or {})}
    if popen:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **kw)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, **kw)


def run_cli(capsys, *args: str) -> tuple[int, str]:
    """ablate.cli.main in-process: (exit code, stdout + stderr); argparse's exit (an unknown flag) is an exit code."""
    from ablate.cli import main

    try:
        rc = main(list(args))
    except SystemExit as e:
        rc = e.code
    captured = capsys.readouterr()
    return rc, captured.out + captured.err


def snapshot(run_dir) -> dict[str, bytes]:
    """Every file (its bytes) and folder under a run directory, to prove nothing changed; not the lock file, which
    holds the pid of the last process to open the run."""
    return {
        str(p.relative_to(run_dir)): p.read_bytes() if p.is_file() else b"<dir>"
        for p in sorted(run_dir.rglob("*"))
        if p.name != ".run.lock"
    }


def lock_free(path) -> bool:
    """Whether no process holds an flock on `path` (a run's .run.lock): taken and let go at once if free."""
    import fcntl
    import os

    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def multi30k_names(folder: Path) -> Path:
    """A folder of the Multi30k file names, empty: `ablate sweep` looks for its trials' corpus (and downloads what it
    lacks) before anything else, so a test of what comes after, whose trials never read it, points
    ABLATE_DATA_DIR here. The folder."""
    named = folder / "multi30k"
    named.mkdir(parents=True, exist_ok=True)
    for name in ("train", "val", "test_2016_flickr"):
        for side in ("en", "de"):
            (named / f"{name}.{side}.gz").write_bytes(b"")
    return folder


def offline(monkeypatch) -> list[str]:
    """A machine with no network and no ABLATE_DATA_DIR: every download fails, as there; the URLs tried."""
    from ablate.data import datasets

    tried: list[str] = []

    def download(url, dest, sha256):
        tried.append(url)
        raise datasets.DownloadError(f"download of {url} failed: offline")

    monkeypatch.setattr(datasets, "download", download)
    monkeypatch.delenv("ABLATE_DATA_DIR", raising=False)
    return tried

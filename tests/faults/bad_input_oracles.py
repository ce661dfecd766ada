"""What a case of tests/faults/test_bad_inputs.py may answer: whether the input it fed is valid after all (the policies
in bad_input_cases' docstring), and what a command that took a damaged cache in its stride must have done."""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import sqlite3
from pathlib import Path

import yaml
from bad_input_cases import Case


def file_of(w: Path, name: str) -> Path:
    """The workspace's file `name`; KEY stands for a cache entry's digest."""
    return next(w.glob(name.replace("KEY", "*")))


ORACLE_DAMAGES = ("truncate", "flip", "insert")  # damages whose result may still be valid content; the rest never is


def before_damage(w: Path, case: Case) -> dict:
    """What the oracle compares with, read before the damage: the file's shape."""
    policy = case.policy if isinstance(case.policy, tuple) else (case.policy,)
    if policy[0] == "shape":
        return {"shape": _shape(file_of(w, policy[1]))}
    return {}


def is_legal(w: Path, case: Case, before: dict, damaged: Path | None) -> bool:
    """Whether the input the case fed is valid after all (see bad_input_cases' policies); `damaged` is a copy of the
    damaged file as it was before the command ran."""
    if case.policy in ("legal", "tolerant"):
        return True
    if case.policy in ("strict", "illegal"):
        return False
    kind, name, *rest = case.policy
    if kind in ("cache", "named", "restored"):  # rebuilt, skipped or restored, which the test checks after the run
        return True
    if case.spec[0] not in ORACLE_DAMAGES and not (kind == "study-file" and case.spec[0] == "set"):
        return False  # (a wrong type inside a row is not read by a command that only finds the study: the oracle says)
    # A config or sweep file is only read: the oracle loads it where it is (its relative paths hold); other files
    # may have been written to by the command, so it reads the copy taken before.
    path = w / name if kind in ("config", "sweep", "study-file") else damaged
    try:
        return ORACLES[kind](path, w, before, *rest)
    except Exception:
        return False


def _config_loads(path: Path, w: Path, before: dict) -> bool:
    from ablate.experiment import load_config

    load_config([path])
    return True


def _sweep_loads(path: Path, w: Path, before: dict) -> bool:
    from ablate.sweep.load import load_sweep

    load_sweep(path)
    return True


def _study_file_loads(path: Path, w: Path, before: dict) -> bool:
    from ablate.sweep.load import load_sweep

    load_sweep(path, to_run=False)
    return True


def _same_shape(path: Path, w: Path, before: dict) -> bool:
    return _shape(path) == before["shape"]


def _text(path: Path, w: Path, before: dict, partner: str | None) -> bool:
    data = path.read_bytes()
    text = (gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8")
    if partner is None:
        return True
    return bool(text) and len(text.splitlines()) == len((w / partner).read_text().splitlines())


def _checkpoint(path: Path, w: Path, before: dict) -> bool:
    from ablate.training.checkpoint import model_from_checkpoint

    model_from_checkpoint(path)
    return True


def _study(path: Path, w: Path, before: dict) -> bool:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        if con.execute("PRAGMA quick_check").fetchone()[0] != "ok":
            return False
        for table in ("studies", "trials", "trial_values", "trial_params", "trial_user_attributes", "trial_intermediate_values"):
            con.execute(f"SELECT * FROM {table}").fetchall()
        return True
    finally:
        con.close()


def _journal(path: Path, w: Path, before: dict) -> bool:
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    from ablate.sweep.journal import check_journal

    check_journal(path)
    storage = JournalStorage(JournalFileBackend(str(path)))
    return all(storage.get_all_trials(s._study_id) is not None for s in storage.get_all_studies())


ORACLES = {
    "config": _config_loads,
    "sweep": _sweep_loads,
    "study-file": _study_file_loads,
    "shape": _same_shape,
    "text": _text,
    "checkpoint": _checkpoint,
    "study": _study,
    "journal": _journal,
}


def _shape(path: Path):
    """The file's parsed structure with each value replaced by its kind; None when it does not parse."""
    data = path.read_bytes()
    try:
        if path.suffix == ".csv":
            rows = list(csv.reader(io.StringIO(data.decode("utf-8"))))
            return [[_kind(_number(c)) for c in row] for row in rows]
        doc = json.loads(data) if path.suffix == ".json" else yaml.safe_load(data)
    except (ValueError, yaml.YAMLError):
        return None
    return _kinds(doc)


def _number(cell: str):
    try:
        return float(cell) if cell else None
    except ValueError:
        return cell


def _kinds(doc):
    if isinstance(doc, dict):
        return {k: _kinds(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_kinds(v) for v in doc]
    return _kind(doc)


def _kind(value) -> str:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return type(value).__name__
    return "number" if value == value and abs(value) != float("inf") else "non-finite"


def check_after(w: Path, case: Case, damaged: Path | None) -> None:
    """What a command that took a damaged cache file in its stride (exit 0) must have done: a new run trained its
    tokenizer again (its bytes record the folder it was trained in, so they are not the first entry's), never with
    the damaged bytes; a cached copy named by its digest holds that content again."""
    kind = case.policy[0] if isinstance(case.policy, tuple) else case.policy
    if kind == "cache":
        used = json.loads((w / "fresh" / "fingerprint.json").read_text())["tokenizer"]["sha256"]
        assert used != hashlib.sha256(damaged.read_bytes()).hexdigest(), f"the run trained with the damaged cached tokenizer {case.file}"
    if kind == "restored":
        path = file_of(w, case.policy[1])
        assert hashlib.sha256(path.read_bytes()).hexdigest().startswith(path.stem), f"the damaged {path} was kept"

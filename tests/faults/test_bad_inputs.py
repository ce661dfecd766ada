"""Issue 32, the closing paragraph: every file ablate reads that it or a user wrote, and every numeric config key and
flag, gets a clear error naming the file, line or key on bad content, never a traceback.

Each case (tests/faults/bad_input_cases.py) copies one set of valid artefacts (a corpus, a config, a trained run, a
finished study on SQLite and one on a journal file, its archive, the tokenizer caches), damages one file or sets one
value out of range, and runs `python -m ablate.cli VERB ...` in a subprocess under an address-space limit of 2 GiB and
a 90 s timeout. It fails on a traceback, a hang, a memory blow-up (a signal, MemoryError, an allocator error), an exit
code its policy does not allow, or an error that names neither the file nor the key.

The limit: `python -c "import torch"` needs 768 MiB of address space here (512 MiB fails in OpenBLAS), and the valid
tiny training run passes under 2 GiB, so 2 GiB is the limit, as the issue asks. The cases are generated from a fixed
seed (bad_input_cases.rng: random.Random seeded from 0 and each group's name, so a new case leaves the others' ids
as they were): 547 of them, 16 minutes with `-n 2` on the 2 CPU cores, shared with other work (2026-11-26;
the artefacts take a minute first); issue 38 added 24 command-line cases (bad_input_commands: hostile YAML in an
override, models of billions of parameters through params and train), 571 in all.
Run: pytest -m slow tests/faults/test_bad_inputs.py -n 2
"""

from __future__ import annotations

import fcntl
import gzip
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from bad_input_cases import TRIAL, Case, file_cases
from bad_input_commands import command_cases
from bad_input_numbers import flag_cases, key_cases, sweep_key_cases
from bad_input_oracles import before_damage, check_after, file_of, is_legal
from bad_inputs import damage, set_key
from helpers import TINY_TRAIN, write_corpus

pytestmark = pytest.mark.slow

ADDRESS_SPACE = 2 * 1024**3
TIMEOUT_S = 90  # a hang; a case that retrains a damaged tokenizer cache and trains took over 30 s on 2 loaded cores
# A sweep whose journal was cut back to a trial's start waits for that unbeaten trial to go stale (18 beats of 1 s,
# ablate.sweep.journal), then finishes it: over 90 s on 2 cores loaded 4x (CI, 2026-11-29).
SWEEP_TIMEOUT_S = 180
BLOW_UP = ("MemoryError", "bad_alloc", "DefaultCPUAllocator", "Cannot allocate memory", "can't allocate memory")

TRAIN = {**TINY_TRAIN, "max_steps": 4, "warmup": 4, "val_every_steps": 2, "log_every_steps": 2}
VARIANTS = {"A-h1": {"model.heads": 1}, "base": {}}


def run_config(root: Path) -> dict:
    corpus = root / "corpus"
    data = {"dataset": "files", "vocab_size": 64, "max_len": 32, "max_tokens": 512, "cache_dir": str(root / "cache")}
    data.update({f"{split}_prefix": str(corpus / split) for split in ("train", "valid", "test")})
    model = {"enc_layers": 1, "dec_layers": 1, "d_model": 32, "d_ff": 64, "heads": 4, "dropout": 0.0}
    return {
        "data": data,
        "logging": {"wandb": False, "progress": False},
        "model": model,
        "out_dir": str(root / "run"),
        "train": dict(TRAIN),
    }


def sweep_file(root: Path, name: str = "demo", **fields) -> dict:
    return {"name": name, "base": str(root / "run.yaml"), "out_dir": str(root / "sweep"), "variants": VARIANTS, "workers": 1, **fields}


def _env(root: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ABLATE_", "WANDB_"))}
    env.update(ABLATE_DATA_DIR=str(root / "no-data"), ABLATE_CACHE=str(root / "cache"), WANDB_MODE="disabled", HF_HUB_OFFLINE="1")
    env.update(HF_DATASETS_OFFLINE="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONHASHSEED="0", COLUMNS="160")
    env.update(ABLATE_SWEEP_HEARTBEAT="1")  # a journal cut back to a trial's start leaves it unbeaten: stale in 18 s, not 90
    return env


def _ablate(root: Path, *args: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ablate.cli", *args], cwd=root, env=_env(root), capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, f"ablate {' '.join(args)}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


def build(root: Path) -> None:
    """The valid artefacts every case starts from."""
    corpus = write_corpus(root / "corpus")
    for lang in ("en", "de"):
        five = "".join((corpus / f"test.{lang}").read_text().splitlines(keepends=True)[:5])
        (corpus / f"five.{lang}").write_text(five)
    (corpus / "five.en.gz").write_bytes(gzip.compress((corpus / "five.en").read_bytes(), mtime=0))
    (root / "run.yaml").write_text(yaml.safe_dump(run_config(root)))
    (root / "sweep.yaml").write_text(yaml.safe_dump(sweep_file(root)))
    journal = {"out_dir": str(root / "jsweep"), "storage": f"journal://{root / 'jsweep' / 'study.log'}", "variants": {"base": {}}}
    (root / "jsweep.yaml").write_text(yaml.safe_dump(sweep_file(root, "jdemo", **journal)))
    _ablate(root, "train", "run.yaml")
    _ablate(root, "sweep", "sweep.yaml")
    _ablate(root, "sweep", "jsweep.yaml")
    _ablate(root, "archive", "sweep", "arch")
    _ablate(root, "translate", "run/checkpoints/last.ckpt", "--input", "corpus/five.en", "--device", "cpu")  # caches its tokenizer
    assert (root / TRIAL / "summary.json").is_file() and len(list((root / "cache" / "tokenizers").glob("*/spm.model"))) == 1
    assert len(list((root / "cache" / "tokenizers" / "from-checkpoints").glob("*.model"))) == 1
    (root / "DONE").touch()


@pytest.fixture(scope="session")
def template(tmp_path_factory) -> Path:
    """Built once per session: under xdist the workers share it (the first one builds it under a lock)."""
    shared = os.environ.get("PYTEST_XDIST_WORKER") is not None
    root = (tmp_path_factory.getbasetemp().parent if shared else tmp_path_factory.getbasetemp()) / "bad-inputs"
    root.mkdir(exist_ok=True)
    with open(root.parent / "bad-inputs.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "DONE").exists():
            build(root)
    return root


def workspace(template: Path, tmp_path: Path) -> Path:
    """A copy of the artefacts whose recorded absolute paths (configs, run records, the study's run folders) name the copy."""
    w = tmp_path / "w"
    shutil.copytree(template, w)
    old, new = str(template).encode(), str(w).encode()
    for path in w.rglob("*"):
        if path.suffix in (".yaml", ".json", ".csv", ".log") and path.is_file():
            path.write_bytes(path.read_bytes().replace(old, new))
        elif path.suffix == ".db":
            con = sqlite3.connect(path)
            with con:
                for table in ("trial_user_attributes", "study_user_attributes", "trial_system_attributes", "study_system_attributes"):
                    con.execute(f"UPDATE {table} SET value_json = replace(value_json, ?, ?)", (str(template), str(w)))
            con.close()
    return w


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def _accepts(key: str, value) -> bool:
    """Whether the config validator takes `value` for `key` (in the tiny run's config)."""
    from ablate.experiment import load_config

    doc = run_config(Path("/x"))
    set_key(doc, key.split("."), value)
    try:
        load_config(**doc)
        return True
    except ValueError:
        return False


def _baseline() -> dict:
    from ablate.config import flatten, to_dict
    from ablate.experiment import load_config

    return flatten(to_dict(load_config(**run_config(Path("/x")))))


CASES = file_cases(run_config(Path("/x")), sweep_file(Path("/x"))) + key_cases(_accepts, _baseline()) + sweep_key_cases() + flag_cases()
CASES += command_cases()  # issue 38 items 7 and 8: overrides, model sizes, a long line on stdin


PARAMS = [pytest.param(c, id=c.id) for c in CASES]


@pytest.mark.parametrize("case", PARAMS)
def test_bad_input_is_named_never_a_traceback(template, tmp_path, monkeypatch, case: Case):
    w = workspace(template, tmp_path)
    before, damaged = before_damage(w, case), None
    if case.file:
        target = file_of(w, case.file)
        damage(target, case.spec, w)
        damaged = tmp_path / "damaged" / target.name  # the oracle reads this copy: the command may write to the file
        damaged.parent.mkdir()
        shutil.copyfile(target, damaged)
    argv = [a.replace("{w}", str(w)) for a in case.argv]
    limit = SWEEP_TIMEOUT_S if argv[0] == "sweep" else TIMEOUT_S
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "ablate.cli", *argv], cwd=w, env=_env(w), input=case.stdin or b"", capture_output=True,
            timeout=limit, preexec_fn=_limit,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"ablate {' '.join(argv)} ran past {limit} s (a hang, or bad input not refused at once)")
    out = (proc.stdout + proc.stderr).decode(errors="replace")
    shown = f"ablate {' '.join(argv)} -> exit {proc.returncode}\n{out[-4000:]}"
    assert "Traceback" not in out, shown
    assert proc.returncode >= 0 and not any(s in out for s in BLOW_UP), f"crash or memory blow-up: {shown}"
    assert not (w / "PWNED").exists(), "a YAML tag ran code"
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "oracle-cache"))
    legal = is_legal(w, case, before, damaged)
    if proc.returncode == 0:
        assert legal, f"bad input accepted (exit 0): {shown}"
        check_after(w, case, damaged)
        assert case.policy[0] != "named" or _names(out, w, case), f"a file skipped without a word: {shown}"
    else:
        assert _names(out, w, case, also=(str(w), "data.", "model.", "train.") if legal else ()), (
            f"the error names none of {case.names}: {shown}"
        )


def _names(out: str, w: Path, case: Case, also: tuple[str, ...] = ()) -> bool:
    """Whether `out` names the case's file (its name, or its folder with the word the name starts with: "RUN: summary
    key ..."), its key or flag, or one of `also`."""
    if any(n in out for n in case.names + also):
        return True
    return bool(case.file) and str((w / case.file).parent) in out and Path(case.file).stem.split(".")[0] in out

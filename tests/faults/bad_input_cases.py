"""The file cases of tests/faults/test_bad_inputs.py: which verb reads which file, and what each may answer (the
numeric keys and flags: bad_input_numbers; the answers: bad_input_oracles).

A case runs `ablate ARGV` in a copy of the valid artefacts (the workspace, `{w}` in ARGV) after damaging one file,
or with one numeric config key or flag set out of range. Its `policy` says what a clean answer is:

    strict            exit non-zero with a message naming the file (or key, or flag)
    legal / illegal   a value decided beforehand (a flag by the rule its help states, a key by the config validator)
    ("config", F)     legal when the damaged config F still loads (ablate.experiment.load_config, in the test process)
    ("sweep", F)      legal when the damaged sweep file F still loads (ablate.sweep.load.load_sweep)
    ("study-file", F) legal when F still loads as `status`, `table` and `archive` read it: only to find its study
                      (load_sweep(to_run=False); a row's overrides are not checked, a study run before a check reads)
    ("shape", F)      legal when F still parses (YAML, JSON or CSV) to the same keys and kinds of value
    ("text", F, P)    legal when F is UTF-8 text (plain or gzip) with as many lines as its partner P (None: any)
    ("checkpoint", F) legal when the checkpoint F still rebuilds a model (ablate.training.checkpoint.model_from_checkpoint)
    ("study", F)      legal when the SQLite study F passes quick_check and each of Optuna's tables reads
    ("journal", F)    legal when the journal F replays (ablate.sweep.journal.check_journal, then Optuna)
    ("cache", F)      a damaged tokenizer cache entry F: refused naming it, or trained again (the run's tokenizer is
                      not the damaged bytes)
    ("named", F)      a file the command may skip, saying so: exit 0 is fine when the output names F
    ("restored", F)   a cache file named by its content's digest: exit 0 is fine when F holds that content again
    tolerant          a reader that documents skipping what it cannot read (progress.json, read while it is written;
                      a journal's torn last line, an append in progress): exit 0 is fine, an error must name the file

Only truncated, byte-flipped and invalid-UTF-8 files can turn out valid; hostile YAML and JSON never are. Legal input
may still end in an error (a cut config that names a missing corpus file): it must name a file, key or flag then too.
Every case, whatever its policy: no traceback, no hang, no memory blow-up.
"""

from __future__ import annotations

import random
from typing import Any, NamedTuple

from bad_inputs import SEED, csv_damages, file_damages, json_damages, yaml_damages

CONFIG = "run.yaml"
CKPT = "run/checkpoints/last.ckpt"
TRIAL = "sweep/trials/0001-base"  # the base row's run directory in the finished study
ARCH_TRIAL = "arch/trials/0001-base"

# The verbs as each case runs them; {w} is the workspace (a copy of the valid artefacts).
VERBS = {
    "params": ("params", "{w}/run.yaml"),
    "train": ("train", "{w}/run.yaml", "out_dir={w}/fresh"),
    "train-resume": ("train", "{w}/run.yaml", "--resume"),
    "sweep": ("sweep", "{w}/sweep.yaml"),
    "sweep-dry-run": ("sweep", "{w}/sweep.yaml", "--dry-run"),
    "sweep-journal": ("sweep", "{w}/jsweep.yaml"),
    "status": ("status", "{w}/sweep"),
    "status-file": ("status", "{w}/sweep.yaml"),
    "status-journal": ("status", "{w}/jsweep.yaml"),
    "status-archive": ("status", "{w}/arch"),
    "table": ("table", "{w}/sweep", "--out", "{w}/tables"),
    "table-file": ("table", "{w}/sweep.yaml", "--out", "{w}/tables"),
    "table-at-update": ("table", "{w}/sweep", "--out", "{w}/tables", "--at-update", "2"),
    "table-archive": ("table", "{w}/arch", "--out", "{w}/tables"),
    "archive": ("archive", "{w}/sweep", "{w}/arch2"),
    "archive-file": ("archive", "{w}/sweep.yaml", "{w}/arch2"),
    "archive-update": ("archive", "{w}/sweep", "{w}/arch"),
    "archive-archive": ("archive", "{w}/arch", "{w}/arch2"),
    "translate": ("translate", f"{{w}}/{CKPT}", "--input", "{w}/corpus/five.en", "--device", "cpu"),
    "translate-stdin": ("translate", f"{{w}}/{CKPT}", "--device", "cpu"),
    "evaluate": ("evaluate", f"{{w}}/{CKPT}", "--src", "{w}/corpus/five.en", "--ref", "{w}/corpus/five.de", "--device", "cpu"),
    "average": ("average", "{w}/run/checkpoints/step=2.ckpt", f"{{w}}/{CKPT}", "-o", "{w}/avg.ckpt"),
}


class Case(NamedTuple):
    id: str
    argv: tuple[str, ...]
    file: str | None = None  # the file damaged (relative to the workspace)
    spec: tuple | None = None  # bad_inputs.damage's spec
    names: tuple[str, ...] = ()  # an error must name one of these
    policy: Any = "strict"
    stdin: bytes | None = None


def argv_of(verb: str, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    return VERBS[verb] + extra


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def rng(*parts) -> random.Random:
    """A generator of its own for each group of cases, seeded from SEED and the group's name: adding a case to one
    group leaves every other case (and its id) as it was."""
    return random.Random(":".join(map(str, (SEED, *parts))))


def file_cases(run_config: dict, sweep_file: dict) -> list[Case]:
    """Every file kind, damaged every way that fits it, fed to each verb that reads it."""
    cases: list[Case] = []

    def add(verbs: list[str], file: str, damages: list[tuple[str, tuple]], policy: Any, names: tuple[str, ...] = ()) -> None:
        for verb in verbs:
            for label, spec in damages:
                cases.append(Case(f"{verb}:{file}:{label}", argv_of(verb), file, spec, (_name(file), *names), policy))

    base = file_damages(rng("file"))
    add(["params", "train"], CONFIG, base + yaml_damages(rng(CONFIG), run_config), ("config", CONFIG))
    sweep_damages = base + yaml_damages(rng("sweep.yaml"), sweep_file)
    add(["sweep-dry-run"], "sweep.yaml", sweep_damages, ("sweep", "sweep.yaml"))
    for verb in ("status-file", "table-file", "archive-file"):  # each reads the file to find its study: a sample
        add([verb], "sweep.yaml", rng(verb).sample(sweep_damages, 5), ("study-file", "sweep.yaml"))
    add(
        ["sweep-dry-run"],
        CONFIG,
        rng("base").sample(base + yaml_damages(rng(CONFIG), run_config), 8),
        ("sweep", "sweep.yaml"),
        ("sweep.yaml",),
    )
    # corpora: the training and validation files of a new run, and the files translate and evaluate read
    add(["train"], "corpus/train.en", base, ("text", "corpus/train.en", "corpus/train.de"))
    add(["train"], "corpus/valid.de", base, ("text", "corpus/valid.de", "corpus/valid.en"))
    add(["translate"], "corpus/five.en", base, ("text", "corpus/five.en", None))
    add(["evaluate"], "corpus/five.de", base, ("text", "corpus/five.de", "corpus/five.en"))
    gz = [(label, spec) for label, spec in base if label != "cut-last-byte"] + [("gz-cut-last-byte", ("truncate", -1))]
    for verb, flag in (("translate", "--input"), ("evaluate", "--src")):
        for label, spec in gz:
            argv = tuple("{w}/corpus/five.en.gz" if a == "{w}/corpus/five.en" else a for a in argv_of(verb))
            policy = ("text", "corpus/five.en.gz", None if verb == "translate" else "corpus/five.de")
            cases.append(Case(f"{verb}:{flag}=five.en.gz:{label}", argv, "corpus/five.en.gz", spec, ("five.en.gz",), policy))
    cases.append(Case("translate:stdin:invalid-utf8", argv_of("translate-stdin"), names=("stdin",), stdin=b"the dog\nthe \xff\xfe cat\n"))
    # the tokenizer cache a new run trains with (settings.json only holds the model's digest), and the cached copy of
    # a checkpoint's tokenizer that translate and evaluate load
    add(["train"], "cache/tokenizers/KEY/spm.model", base, ("cache", "cache/tokenizers/KEY/spm.model"))
    add(["train"], "cache/tokenizers/KEY/settings.json", rng("settings.json").sample(base, 3), "tolerant")
    add(["translate"], "cache/tokenizers/from-checkpoints/KEY.model", base, ("restored", "cache/tokenizers/from-checkpoints/KEY.model"))
    # checkpoints, from every verb that loads one
    add(["translate", "evaluate", "average"], CKPT, base, ("checkpoint", CKPT))
    # a resume goes on from the last checkpoint that loads, naming any it skips ("its last good checkpoint")
    add(["train-resume"], CKPT, base, ("named", CKPT))
    # what a run wrote, read back by a resume
    add(
        ["train-resume"],
        "run/config.yaml",
        rng("run/config.yaml").sample(base + yaml_damages(rng(CONFIG), run_config), 8),
        ("shape", "run/config.yaml"),
    )
    add(
        ["train-resume"],
        "run/fingerprint.json",
        rng("run/fingerprint.json").sample(base + json_damages(rng("fingerprint.json")), 8),
        ("shape", "run/fingerprint.json"),
    )
    # a finished study's run files, read by ablate table (and its evaluation records by ablate archive too)
    for file, damages in (
        (f"{TRIAL}/summary.json", base + json_damages(rng("summary.json"))),
        (f"{TRIAL}/config.yaml", base + rng("trial config").sample(yaml_damages(rng(CONFIG), run_config), 6)),
        (f"{TRIAL}/eval/valid.json", base + json_damages(rng("valid.json"))),
    ):
        add(["table"], file, damages, ("shape", file))
    add(["archive"], f"{TRIAL}/eval/valid.json", base + json_damages(rng("valid.json")), ("shape", f"{TRIAL}/eval/valid.json"))
    add(["table-at-update"], f"{TRIAL}/metrics.csv", base + csv_damages(rng("metrics.csv")), ("shape", f"{TRIAL}/metrics.csv"))
    add(["status"], f"{TRIAL}/progress.json", base + json_damages(rng("progress.json")), "tolerant")
    # the study's storage, from every verb that opens it
    db_damages = [d for d in base if d[0] != "invalid-utf8"]
    add(["sweep", "status", "archive"], "sweep/study.db", db_damages, ("study", "sweep/study.db"))  # (ablate table reads run folders)
    journal = base + [
        ("torn-line", ("append", '{"op_code": 5, "worker_id": "x", "trial_id": 0, "param')),
        ("not-an-op", ("append", "[1, 2]\n")),
    ]
    add(["sweep-journal"], "jsweep/study.log", journal, ("journal", "jsweep/study.log"))
    add(["status-journal"], "jsweep/study.log", journal[:-2], ("journal", "jsweep/study.log"))
    # a reader skips a last line still being appended (ablate.sweep.journal); only a writer must refuse it
    add(["status-journal"], "jsweep/study.log", journal[-2:-1], "tolerant")
    add(["status-journal"], "jsweep/study.log", journal[-1:], ("journal", "jsweep/study.log"))
    # an archive: tabulated, shown, archived again, and updated from the study
    add(["status-archive", "archive-archive", "archive-update"], "arch/study.db", db_damages, ("study", "arch/study.db"))
    for verb in ("table-archive", "archive-archive"):
        add(
            [verb],
            f"{ARCH_TRIAL}/eval/valid.json",
            rng(verb, "valid.json").sample(base + json_damages(rng("valid.json")), 6),
            ("shape", f"{ARCH_TRIAL}/eval/valid.json"),
        )
    add(
        ["table-archive"],
        f"{ARCH_TRIAL}/summary.json",
        rng("table-archive", "summary.json").sample(base + json_damages(rng("summary.json")), 6),
        ("shape", f"{ARCH_TRIAL}/summary.json"),
    )
    return cases

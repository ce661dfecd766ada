"""The command-line cases of tests/faults/test_bad_inputs.py (issue 38 items 7 and 8): hostile YAML in an override's
value, which must be named as the override is (never a yaml traceback, never a tag run); models of tens of billions of
parameters, which `params` counts without allocating them and `train` refuses naming their size before building
them. (A long line on translate's stdin is not a case here: the harness's model has sinusoidal positions, which take
a source of any length, and its decoding of a 10,000-word line runs for minutes; the bounded reading is tested in
tests/unit/data/test_corpus.py and tests/faults/test_translate_input.py.)"""

from __future__ import annotations

from bad_input_cases import Case, argv_of, rng
from bad_inputs import BOMB_LEVELS, DEEP

OVERRIDE_KEYS = ["logging.tags", "model.heads", "train.lr_scale", "data.dataset", "model.positional", "train.betas", "seed"]


def flow_bomb(levels: int) -> str:
    """An alias bomb in one line (flow style), as an override's value holds it: 9**levels values once expanded."""
    anchors = ["&l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    anchors += [f"&l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "[" + ", ".join(anchors) + "]"


OVERRIDE_VALUES = [
    ("unclosed-list", "[a, b"),
    ("unclosed-map", "{a: 1"),
    ("python-object-tag", "!!python/object/apply:os.system ['touch {w}/PWNED']"),
    ("python-name-tag", "!!python/name:os.system"),
    ("undefined-alias", "*nope"),
    ("duplicate-key", "{a: 1, a: 2}"),
    ("alias-bomb", flow_bomb(BOMB_LEVELS)),  # past ablate's own bound (ablate.files.yaml_file.MAX_VALUES)
    ("deep-nesting", "[" * DEEP + "]" * DEEP),
]

# Each far past this machine's memory to train, within the validator's bound (ablate.config.validation.MAX_WEIGHTS).
HUGE_MODELS = [("model.d_model", 32768), ("model.d_ff", 10**8), ("data.vocab_size", 10**8)]


def command_cases() -> list[Case]:
    cases = []
    for verb in ("params", "train"):
        for label, value in OVERRIDE_VALUES:
            key = rng("override", verb, label).choice(OVERRIDE_KEYS)
            argv = argv_of(verb, (f"{key}={value}",))
            cases.append(Case(f"{verb}:override:{key}={label}", argv, names=(f"override '{key}=",), policy="strict"))
    for key, value in HUGE_MODELS:
        # counted on the meta device: the table, its total, under the harness's 2 GiB (exit 0 must print it)
        cases.append(Case(f"params:{key}={value}", argv_of("params", (f"{key}={value}",)), names=("total",), policy=("named", None)))
        # refused before anything is built, naming the parameters (and so the size)
        cases.append(Case(f"train:{key}={value}", argv_of("train", (f"{key}={value}",)), names=("parameters (",), policy="strict"))
    return cases

"""The paper's Table 3 (variations on the base model, newstest2013 dev): our reference columns.

Each row is the config overrides that make it plus the paper's PPL, BLEU and params (x10^6).
Blank cells of the paper mean "as base"; a blank params cell is therefore the base's 65.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class PaperRow:
    name: str
    group: str  # base, A..E, big
    overrides: dict = field(default_factory=dict)
    ppl: float = 0.0
    bleu: float = 0.0
    params_m: float = 65.0
    train_steps: int = 100_000


TABLE3: list[PaperRow] = [
    PaperRow("base", "base", {}, 4.92, 25.8, 65),
    PaperRow("A-h1", "A", {"model.heads": 1, "model.d_k": 512, "model.d_v": 512}, 5.29, 24.9),
    PaperRow("A-h4", "A", {"model.heads": 4, "model.d_k": 128, "model.d_v": 128}, 5.00, 25.5),
    PaperRow("A-h16", "A", {"model.heads": 16, "model.d_k": 32, "model.d_v": 32}, 4.91, 25.8),
    PaperRow("A-h32", "A", {"model.heads": 32, "model.d_k": 16, "model.d_v": 16}, 5.01, 25.4),
    PaperRow("B-dk16", "B", {"model.d_k": 16}, 5.16, 25.1, 58),
    PaperRow("B-dk32", "B", {"model.d_k": 32}, 5.01, 25.4, 60),
    PaperRow("C-N2", "C", {"model.enc_layers": 2, "model.dec_layers": 2}, 6.11, 23.7, 36),
    PaperRow("C-N4", "C", {"model.enc_layers": 4, "model.dec_layers": 4}, 5.19, 25.3, 50),
    PaperRow("C-N8", "C", {"model.enc_layers": 8, "model.dec_layers": 8}, 4.88, 25.5, 80),
    PaperRow("C-d256", "C", {"model.d_model": 256, "model.d_k": 32, "model.d_v": 32}, 5.75, 24.5, 28),
    PaperRow("C-d1024", "C", {"model.d_model": 1024, "model.d_k": 128, "model.d_v": 128}, 4.66, 26.0, 168),
    PaperRow("C-ff1024", "C", {"model.d_ff": 1024}, 5.12, 25.4, 53),
    PaperRow("C-ff4096", "C", {"model.d_ff": 4096}, 4.75, 26.2, 90),
    PaperRow("D-drop0.0", "D", {"model.dropout": 0.0}, 5.77, 24.6),
    PaperRow("D-drop0.2", "D", {"model.dropout": 0.2}, 4.95, 25.5),
    PaperRow("D-ls0.0", "D", {"train.label_smoothing": 0.0}, 4.67, 25.3),
    PaperRow("D-ls0.2", "D", {"train.label_smoothing": 0.2}, 5.47, 25.7),
    PaperRow("E-learned", "E", {"model.positional": "learned"}, 4.92, 25.7),
    PaperRow(
        "big",
        "big",
        {"model.d_model": 1024, "model.d_ff": 4096, "model.heads": 16, "model.dropout": 0.3},
        4.33,
        26.4,
        213,
        300_000,
    ),
]

# What ends a run: every row of a study must set these train keys as its base does, whatever the stop kind (a row with
# its own cap, budget, rule or validation interval would stop on other terms; the convergence and early-stopping rules
# count validations). Compared by config.trained.same_value (max_time by its seconds); ablate.sweep.basis checks them.
STOP_KEYS = (
    "max_steps", "max_epochs", "max_flops", "max_time", "converge_window", "converge_tol", "early_stop_metric", "patience",
    "min_delta", "val_every_steps",
)  # fmt: skip
# How long a row trains, when it stops and which weights it reports: the study's basis (a scaled study trains every
# row to convergence; the paper's big trained 300k steps and averaged its last 20 checkpoints), not what the row varies.
BASIS_KEYS = tuple(f"train.{k}" for k in (*STOP_KEYS, "final_average"))


def unlike(paper: PaperRow, changed: set[str]) -> str | None:
    """Why a row named as the paper's `paper` row, which changes the config keys `changed` against the study's base,
    is not that row (a variant of one's own given a paper row's name would be set beside the paper's figures and given
    a verdict); None where it changes what the paper's row changes, at any scale of their values."""
    keys, derived = set(paper.overrides), {"model.d_k", "model.d_v"}
    if not keys & {"model.d_model", "model.heads"}:
        derived = set()  # d_k and d_v are d_model / heads where the paper's row changes either: they follow
    varied = {k for k in changed if k not in BASIS_KEYS}
    if extra := sorted(varied - keys - derived):
        return f"changes {', '.join(extra)}, which the paper's {paper.name} does not"
    if missing := [k for k in paper.overrides if k not in derived and k not in varied]:
        return f"leaves {', '.join(missing)} as the base has it, which the paper's {paper.name} changes"
    return None


PAPER_VOCAB = 41_000  # the shared vocabulary at which the params column is self-consistent (see PAPER.md)


BASE_VARIANTS = "base-variants"  # rows named base-...: the base changed in how it is trained (e.g. trained longer)


def row_group(row: str) -> str:
    """Table 3 group of a row name, the part before its first '-': 'A-h1' -> 'A', 'attn-additive' -> 'attn';
    'base' alone is the base row's group, and other base-... rows (controls such as 'base-2x') are BASE_VARIANTS,
    so they are compared and plotted like any row instead of hiding in the base's group."""
    prefix = row.split("-", 1)[0]
    return BASE_VARIANTS if prefix == "base" and row != "base" else prefix

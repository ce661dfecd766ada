"""Crafted studies for `ablate table` tests: run directories (config.yaml, summary.json, eval/SPLIT.json) whose
systems copy the reference in a chosen share of sentences, so every statistic has a known direction."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ablate.config import to_yaml
from ablate.config.paper import TABLE3
from ablate.evaluation.records import eval_path, write_eval_file
from ablate.experiment import load_config
from ablate.sweep.spec import nest
from ablate.table.finished_runs import Run

VOCAB = [f"w{i}" for i in range(400)]
SMALL = {"model.d_model": 64, "model.heads": 4, "model.enc_layers": 3, "model.dec_layers": 3}
# The paper's rows over SMALL: its values, but where one is SMALL's own (A-h4's 4 heads, B-dk16's d_k 16) the row would
# change nothing the paper's does and not be set beside it (ablate.config.paper.unlike), so it is scaled as the paper
# changes its base: A-h4 halves the heads (d_k doubled), B-dk16 quarters d_k.
PAPER_AT_SMALL = {p.name: p.overrides for p in TABLE3} | {
    "A-h4": {"model.heads": 2, "model.d_k": 32, "model.d_v": 32},
    "B-dk16": {"model.d_k": 4},
}


def sentence(rng: np.random.Generator) -> str:
    return " ".join(rng.choice(VOCAB, size=int(rng.integers(5, 20))))


def references(n: int, seed: int = 123) -> list[str]:
    rng = np.random.default_rng(seed)
    return [sentence(rng) for _ in range(n)]


def system(refs: list[str], copy_rate: float, seed: int) -> dict:
    """One seed's eval record fields: the reference in about `copy_rate` of sentences (low NLL there), random words
    elsewhere (high NLL)."""
    rng = np.random.default_rng(seed)
    copied = rng.random(len(refs)) < copy_rate
    tokens = [len(r.split()) + 1 for r in refs]
    return {
        "hypotheses": [r if c else sentence(rng) for r, c in zip(refs, copied)],
        "nll": [t * (1.0 if c else 3.0) * float(rng.uniform(0.9, 1.1)) for t, c in zip(tokens, copied)],
        "tokens": tokens,
    }


def record_fields(n: int = 30, seed: int = 1) -> dict:
    """An evaluation record's fields for `n` crafted sentences: hypotheses, NLL and tokens, and the references."""
    refs = references(n, seed=seed)
    return {**system(refs, 0.5, seed), "references": refs}


def bare_run(row: str, source: str, **kw) -> Run:
    """A tabulated run with no scores of its own (its record gives them)."""
    return Run(row=row, config={}, ppl=None, bleu=None, params=None, tokens_per_s=None, step_ms=None, source=source, **kw)


def write_run(
    root: Path, row: str, seed: int, overrides: dict | None = None, summary: dict | None = None, records: dict[str, dict] | None = None
) -> Path:
    """One finished run: config.yaml, summary.json and, per split in `records`, eval/SPLIT.json from `system` fields
    plus "references" (and optionally "indices")."""
    out = root / "trials" / f"{row}-s{seed}"
    out.mkdir(parents=True)
    (out / "config.yaml").write_text(config_text({**SMALL, **(overrides or {}), "seed": seed, "sweep.study": "t", "sweep.row": row}))
    summary = summary or {"last": {"val/bleu": 20.0, "val/ppl": 9.0}}
    (out / "summary.json").write_text(json.dumps({"params": {"total": 1_000_000}, **summary}))
    for split, fields in (records or {}).items():
        fields = {"indices": range(len(fields["references"])), **fields}
        eval_file(out, split, fields)
    return out


# The tests write the same few runs again and again (a row's seeds, in every test's study): each distinct config is
# composed and validated once per process, and each distinct eval record made once and then written as those bytes.
_CONFIGS: dict[str, str] = {}
_EVAL_FILES: dict[str, bytes] = {}


def config_text(flat: dict) -> str:
    """The config.yaml ablate writes for the run of these dotted overrides (`load_config`, then `to_yaml`)."""
    key = json.dumps(flat, sort_keys=True, default=repr)
    if key not in _CONFIGS:
        _CONFIGS[key] = to_yaml(load_config(**nest(flat)))
    return _CONFIGS[key]


def eval_file(out: Path, split: str, fields: dict) -> None:
    """OUT/eval/SPLIT.json as `write_eval_file` writes it for `fields` (written by it the first time, copied after)."""
    key = json.dumps([split, {k: list(v) if isinstance(v, range) else v for k, v in fields.items()}], sort_keys=True, default=repr)
    path = eval_path(out, split)
    if key not in _EVAL_FILES:
        _EVAL_FILES[key] = write_eval_file(out, split, dataset="multi30k", checkpoint="best.ckpt", **fields).read_bytes()
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(_EVAL_FILES[key])


def markdown_rows(md: str) -> dict[str, dict[str, str]]:
    """The first Markdown table as {row name: {header: cell}} (group separator rows left out)."""
    lines = [ln for ln in md.splitlines() if ln.startswith("|")]
    head = [h.strip() for h in lines[0].strip("|").split("|")]
    rows = {}
    for ln in lines[2:]:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        if len(cells) != len(head) or cells[0].startswith("**"):
            if cells[0] == "group":  # the agreement table starts
                break
            continue
        rows[cells[0]] = dict(zip(head, cells))
    return rows

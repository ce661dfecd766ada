"""The per-run evaluation file, `RUN_DIR/eval/{split}.json`: the single definition of its format.

One record per run and split holds every scored sentence's hypothesis, reference and teacher-forced NLL, so
`ablate table` can compare ablation rows on the same sentences (a paired bootstrap, `ablate.table.paired_bootstrap`)
instead of comparing one corpus number per run. Training writes it for the validation split,
`ablate evaluate --split test --save-eval` (or `ablate table --split test`) for the test split; a W&B run carries
the same record, its lists as a W&B table (`ablate.evaluation.wandb_records`).

    {"split": "valid" | "test", "dataset": "multi30k",
     "checkpoint": "best.ckpt" | "last.ckpt" | "avg.ckpt" | "final weights",
     "sentences": N, "subset": "all" | "random 500 of 1014 (seed 0)",
     "indices": [int, ...],          # into the split's sentence pairs, ascending; the lists below follow them
     "hypotheses": [str, ...], "references": [str, ...],   # detokenised text
     "bleu_stats": [[int x 10], ...],  # instead of (or beside) the text: each sentence's sacreBLEU statistics
     "nll": [float, ...],            # summed NLL (nats) of each reference, teacher-forced, no label smoothing
     "tokens": [int, ...],           # target tokens each NLL is summed over (EOS included)
     "bleu": float, "bleu_signature": str, "ppl": float}   # corpus sacreBLEU and exp(sum nll / sum tokens)

A record holds the text, its sacreBLEU statistics, or both. `text_free` keeps only the statistics
([len_hyp, len_ref, correct_1..4, total_1..4] per sentence, all that corpus BLEU and its bootstrap read): such a record
carries no corpus text, so a study's evidence can be committed or shared where the corpus may not be (`ablate archive`).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ablate.files.atomic import replacing
from ablate.files.json_file import read_json

SPLITS = ("valid", "test")
# The weights a run reports (its summary's `selected`): the average of its last K checkpoints, saved as AVERAGED
# ("avg of last K"), or the weights it ended with (FINAL).
AVERAGED = "avg.ckpt"  # weights only: never last.ckpt, which a resumed run continues from
FINAL = "final weights"
LISTS = ("indices", "hypotheses", "references", "nll", "tokens")
TEXT = ("hypotheses", "references")  # optional once `bleu_stats` stands in for them
BLEU_STATS_WIDTH = 10  # sacreBLEU's per-sentence statistics at its default max n-gram order 4


class EvalFileError(ValueError):
    """A malformed evaluation record; the message names the file (or W&B run) it came from."""


@dataclass(frozen=True)
class EvalFile:
    """A validated evaluation record; `source` is where it was read from (for messages)."""

    split: str
    dataset: str
    checkpoint: str
    sentences: int
    subset: str
    indices: list[int]
    hypotheses: list[str] | None  # None in a text-free record
    references: list[str] | None
    nll: list[float]
    tokens: list[int]
    bleu: float
    bleu_signature: str
    ppl: float
    source: str
    bleu_stats: list[list[int]] | None = None

    def sentence_bleu_stats(self) -> list[list[int]]:
        """Each sentence's sacreBLEU statistics: the stored ones, else extracted from the text."""
        if self.bleu_stats is not None:
            return self.bleu_stats
        return sentence_bleu_stats(self.hypotheses, self.references, self.tokenizer)

    @property
    def tokenizer(self) -> str:
        """The sacreBLEU tokenizer its BLEU was scored with (its signature's `tok:`), which its text is scored with again."""
        return signature_tokenizer(self.bleu_signature)


def signature_tokenizer(signature: str) -> str:
    """The tokenizer a sacreBLEU signature's `tok:` names (13a where it names none: records made before ablate chose by
    language). A tokenizer signs with its version (`ja-mecab-0.996-IPA`), so it is the longest name the value starts with."""
    from sacrebleu.metrics.bleu import _TOKENIZERS  # sacreBLEU's names for its tokenizers

    found = re.search(r"(?:^|\|)tok:([^|]+)", signature or "")
    if not found:
        return "13a"
    named = [name for name in _TOKENIZERS if found.group(1) == name or found.group(1).startswith(name + "-")]
    return max(named, key=len) if named else found.group(1)


def sentence_bleu_stats(hyps: Sequence[str], refs: Sequence[str], tokenize: str = "13a") -> list[list[int]]:
    """Per-sentence sacreBLEU statistics (n lists of [len_hyp, len_ref, correct_1..4, total_1..4]); their column sums
    give corpus BLEU exactly as `BLEU(tokenize=tokenize).corpus_score(hyps, [refs])` does."""
    from ablate.evaluation.scores import bleu_metric

    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses for {len(refs)} references")
    # sacreBLEU has no public per-sentence statistics; its own paired bootstrap (significance.py) reads them here.
    return [[int(x) for x in row] for row in bleu_metric(tokenize)._extract_corpus_statistics(list(hyps), [list(refs)])]


def text_free(data: dict) -> dict:
    """A record (as parsed from a file or summary) with its text replaced by per-sentence BLEU statistics."""
    record = parse_eval(data, "the record to strip")
    out = {k: v for k, v in data.items() if k not in TEXT}
    out["bleu_stats"] = record.sentence_bleu_stats()
    return out


def eval_path(run_dir: str | os.PathLike, split: str) -> Path:
    return Path(run_dir) / "eval" / f"{split}.json"


def describe_subset(chosen: int, total: int, seed: int | None = None) -> str:
    """The `subset` field: "all", or e.g. "random 500 of 1014 (seed 0)" for a sample of the split."""
    if chosen == total:
        return "all"
    return f"random {chosen} of {total}" + ("" if seed is None else f" (seed {seed})")


def eval_record(
    *,
    split: str,
    dataset: str,
    checkpoint: str,
    indices: Sequence[int],
    hypotheses: Sequence[str],
    references: Sequence[str],
    nll: Sequence[float],
    tokens: Sequence[int],
    subset: str = "all",
    tokenize: str = "13a",
) -> dict:
    """The record for one run and split, with corpus BLEU (`ablate.evaluation.scores.bleu`, as validation reports it,
    tokenized by `tokenize`: bleu_tokenizer of the target language) and PPL.

    Pairs are put in ascending index order. Also what a run logs to W&B (`ablate.evaluation.wandb_records.log_record`).
    """
    from ablate.evaluation.scores import bleu, perplexity  # sacreBLEU, imported where a record is made: readers need none

    order = sorted(range(len(indices)), key=lambda i: indices[i])
    lists = {name: [values[i] for i in order] for name, values in zip(LISTS, (indices, hypotheses, references, nll, tokens))}
    if len({len(v) for v in (indices, hypotheses, references, nll, tokens)}) != 1:
        raise EvalFileError(f"eval/{split}: lists differ in length: " + ", ".join(f"{k}={len(v)}" for k, v in lists.items()))
    score = bleu(lists["hypotheses"], lists["references"], tokenize)
    total_tokens = sum(int(t) for t in lists["tokens"])
    record = {
        "split": split,
        "dataset": dataset,
        "checkpoint": checkpoint,
        "sentences": len(order),
        "subset": subset,
        "indices": [int(i) for i in lists["indices"]],
        "hypotheses": [str(h) for h in lists["hypotheses"]],
        "references": [str(r) for r in lists["references"]],
        "nll": [float(x) for x in lists["nll"]],
        "tokens": [int(t) for t in lists["tokens"]],
        "bleu": score.score,
        "bleu_signature": score.signature,
        "ppl": perplexity(sum(lists["nll"]), total_tokens),
    }
    parse_eval(record, f"eval/{split}")  # never write what the reader would refuse
    return record


def write_eval_file(run_dir: str | os.PathLike, split: str, **fields) -> Path:
    """Write `RUN_DIR/eval/{split}.json` atomically from `eval_record`'s keyword arguments; returns its path."""
    return save_eval_record(run_dir, eval_record(split=split, **fields))


def save_eval_record(run_dir: str | os.PathLike, record: dict) -> Path:
    """Write `record` (an `eval_record`) atomically as `RUN_DIR/eval/{its split}.json`; returns its path. For a caller
    that keeps the record it built, rather than reading back the file it just wrote."""
    path = eval_path(run_dir, record["split"])
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        json.dump(record, f, ensure_ascii=False)
    return path


def read_eval_file(path: str | os.PathLike, split: str | None = None) -> EvalFile:
    """Read and validate one evaluation file; `split`, if given, must be the file's."""
    return parse_eval(read_json(path, "evaluation file", EvalFileError), str(path), split)


def parse_eval(data, source: str, split: str | None = None) -> EvalFile:
    """Validate a record (from a file or a W&B summary); every problem is reported at once, naming `source`."""
    if not isinstance(data, dict):
        raise EvalFileError(f"{source}: an evaluation record is a JSON object, not {type(data).__name__}")
    problems = _problems(data, split)
    if problems:
        raise EvalFileError(f"{source}: malformed evaluation record: " + "; ".join(problems))
    return EvalFile(**{k: data.get(k) for k in EvalFile.__dataclass_fields__ if k != "source"}, source=source)


def _problems(d: dict, split: str | None) -> list[str]:
    kinds = {
        "split": str,
        "dataset": str,
        "checkpoint": str,
        "sentences": int,
        "subset": str,
        "bleu": (int, float),
        "bleu_signature": str,
        "ppl": (int, float),
        **dict.fromkeys(LISTS, list),
    }
    if "bleu_stats" in d:  # the statistics stand in for the text: a record may hold both, or neither text list
        kinds["bleu_stats"] = list
        if not any(k in d for k in TEXT):
            kinds = {k: t for k, t in kinds.items() if k not in TEXT}
    out = [f"missing key '{k}'" for k in kinds if k not in d]
    out += [
        f"'{k}' should be {t.__name__ if isinstance(t, type) else 'a number'}, got {type(d[k]).__name__}"
        for k, t in kinds.items()
        if k in d and (not isinstance(d[k], t) or isinstance(d[k], bool))
    ]
    if out:
        return out
    if d["split"] not in SPLITS:
        out.append(f"split='{d['split']}' is not one of {list(SPLITS)}")
    elif split is not None and d["split"] != split:
        out.append(f"split='{d['split']}' but the {split} split was asked for")
    lists = [k for k in (*LISTS, "bleu_stats") if k in kinds]
    lengths = {k: len(d[k]) for k in lists}
    if set(lengths.values()) != {d["sentences"]}:
        out.append(f"sentences={d['sentences']} but the lists have " + ", ".join(f"{k}={n}" for k, n in lengths.items()))

    def number(v) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    checks = {
        "indices": (lambda v: number(v) and isinstance(v, int) and v >= 0, "an integer >= 0"),
        "hypotheses": (lambda v: isinstance(v, str), "a string"),
        "references": (lambda v: isinstance(v, str), "a string"),
        "nll": (lambda v: number(v) and math.isfinite(v) and v >= 0, "a finite number >= 0"),
        "tokens": (lambda v: number(v) and isinstance(v, int) and v >= 1, "an integer >= 1"),
        "bleu_stats": (
            lambda v: (
                isinstance(v, list)
                and len(v) == BLEU_STATS_WIDTH
                and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v)
                and all(v[2 + n] <= v[6 + n] for n in range(4))
            ),
            f"a list of {BLEU_STATS_WIDTH} integers >= 0 with no n-gram order matching more than it counts",
        ),
    }
    for k, (ok, what) in checks.items():
        if k not in lists:
            continue
        bad = next((i for i, v in enumerate(d[k]) if not ok(v)), None)
        if bad is not None:
            out.append(f"{k}[{bad}]={d[k][bad]!r} is not {what}")
    if not out and any(a >= b for a, b in zip(d["indices"], d["indices"][1:])):
        out.append("indices are not strictly ascending")
    return out

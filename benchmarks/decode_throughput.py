"""Decoding throughput of a trained ablate model against Hugging Face MarianMT generate() with the same weights, or
(`--against pre-change`) against ablate's own pre-change beam search, frozen in tests/reference_beam.py (issue 30).

The checkpoint's weights are copied into a MarianMTModel built from config (benchmarks/baselines.py; checked: equal
logits), so both decode the very same function. Both see the same length-sorted batches of the test set
(`ablate.inference.translation.length_batches`), the same beam width, length limit (a * source length + b tokens, EOS included)
and KV caching (ablate's cache; generate()'s default). Greedy and beam search are timed in alternating rounds;
we report sentences/s (medians), ratios paired within a round, and each system's BLEU as a sanity check (the two
length penalties differ: ablate's is GNMT's ((5 + len) / 6)^alpha, generate()'s len^alpha), and how many
hypotheses the two systems share. The pre-change search is the same function as ablate's, so it must agree on (nearly)
every sentence and differ only in speed: its per-step host syncs and Python loops are what issue 30 removed.
Run: ABLATE_DATA_DIR=../shared/data python benchmarks/decode_throughput.py --checkpoint runs/multi30k-small/checkpoints/best.ckpt
     ... --against pre-change --split valid --beams 4 --batch-tokens 1000 4000 16000   (the effect of batching)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from ablate.data.corpus import read_parallel
from ablate.data.datasets import resolve_split
from ablate.evaluation.scores import score
from ablate.evaluation.search import beam_search
from ablate.inference.translation import length_batches
from ablate.model.tokens import BOS_ID, EOS_ID
from ablate.training.checkpoint import model_from_checkpoint

sys.path.insert(0, str(Path(__file__).parent))
from common import environment  # noqa: E402

MARIAN, PRE_CHANGE = "MarianMT generate()", "pre-change beam_search"


def marian_decoder(model, cfg, batches: list):
    """MarianMT with the checkpoint's weights (equal logits checked on a middle batch): src, beam -> hypotheses."""
    from baselines import MarianBaseline, check_same_function

    marian = MarianBaseline(cfg.model, model.vocab_size)
    marian.copy_from(model)
    marian.to(next(model.parameters()).device).eval()
    src = batches[len(batches) // 2][1]
    tgt_in = torch.cat([torch.full((src.size(0), 1), BOS_ID), src[:, :-1].clamp(min=4)], dim=1).to(src.device)  # any real target
    check_same_function(model, marian, "MarianMT", src, tgt_in)
    t = cfg.train

    def decode(src, beam):  # the same number of output tokens: ablate's limit counts the EOS it forces, max_new_tokens does not
        return marian.generate(src, beam, int(t.max_len_a * src.size(1) + t.max_len_b) - 1, t.length_penalty)

    return decode


def pre_change_decoder(model, cfg, batches: list):
    """ablate's beam search as it was before issue 30 (tests/reference_beam.py): src, beam -> hypotheses."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
    from reference_beam import beam_search as reference

    t = cfg.train
    return lambda src, beam: reference(model, src, beam, t.length_penalty, t.max_len_a, t.max_len_b)


def decode_all(decode, batches: list, n: int, beam: int) -> tuple[float, float, list[list[int]]]:
    """Wall and process CPU seconds to decode every batch, and the hypotheses (token ids) in input order. CPU seconds
    are what a shared machine's other work disturbs least (on a GPU they include the host waiting for it)."""
    out: list[list[int]] = [[] for _ in range(n)]
    start, cpu = time.perf_counter(), time.process_time()
    for rows, src in batches:
        for i, h in zip(rows, decode(src, beam)):  # hypotheses reach the host per batch: the clock waits for the device
            out[i] = h
    return time.perf_counter() - start, time.process_time() - cpu, out


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", default="runs/multi30k-small/checkpoints/best.ckpt", help="a checkpoint of ablate train")
    p.add_argument("--against", default="marian", choices=["marian", "pre-change"], help="the system ablate is timed against")
    p.add_argument("--split", default="test", choices=["valid", "test"], help="the config's dataset split to decode")
    p.add_argument("--sentences", type=int, default=0, help="decode only the first N sentences (0 = all)")
    p.add_argument("--beams", type=int, nargs="+", default=[1, 4], help="beam widths to time (1 = greedy)")
    p.add_argument("--rounds", type=int, default=2, help="rounds per beam width; the system that goes first alternates")
    p.add_argument("--batch-tokens", type=int, nargs="+", default=[4000], help="padded source tokens per batch (ablate translate's "
                   "default); several: each is timed, and results are keyed BEAM@TOKENS instead of BEAM")  # fmt: skip
    p.add_argument("--device", default="cpu", help="torch device of both systems")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--json", metavar="OUT", help="also write the results to this JSON file")
    return p.parse_args()


def time_systems(decoders: dict, batches: list, n: int, beam: int, rounds: int, tokenizer, refs: list[str], label: str) -> dict:
    """Alternating rounds of every system on the same batches: seconds per round, ratios, BLEU and shared hypotheses."""
    seconds, cpu_seconds, bleus, hyps = {s: [] for s in decoders}, {s: [] for s in decoders}, {}, {}
    for r in range(rounds):
        for system in list(decoders)[:: 1 if r % 2 == 0 else -1]:
            secs, cpu, hyps[system] = decode_all(decoders[system], batches, n, beam)
            seconds[system].append(secs)
            cpu_seconds[system].append(cpu)
            bleus[system] = score(tokenizer.decode(hyps[system]), refs)
        print(f"{label} round {r + 1}: " + "  ".join(f"{s} {n / v[-1]:.1f} sent/s" for s, v in seconds.items()), flush=True)
    ablate, other = list(decoders)
    ratios = [b / a for a, b in zip(seconds[ablate], seconds[other])]
    same = sum(a == b for a, b in zip(hyps[ablate], hyps[other]))
    cpu_ratio = statistics.median(b / a for a, b in zip(cpu_seconds[ablate], cpu_seconds[other]))
    return {"seconds": seconds, "round_ratios": ratios, "ratio": statistics.median(ratios), "identical_hypotheses": same,
            "cpu_seconds": cpu_seconds, "cpu_ratio": cpu_ratio,
            "bleu": {s: b["bleu"] for s, b in bleus.items()}, "signature": bleus[ablate]["bleu_signature"]}  # fmt: skip


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    model, cfg, tokenizer = model_from_checkpoint(args.checkpoint)
    model.to(device).eval()
    pairs, _ = read_parallel(*resolve_split(cfg.data, args.split))
    pairs = pairs[: args.sentences or None]
    srcs, refs = [s for s, _ in pairs], [r for _, r in pairs]
    encoded = [ids + [EOS_ID] for ids in tokenizer.encode(srcs)]
    batching = {bt: [(rows, src.to(device)) for rows, src in length_batches(encoded, bt)] for bt in args.batch_tokens}
    t = cfg.train
    other = (marian_decoder if args.against == "marian" else pre_change_decoder)(model, cfg, batching[args.batch_tokens[0]])
    decoders = {"ablate": lambda src, beam: beam_search(model, src, beam, t.length_penalty, t.max_len_a, t.max_len_b),
                MARIAN if args.against == "marian" else PRE_CHANGE: other}  # fmt: skip

    results, n = {}, len(srcs)
    table = Table(title=f"decoding {n} sentences of {cfg.data.dataset}:{args.split} on {device} (medians)")
    for col in ("system", "beam", "batch tok", "sent/s", "seconds", "CPU s", "BLEU", "ratio", "CPU ratio", "same hyps"):
        table.add_column(col, justify="left" if col == "system" else "right")
    for bt, batches in batching.items():
        for beam in args.beams:
            key = str(beam) if len(batching) == 1 else f"{beam}@{bt}"
            label = f"beam {beam}, {len(batches)} batches of <= {bt} tokens"
            r = results[key] = {
                "beam": beam,
                "batch_tokens": bt,
                **time_systems(decoders, batches, n, beam, args.rounds, tokenizer, refs, label),
            }
            for system, secs in r["seconds"].items():
                med = statistics.median(secs)
                ratio, cpu_ratio = (f"{r['ratio']:.2f}x", f"{r['cpu_ratio']:.2f}x") if system == "ablate" else ("1.00x", "1.00x")
                table.add_row(system, str(beam), str(bt), f"{n / med:.1f}", f"{med:.1f}", f"{statistics.median(r['cpu_seconds'][system]):.1f}",
                              f"{r['bleu'][system]:.2f}", ratio, cpu_ratio, f"{r['identical_hypotheses']}/{n}")  # fmt: skip
    env = environment(device)
    Console(width=140).print(table)
    print(f"checkpoint {args.checkpoint}: {cfg.model.enc_layers}+{cfg.model.dec_layers} layers, d_model {cfg.model.d_model}, "
          f"vocab {model.vocab_size}; length limit {t.max_len_a} * src + {t.max_len_b}, alpha {t.length_penalty}")  # fmt: skip
    print(
        f"torch {env['torch']}, {env['machine']}, {env['threads']} threads, fp32; BLEU signature {next(iter(results.values()))['signature']}"
    )
    for r in results.values():
        kind = "greedy" if r["beam"] == 1 else f"beam-{r['beam']}"
        tokens = "" if len(batching) == 1 else f" ({r['batch_tokens']} tokens a batch)"
        print(f"{kind} decoding ratio vs {list(decoders)[1]}{tokens}: {r['ratio']:.2f} (per round: "
              f"{', '.join(f'{x:.2f}' for x in r['round_ratios'])}; CPU time {r['cpu_ratio']:.2f}); identical hypotheses {r['identical_hypotheses']}/{n}")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "env": env, "results": results}, indent=2))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()

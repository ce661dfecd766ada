"""Decoding throughput of a trained ablate model against Hugging Face MarianMT generate() with the same weights.

The checkpoint's weights are copied into a MarianMTModel built from config (benchmarks/baselines.py; checked: equal
logits), so both decode the very same function. Both see the same length-sorted batches of the test set
(`ablate.evaluate.length_batches`), the same beam width, length limit (a * source length + b tokens, EOS included)
and KV caching (ablate's cache; generate()'s default). Greedy and beam search are timed in alternating rounds;
we report sentences/s (medians), ratios paired within a round, and each system's BLEU as a sanity check (the two
length penalties differ: ablate's is GNMT's ((5 + len) / 6)^alpha, generate()'s len^alpha).
Run: ABLATE_DATA_DIR=/work/shared/data python benchmarks/decode_throughput.py --checkpoint runs/multi30k-small/checkpoints/best.ckpt
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

from ablate.checkpoint import model_from_checkpoint
from ablate.corpus import read_parallel
from ablate.datasets import resolve_split
from ablate.evaluate import length_batches, score
from ablate.generate import beam_search
from ablate.tokens import BOS_ID, EOS_ID

sys.path.insert(0, str(Path(__file__).parent))
from baselines import MarianBaseline, check_same_function  # noqa: E402
from common import environment  # noqa: E402


def decode_all(system: str, models: dict, batches: list, n: int, beam: int, cfg) -> tuple[float, list[list[int]]]:
    """Seconds to decode every batch, and the hypotheses (token ids) in input order."""
    t = cfg.train
    out: list[list[int]] = [[] for _ in range(n)]
    start = time.perf_counter()
    for rows, src in batches:
        if system == "ablate":
            hyps = beam_search(models[system], src, beam, t.length_penalty, t.max_len_a, t.max_len_b)
        else:  # the same number of output tokens: ablate's limit counts the EOS it forces, max_new_tokens does not
            limit = int(t.max_len_a * src.size(1) + t.max_len_b) - 1
            hyps = models[system].generate(src, beam, limit, t.length_penalty)
        for i, h in zip(rows, hyps):
            out[i] = h
    return time.perf_counter() - start, out


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", default="runs/multi30k-small/checkpoints/best.ckpt", help="a checkpoint of ablate train")
    p.add_argument("--split", default="test", choices=["valid", "test"], help="the config's dataset split to decode")
    p.add_argument("--sentences", type=int, default=0, help="decode only the first N sentences (0 = all)")
    p.add_argument("--beams", type=int, nargs="+", default=[1, 4], help="beam widths to time (1 = greedy)")
    p.add_argument("--rounds", type=int, default=2, help="rounds per beam width; the system that goes first alternates")
    p.add_argument("--batch-tokens", type=int, default=4000, help="padded source tokens per batch (ablate translate's default)")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--json", metavar="OUT", help="also write the results to this JSON file")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    model, cfg, tokenizer = model_from_checkpoint(args.checkpoint)
    pairs, _ = read_parallel(*resolve_split(cfg.data, args.split))
    pairs = pairs[: args.sentences or None]
    srcs, refs = [s for s, _ in pairs], [r for _, r in pairs]
    encoded = [ids + [EOS_ID] for ids in tokenizer.encode(srcs)]
    batches = list(length_batches(encoded, args.batch_tokens))
    marian = MarianBaseline(cfg.model, model.vocab_size)
    marian.copy_from(model)
    marian.eval()
    src = batches[len(batches) // 2][1]
    tgt_in = torch.cat([torch.full((src.size(0), 1), BOS_ID), src[:, :-1].clamp(min=4)], dim=1)  # any real target
    check_same_function(model, marian, "MarianMT", src, tgt_in)
    models = {"ablate": model, "MarianMT generate()": marian}

    results, table = {}, Table(title=f"decoding {len(srcs)} sentences of {cfg.data.dataset}:{args.split} (medians)")
    for col in ("system", "beam", "sent/s", "seconds", "BLEU", "ratio"):
        table.add_column(col, justify="left" if col == "system" else "right")
    for beam in args.beams:
        seconds, bleus = {s: [] for s in models}, {}
        for r in range(args.rounds):
            for system in list(models)[:: 1 if r % 2 == 0 else -1]:
                secs, hyps = decode_all(system, models, batches, len(srcs), beam, cfg)
                seconds[system].append(secs)
                bleus[system] = score(tokenizer.decode(hyps), refs)
            print(f"beam {beam} round {r + 1}: " + "  ".join(f"{s} {len(srcs) / v[-1]:.1f} sent/s" for s, v in seconds.items()), flush=True)
        ratios = [b / a for a, b in zip(seconds["ablate"], seconds["MarianMT generate()"])]
        results[beam] = {"seconds": seconds, "round_ratios": ratios, "ratio": statistics.median(ratios),
                         "bleu": {s: b["bleu"] for s, b in bleus.items()}, "signature": bleus["ablate"]["bleu_signature"]}  # fmt: skip
        for system, secs in seconds.items():
            med = statistics.median(secs)
            ratio = f"{results[beam]['ratio']:.2f}x" if system == "ablate" else "1.00x"
            table.add_row(system, str(beam), f"{len(srcs) / med:.1f}", f"{med:.1f}", f"{bleus[system]['bleu']:.2f}", ratio)
    env = environment(torch.device("cpu"))
    Console(width=100).print(table)
    print(f"checkpoint {args.checkpoint}: {cfg.model.enc_layers}+{cfg.model.dec_layers} layers, d_model {cfg.model.d_model}, "
          f"vocab {model.vocab_size}; length limit {cfg.train.max_len_a} * src + {cfg.train.max_len_b}, alpha {cfg.train.length_penalty}")  # fmt: skip
    print(f"torch {env['torch']}, {env['machine']}, {env['threads']} threads, fp32; BLEU signature {results[args.beams[0]]['signature']}")
    for beam, r in results.items():
        kind = "greedy" if beam == 1 else f"beam-{beam}"
        print(
            f"{kind} decoding ratio vs MarianMT generate(): {r['ratio']:.2f} (per round: {', '.join(f'{x:.2f}' for x in r['round_ratios'])})"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "env": env, "results": results}, indent=2))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()

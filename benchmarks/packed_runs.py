"""N runs training at once in N processes on one device, as `trials_per_gpu: N` packs a sweep's trials: their
aggregate tokens/s, the baseline of issue 37's second GPU gate (members >= 2x `trials_per_gpu: auto`).

Run k (seed k + 1) trains on member k's batches of benchmarks/members.py (the batches K members would train on), as
`ablate train` steps it (members.Run: translation_loss, Adam, the schedule), each in its own spawned process with its
own CUDA context, which is what a packed sweep's workers are: without CUDA MPS their kernels time-share the card.
Every process warms up on all its batches, then the processes train --steps steps at once, --rounds times, each round
started together at a barrier. A round's throughput is every process's real target tokens over the span from the
first start to the last end. --processes auto picks N as `trials_per_gpu: auto` would on this machine (one trial per
CPU core its loop and loader workers take, ablate.sweep.probe), and the result says whether the N processes' peaks
fit the device's memory as that probe requires. Compare the result with members.py's of the same call
(benchmarks/gpu_check_report.py members: `vs packed`).
Run: ABLATE_DATA_DIR=../shared/data python benchmarks/packed_runs.py --processes auto --device cuda --precision bf16
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import queue
import signal
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
import members as bench  # noqa: E402
from common import environment, to_device  # noqa: E402

from ablate.data.batching import collate  # noqa: E402
from ablate.experiment import load_config  # noqa: E402
from ablate.sweep.devices import mps_status  # noqa: E402
from ablate.sweep.probe import HEADROOM, cpu_cores  # noqa: E402


def auto_processes(cfg) -> int:
    """`trials_per_gpu: auto`'s CPU cap on one GPU: a core for each trial's training loop and one for each of its
    data loader workers (ablate.sweep.probe.resolve); memory is checked after, from the processes' own peaks."""
    return max(1, cpu_cores() // (1 + cfg.data.num_workers))


def worker(k: int, cfg, vocab: int, samples: list, args, barrier, results) -> None:
    """One packed trial: run k on its own batches; a line of (start, end) per round, its tokens and peak memory."""
    torch.set_num_threads(args.threads)
    bench.PRECISION = args.precision
    run = bench.Run(cfg, vocab, args.device)
    batches = [to_device(collate(step), args.device) for step in samples]
    bench.timed(run.step, batches, args.device)  # warm-up: every shape once (allocator, kernels)
    spans = []
    for _ in range(args.rounds):
        barrier.wait(timeout=args.timeout)  # a parent or partner gone: BrokenBarrierError ends this process, no orphan
        start = time.perf_counter()
        bench.timed(run.step, batches, args.device)
        spans.append((start, time.perf_counter()))
    cuda = torch.device(args.device).type == "cuda"
    peak = torch.cuda.max_memory_reserved() if cuda else 0
    tokens = sum(len(t) + 1 for step in samples for _, _, t in step)
    results.put({"k": k, "spans": spans, "tokens": tokens, "peak_reserved": peak})


def measure(args) -> dict:
    cfg = load_config([args.config], args.overrides)
    n = auto_processes(cfg) if args.processes == "auto" else int(args.processes)
    configs = bench.member_configs(cfg, n)
    steps, vocab = bench.load_steps(cfg, n, args.steps, args.tolerance)
    free = torch.cuda.mem_get_info()[0] if torch.device(args.device).type == "cuda" else None
    ctx = mp.get_context("spawn")  # a fresh interpreter and CUDA context each, as a sweep's workers
    barrier, results = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=worker, args=(k, configs[k], vocab, [step[k] for step in steps], args, barrier, results)) for k in range(n)]
    reports = []
    try:
        for p in procs:
            p.start()
        deadline = time.monotonic() + args.timeout
        while len(reports) < n:
            try:
                reports.append(results.get(timeout=1))
            except queue.Empty:
                failed = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
                if failed or time.monotonic() > deadline:
                    why = f"exit code {failed[0]}, its traceback above" if failed else f"no report in {args.timeout:g} s"
                    raise SystemExit(f"packed_runs: a process failed ({why})") from None
    finally:  # a failed or interrupted measurement leaves no process behind (the others wait at the barrier)
        for p in procs:
            if p.is_alive() and len(reports) < n:
                p.terminate()
            p.join()
    tokens = sum(r["tokens"] for r in reports)
    rates = []
    for i in range(args.rounds):
        first, last = min(r["spans"][i][0] for r in reports), max(r["spans"][i][1] for r in reports)
        rates.append(tokens / (last - first))
    peak = max(r["peak_reserved"] for r in reports)
    result = {
        "environment": environment(torch.device(args.device)),
        "config": args.config,
        "precision": args.precision,
        "overrides": args.overrides,
        "processes": n,
        "processes_asked": args.processes,
        "steps": args.steps,
        "rounds": args.rounds,
        "mps": str(mps_status()),
        "tokens_per_s": {"packed": statistics.median(rates), "per_process": statistics.median(rates) / n},
        "rounds_tokens_per_s": rates,
    }
    if free is not None:  # what trials_per_gpu would check: N peaks inside the free memory less the probe's headroom
        result["peak_reserved_mib"] = peak / 2**20
        result["fits"] = n * peak <= free * (1 - HEADROOM)
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="experiments/multi30k-table3-gpu.yaml")
    p.add_argument("--processes", default="auto", help="N runs at once, or auto (what trials_per_gpu: auto picks here)")
    p.add_argument("--steps", type=int, default=20, help="training steps each process times a round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="torch threads in each process")
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    p.add_argument("--tolerance", type=int, default=3, help="the member sampler's, as members.py (training uses 3)")
    p.add_argument("--timeout", type=float, default=600, help="seconds to wait for the processes' reports")
    p.add_argument("--json")
    p.add_argument("overrides", nargs="*", help="config overrides, KEY=VALUE")
    args = p.parse_args()
    if args.processes != "auto" and (not args.processes.isdigit() or int(args.processes) < 1):
        p.error(f"--processes: expected a whole number >= 1 or auto, got {args.processes!r}")
    torch.set_num_threads(args.threads)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # measure's finally ends the processes
    result = measure(args)
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()

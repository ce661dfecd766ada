"""What the benchmark scripts share: the machine's description, batches on a device, paired-round timing, peak
memory of a process and a timed `ablate train` command."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

from ablate.run.provenance import git_state


def machine(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    with open("/proc/cpuinfo") as f:
        return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), platform.machine())


def environment(device: torch.device) -> dict:
    date = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return {"torch": torch.__version__, "device": str(device), "machine": machine(device),
            "threads": torch.get_num_threads(), "date": date, "commit": git_state()[0]}  # fmt: skip


def to_device(batch: dict, device: torch.device, non_blocking: bool = False) -> dict:
    """The batch with its tensors on `device` (counts and other plain values as they are)."""
    return {k: v.to(device, non_blocking=non_blocking) if torch.is_tensor(v) else v for k, v in batch.items()}


def one_per_shape(batches: list[dict]) -> list[dict]:
    """The first batch of each distinct (B, S, T): a warm-up over these meets every shape the timed rounds use, so
    kernels autotuned or compiled per shape (CUDA libraries, torch.compile) are ready before the first round."""
    seen: dict[tuple, dict] = {}
    for b in batches:
        seen.setdefault((*b["src"].shape, b["tgt_in"].shape[1]), b)
    return list(seen.values())


def children_cpu_seconds() -> float:
    """CPU seconds (user + system) used so far by this process's living descendants, e.g. W&B's service: time a
    step costs the machine outside this process. Linux (/proc)."""
    tick, parents = os.sysconf("SC_CLK_TCK"), {}
    for d in Path("/proc").iterdir():
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split() if d.name.isdigit() else None
        except OSError:  # the process ended meanwhile
            continue
        if fields:
            parents[int(d.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    found, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {pid for pid, (ppid, _) in parents.items() if ppid in frontier} - found
        found |= frontier
    return sum(parents[pid][1] for pid in found)


def reset_peak_rss() -> int:
    """Reset the kernel's high-water mark of this process to its current RSS; return that RSS in bytes.

    Writing "5" to /proc/self/clear_refs resets VmHWM (Linux >= 4.0), so `peak_rss() - reset_peak_rss()` is the
    memory a piece of work added at its peak. Run each model in a fresh process: freed heap that a process keeps
    would otherwise hide the next model's growth.
    """
    Path("/proc/self/clear_refs").write_text("5")
    return _status_kib("VmRSS") * 1024


def peak_rss() -> int:
    return _status_kib("VmHWM") * 1024


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}; peak memory needs Linux")


def paired_ratio(seconds: dict[str, list[float]], ours: str, baselines: list[str]) -> tuple[float, list[float]]:
    """Median over rounds of (fastest baseline's time / our time) in the same round, and the per-round values."""
    rounds = len(seconds[ours])
    ratios = [min(seconds[b][r] for b in baselines) / seconds[ours][r] for r in range(rounds)]
    return statistics.median(ratios), ratios


def timed_train(*args: str) -> float:
    """Seconds an `ablate train ARGS` command takes, process start to exit; SystemExit with its stderr's end if it fails."""
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ablate.cli", "train", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"ablate train {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return time.perf_counter() - began

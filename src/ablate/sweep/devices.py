"""Which GPUs a sweep's workers run on: the GPUs this process may use (an inherited CUDA_VISIBLE_DEVICES honoured,
indices or UUIDs), `trials_per_gpu` workers pinned to each (or a block of `gpus_per_trial` GPUs to each worker), and
whether a CUDA MPS daemon lets the trials packed on one GPU run side by side instead of time-sharing it.

The sweep's own process only counts devices: it never creates a CUDA context, which would hold GPU memory the
packed trials need for as long as the sweep runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ablate.config import ConfigError

AUTO = "auto"
MPS_PIPE_DIR = Path("/tmp/nvidia-mps")  # CUDA's default when CUDA_MPS_PIPE_DIRECTORY is unset
MPS_PROGRAM = "nvidia-cuda-mps"  # nvidia-cuda-mps-control (the daemon) and -server; /proc/PID/comm keeps just these 15 characters
PROC = Path("/proc")


def gpu_count() -> int:
    """CUDA devices torch can use here; 0 without CUDA (or a CPU-only torch, or none installed). A torch that fails to
    import is a broken installation, said as one (an OSError: one line, naming torch): taken for "no GPU", the sweep
    planned every trial on the CPU and each then failed importing it."""
    try:
        import torch
    except (ImportError, OSError) as e:  # a CUDA library missing, a dependency missing or of the wrong version
        if isinstance(e, ModuleNotFoundError) and e.name == "torch":  # not installed: nothing here can use a GPU
            return 0
        raise OSError(f"torch fails to import, so the GPUs here cannot be counted ({type(e).__name__}: {e}); reinstall torch") from e
    return torch.cuda.device_count()


def visible_gpus() -> list[str]:
    """The usable GPUs as CUDA_VISIBLE_DEVICES names them: the inherited list (a SLURM allocation's "3,5", or UUIDs)
    cut to the devices CUDA found (it stops at the first invalid entry), else their indices; [] without CUDA."""
    count = gpu_count()
    inherited = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return (inherited or [str(i) for i in range(count)])[:count]


def parse_trials_per_gpu(value: Any, where: str) -> int | str:
    """`trials_per_gpu` (file key or flag): an integer >= 1 or "auto"; `where` names the file and key, or the flag."""
    if isinstance(value, str) and value.strip().lower() == AUTO:
        return AUTO
    if isinstance(value, str) and value.strip().isdigit():  # the flag's text, or a quoted number in YAML
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}={value!r} must be an integer >= 1 or '{AUTO}'")
    return value


def combination_problem(trials_per_gpu: int | str, gpus_per_trial: int, given_as: str = "trials_per_gpu") -> str | None:
    """Several trials per GPU and several GPUs per trial do not mix: a DDP trial's ranks need their GPUs to themselves.
    `given_as` names where trials_per_gpu came from (the file's key, or the flag)."""
    if trials_per_gpu != 1 and gpus_per_trial > 1:
        return (
            f"{given_as} {trials_per_gpu} and gpus_per_trial {gpus_per_trial} cannot be combined: a trial on several GPUs "
            "has them to itself; set one of them to 1"
        )
    return None


def assign(visible: list[str], workers: int, trials_per_gpu: int, gpus_per_trial: int, workers_from: str) -> list[str]:
    """CUDA_VISIBLE_DEVICES of each worker. With one GPU per trial, worker i runs on GPU i mod G (interleaved), so
    workers that do not fill every slot spread evenly (3 workers on 2 GPUs: 0, 1, 0); with several GPUs per trial,
    worker i gets the i-th block of gpus_per_trial of them. ValueError, with both numbers, when they do not fit.

    Args:
        workers_from: where the worker count came from ("--workers"), for the error.
    """
    gpus = len(visible)
    if gpus_per_trial > 1:
        if workers * gpus_per_trial > gpus:
            raise ValueError(
                f"{workers} worker(s) x gpus_per_trial {gpus_per_trial} need {workers * gpus_per_trial} GPUs, but {gpus} are visible"
            )
        return [",".join(visible[i * gpus_per_trial : (i + 1) * gpus_per_trial]) for i in range(workers)]
    slots = gpus * trials_per_gpu
    if workers > slots:
        raise ValueError(
            f"{workers_from} {workers} needs {workers} trial slots, but {gpus} GPU(s) x trials_per_gpu {trials_per_gpu} give {slots}; "
            "lower it or raise trials_per_gpu"
        )
    return [visible[i % gpus] for i in range(workers)]


@dataclass
class Mps:
    on: bool
    detail: str

    def __str__(self) -> str:
        return f"CUDA MPS: {'on' if self.on else 'off'} ({self.detail})"


def mps_status() -> Mps:
    """Whether this process's CUDA clients would use an MPS daemon: its control pipe in CUDA_MPS_PIPE_DIRECTORY (else
    /tmp/nvidia-mps), where the CUDA driver looks for it. A daemon seen in /proc but listening elsewhere is not used.
    ablate never starts one."""
    pipe = Path(os.environ.get("CUDA_MPS_PIPE_DIRECTORY") or MPS_PIPE_DIR)
    pids = mps_processes()
    if (pipe / "control").exists():
        # The daemon may run outside this PID namespace (a container given the host's pipe directory).
        return Mps(True, f"daemon found at {pipe}" + (f", pid {pids[0]}" if pids else "; its process is not visible from here"))
    if pids:
        return Mps(
            False, f"a daemon runs as pid {pids[0]} but {pipe} holds no control pipe; set CUDA_MPS_PIPE_DIRECTORY to its pipe directory"
        )
    return Mps(False, "no daemon; trials time-share each GPU")


def mps_processes() -> list[int]:
    """Pids of MPS control daemons and servers in PROC (its process listing), by their program's name."""
    found = []
    try:
        entries = list(PROC.iterdir())
    except OSError:
        return []
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            argv0 = (entry / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
            comm = (entry / "comm").read_text().strip() if not argv0 else ""
        except OSError:  # the process ended meanwhile, or is not ours to read
            continue
        if (Path(argv0).name if argv0 else comm).startswith(MPS_PROGRAM):
            found.append(int(entry.name))
    return sorted(found)


@dataclass
class Layout:
    """Where a sweep's trials run: `gpus` (empty on CPU), each holding `trials_per_gpu` trials, or one trial holding
    `gpus_per_trial` of them."""

    gpus: list[str]
    trials_per_gpu: int = 1
    gpus_per_trial: int = 1

    @property
    def slots(self) -> int:
        """Trials that run at once when every GPU is used."""
        return len(self.gpus) * self.trials_per_gpu // self.gpus_per_trial

    def describe(self, mps: Mps | None) -> str:
        """The part of the sweep's first line that says how trials share the GPUs ("" on CPU, which it leaves unchanged)."""
        if not self.gpus:
            return ""
        n = len(self.gpus)
        share = (
            f"{n} GPU{'s' * (n > 1)}, {self.gpus_per_trial} per trial"
            if self.gpus_per_trial > 1
            else f"{n} GPU{'s' * (n > 1)} x {self.trials_per_gpu} trial{'s' * (self.trials_per_gpu > 1)} each"
        )
        return f", {share}" + (f", {mps}" if mps is not None else "")

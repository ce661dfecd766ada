"""Whether a model can train in this machine's memory, known before it is built: its parameters are counted on
torch's meta device (shapes only, nothing allocated), and a model whose weights, gradients and Adam's two moments
alone (16 bytes a parameter in fp32, activations not counted) exceed the memory available is refused, naming its
size. Built anyway, `d_model=32768` grew to 22.5 GB until the kernel killed it without a word.

Available memory is the least of what the kernel, the process's address-space limit (ulimit -v) and its cgroup
allow on the host; on CUDA, each device's free memory too (the model is built on the host first). Where none of
them can be read, nothing is refused.
"""

from __future__ import annotations

import resource
from pathlib import Path

import torch

from ablate.config import ExperimentConfig

TRAINING_BYTES = 16  # a parameter's fp32 weight, gradient and two Adam moments
BUILD_BYTES = 4  # its fp32 weight, where the model is built (the host) before it moves to a GPU


def parameter_count(cfg: ExperimentConfig) -> dict[str, int]:
    """ablate.model.count_parameters of the model `cfg` builds (vocabulary: data.vocab_size), without allocating it."""
    from ablate.model import build_transformer, count_parameters

    with torch.device("meta"):
        return count_parameters(build_transformer(cfg.model, cfg.data.vocab_size))


def check_fits(cfg: ExperimentConfig, members: int = 1) -> None:
    """ValueError naming the model's size when it cannot train here (memory_problem); `members` such models trained
    as one member model (ablate.run.members) hold that many times its weights, gradients and moments."""
    problem = memory_problem(cfg, parameter_count(cfg)["total"], members)
    if problem:
        raise ValueError(problem)


def memory_problem(cfg: ExperimentConfig, params: int, members: int = 1) -> str | None:
    """Why `members` models of `params` parameters each cannot train here under `cfg`, or None."""
    one, params = params, params * members
    gpu = cfg.train.accelerator in ("gpu", "cuda") or (cfg.train.accelerator == "auto" and torch.cuda.is_available())
    places = [("the memory this process can still take", host_available(), (BUILD_BYTES if gpu else TRAINING_BYTES) * params)]
    if gpu and torch.cuda.is_available():
        places += [
            (f"GPU {i}'s free memory", torch.cuda.mem_get_info(i)[0], TRAINING_BYTES * params) for i in range(torch.cuda.device_count())
        ]
    for where, available, need in places:
        if available is not None and need > available:
            what = "training needs" if need == TRAINING_BYTES * params else "building it needs"
            group = f"; {members} members (members.size) hold {params:,}" if members > 1 else ""
            return (
                f"the model has {one:,} parameters ({cfg.model.sizes}, data.vocab_size={cfg.data.vocab_size}){group}: {what} at least "
                f"{_gb(need)} ({need // params} bytes a parameter, before activations), but {where} is {_gb(available)}; "
                + ("make the model smaller or train fewer members" if members > 1 else "make the model smaller")
            )
    return None


def host_available() -> int | None:
    """Bytes this process can still allocate on the host: MemAvailable, the address-space limit less what is mapped,
    the cgroup's limit less its use; the least of those known."""
    known = [n for n in (_meminfo(), _address_space(), _cgroup()) if n is not None]
    return min(known) if known else None


def _meminfo() -> int | None:
    return _field(Path("/proc/meminfo"), "MemAvailable:")


def _address_space() -> int | None:
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    used = _field(Path("/proc/self/status"), "VmSize:")
    return None if limit == resource.RLIM_INFINITY or used is None else max(limit - used, 0)


def _cgroup() -> int | None:
    """The process's cgroup memory limit less its use (v2, or v1's memory controller, seen from inside or outside a
    container's cgroup namespace)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, group = line.split(":", 2)
        group = group.strip().lstrip("/")
        if controllers == "":
            found = _limit_less_use(Path("/sys/fs/cgroup"), group, "memory.max", "memory.current")
        elif "memory" in controllers.split(","):
            found = _limit_less_use(Path("/sys/fs/cgroup/memory"), group, "memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        if found is not None:
            return found
    return None


def _limit_less_use(root: Path, group: str, limit_file: str, use_file: str) -> int | None:
    for folder in (root / group, root):  # the group's path as the host names it, or the namespace's root
        try:
            limit, used = (folder / limit_file).read_text().strip(), int((folder / use_file).read_text())
        except (OSError, ValueError):
            continue
        return max(int(limit) - used, 0) if limit.isdigit() and int(limit) < 2**62 else None  # v1's "no limit" is ~2**63
    return None


def _field(path: Path, name: str) -> int | None:
    """A `NAME: N kB` line of a /proc file, in bytes."""
    try:
        for line in path.read_text().splitlines():
            if line.startswith(name):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _gb(n: int) -> str:
    return f"{n / 1e9:,.1f} GB"

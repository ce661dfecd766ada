"""How many trials share one GPU (`trials_per_gpu: auto`), and whether an explicit number fits.

The sweep's largest row by parameter count trains PROBE_STEPS steps, one decoded validation batch included, in a
child process on the sweep's first GPU, with the trial's own module, data and precision. The child reports its peak
reserved memory (torch.cuda.max_memory_reserved: what torch's caching allocator holds is what no other process on
the card can have) and each visible GPU's free memory. N trials fit when N times that peak fits in the fullest GPU's
free memory less HEADROOM. The child's run directory is a temporary one, removed after.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ablate.config import ConfigError, ExperimentConfig, to_yaml
from ablate.sweep.devices import AUTO
from ablate.sweep.spec import Sweep

PROBE_STEPS = 20  # the optimizer's state exists after one step; a few more see a spread of batch shapes
# Of the free memory, kept back: each trial's CUDA context (hundreds of MB, outside torch's reserved memory),
# allocator fragmentation, and batches longer than the probe's.
HEADROOM = 0.10
MAX_CORNERS = 256  # search spaces: the configs compared for size (every choice, each bound, in every combination)
MARK = "ABLATE_PROBE "  # the child's report line on stdout
GIB = 2**30


@dataclass
class Probe:
    what: str  # "row 'big'", or a search config
    peak: int  # bytes reserved at the probe's peak
    free: int  # bytes free on the fullest visible GPU when the probe started
    gpu: str  # that GPU's name
    cores_per_trial: int  # the training loop's, plus the row's data loader workers

    @property
    def usable(self) -> int:
        return int(self.free * (1 - HEADROOM))

    @property
    def fits(self) -> int:
        return self.usable // max(self.peak, 1)

    def numbers(self) -> str:
        return f"largest {self.what} peaks at {gib(self.peak)} reserved; {gib(self.free)} free on {self.gpu} less {HEADROOM:.0%} headroom"


def gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


def cpu_cores() -> int:
    """The cores this process may run on (a SLURM or cgroup CPU set counts, not the whole machine)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def resolve_members(sweep: Sweep, per_gpu: int | str, gpus: list[str], say: Callable[[str], None]) -> tuple[int, Probe]:
    """`members: auto`: as many members as fit in a GPU's share of memory beside the other trials on it (an explicit
    trials_per_gpu; one when that is auto too, which then packs trials of K members), never more than the largest
    row's seeds (or a search's budget), at least 1. A member model's memory grows with K as K runs' would (weights,
    Adam state and activations each gain a K axis), so K members need about K times the probe's one-run peak."""
    probe = measure(sweep, gpus, say)
    share = int(per_gpu) if per_gpu != AUTO else 1
    fit = probe.usable // max(share * probe.peak, 1)
    rows = [len(sweep.row_seeds.get(r) or sweep.seeds or [None]) for r in sweep.variants] or [sweep.n_trials or fit]
    k = max(1, min(fit, max(rows)))
    why = f"; {fit} fit, capped at {max(rows)}, the most trials a row has" if k < fit else ("; not even one fits, so 1" if fit < 1 else "")
    say(f"members auto: {k} per model, {share} model(s) per GPU ({probe.numbers()}{why})")
    return k, probe


def resolve(
    sweep: Sweep, value: int | str, where: str, gpus: list[str], say: Callable[[str], None], members: int = 1, probe: Probe | None = None
) -> int:
    """The number of trials per GPU: 1 as given; "auto" from the probe, at most one trial per CPU core the GPU's share
    of them allows (each trial's Python training loop keeps a core busy feeding its GPU; more trials than cores and they
    wait for the CPU, not the GPU); an explicit N > 1 checked against the probe, ValueError with both numbers when it
    does not fit. `where` names the file and key, or the flag."""
    if value == 1:
        return 1
    if value != AUTO and _corners(sweep) > MAX_CORNERS:
        say(f"{where} {value}: not checked against GPU memory (the search space has {_corners(sweep)} corners to compare)")
        return int(value)
    probe = probe or measure(sweep, gpus, say)
    if members > 1:  # a trial of K members holds about K runs' memory (resolve_members)
        probe = dataclasses.replace(probe, what=f"{probe.what} x {members} members", peak=probe.peak * members)
    if value == AUTO:
        cap = max(1, cpu_cores() // (len(gpus) * probe.cores_per_trial))
        n = max(1, min(probe.fits, cap))
        why = ""
        if probe.fits < 1:
            why = "; not even one fits inside the headroom, so 1"
        elif cap < probe.fits:
            why = f"; {probe.fits} fit, capped at {cap}: {cpu_cores()} CPU cores for {len(gpus)} GPU(s), {probe.cores_per_trial} per trial"
        say(f"trials_per_gpu auto: {n} ({probe.numbers()}{why})")
        return n
    need = value * probe.peak
    if need > probe.usable:
        raise ValueError(
            f"{where} {value} does not fit: {value} x {gib(probe.peak)} = {gib(need)}, but {gib(probe.usable)} are usable "
            f"({probe.numbers()}); at most {max(probe.fits, 1)} fit, or use {AUTO}"
        )
    say(f"trials_per_gpu {value}: fits, {value} x {gib(probe.peak)} = {gib(need)} of {gib(probe.usable)} usable ({probe.numbers()})")
    return int(value)


def measure(sweep: Sweep, gpus: list[str], say: Callable[[str], None]) -> Probe:
    what, overrides, seed, cfg, params = largest(sweep)
    say(f"measuring GPU memory: {what} ({params / 1e6:.1f}M parameters, the sweep's largest) trains {PROBE_STEPS} steps on GPU {gpus[0]}")
    report = run_probe(sweep, overrides, seed, gpus)
    fullest = min(report["gpus"], key=lambda g: g["free"])
    return Probe(what, int(report["peak_reserved"]), int(fullest["free"]), str(fullest["name"]), 1 + cfg.data.num_workers)


def largest(sweep: Sweep) -> tuple[str, dict, int | None, ExperimentConfig, int]:
    """(description, overrides, seed, config, parameters) of the sweep's largest row (or search config) by parameter
    count, then by data.max_tokens; models are built on the meta device (shapes only, no memory)."""
    import torch

    from ablate.model import build_transformer, count_parameters

    best = None
    for what, (row, overrides) in _candidates(sweep).items():
        try:
            cfg = sweep.row_config(overrides)
        except ConfigError:  # a corner of a search space that validation rejects (e.g. heads not dividing d_model)
            continue
        with torch.device("meta"):
            params = count_parameters(build_transformer(cfg.model, cfg.data.vocab_size))["total"]
        if best is None or (params, cfg.data.max_tokens) > best[0]:
            best = ((params, cfg.data.max_tokens), what, row, overrides, cfg, params)
    if best is None:
        raise ValueError(f"{sweep.path}: no corner of the search space is a valid config, so none can be measured; set trials_per_gpu: 1")
    _, what, row, overrides, cfg, params = best
    seeds = (sweep.row_seeds.get(row) or sweep.seeds) if row is not None else []
    return what, overrides, (seeds[0] if seeds else None), cfg, params


def _corners(sweep: Sweep) -> int:
    return 0 if sweep.variants else math.prod(len(_values(spec)) for spec in sweep.search.values())


def _values(spec: dict) -> list:
    return list(spec["choices"]) if spec["type"] == "categorical" else [spec["low"], spec["high"]]


def _candidates(sweep: Sweep) -> dict[str, tuple[str | None, dict]]:
    """Description -> (row, overrides): each row, or each corner of the search space (every choice, each bound; no row)."""
    if sweep.variants:
        return {f"row '{row}'": (str(row), dict(overrides)) for row, overrides in sweep.variants.items()}
    if _corners(sweep) > MAX_CORNERS:
        raise ValueError(
            f"{sweep.path}: trials_per_gpu {AUTO} measures the search space's largest config, found among its corners, but it has "
            f"{_corners(sweep)} (at most {MAX_CORNERS}); give trials_per_gpu a number"
        )
    keys = list(sweep.search)
    out = {}
    for combo in itertools.product(*(_values(sweep.search[k]) for k in keys)):
        overrides = {k: int(v) if sweep.search[k]["type"] == "int" else v for k, v in zip(keys, combo)}
        out["config " + ", ".join(f"{k}={v}" for k, v in overrides.items())] = (None, overrides)
    return out


def run_probe(sweep: Sweep, overrides: dict, seed: int | None, gpus: list[str]) -> dict:
    """Train the config PROBE_STEPS steps in a child process that sees `gpus` (and trains on the first); its report."""
    with tempfile.TemporaryDirectory(prefix="ablate-probe-") as tmp:
        extra = {"logging.wandb": False, "logging.progress": False, "train.val_max_sentences": 0}  # the whole batch decoded
        config = Path(tmp) / "probe.yaml"
        config.write_text(to_yaml(sweep.config_for(overrides, seed, Path(tmp) / "run", extra)))
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(gpus), "WANDB_MODE": "disabled"}
        cmd = [sys.executable, "-m", "ablate.sweep.probe", str(config), str(PROBE_STEPS)]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    reports = [line[len(MARK) :] for line in proc.stdout.splitlines() if line.startswith(MARK)]
    if proc.returncode != 0 or not reports:
        lines = [line for line in (proc.stderr + proc.stdout).splitlines() if line.strip()]
        errors = [line for line in lines if re.match(r"^[\w.]*(Error|Exception)\b", line)]
        last = (errors or lines or ["no output"])[-1][:500]
        raise ValueError(
            f"the GPU memory probe (a {PROBE_STEPS}-step run on GPU {gpus[0]}) failed with exit code {proc.returncode}: {last}"
        )
    return json.loads(reports[-1])


def measure_here(config: str, steps: int) -> dict:
    """The child's side: each visible GPU's free memory, then `steps` training steps of the config on the first GPU,
    the last one followed by a validation batch decoded as a trial's are; then the peak reserved memory."""
    import lightning as L
    import torch

    from ablate.data.module import TranslationDataModule
    from ablate.experiment import load_config
    from ablate.run.trainer import prepare_process
    from ablate.training.module import TranslationModule
    from ablate.training.precision import Precision

    gpus = []
    for i in range(torch.cuda.device_count()):
        free, total = torch.cuda.mem_get_info(i)
        gpus.append({"name": torch.cuda.get_device_name(i), "free": free, "total": total})
    cfg = load_config([config])
    t = cfg.train
    prepare_process(cfg)  # what the trial's process sets first: threads, matmul precision, seeds, freed memory kept
    dm = TranslationDataModule(cfg)
    dm.prepare_data()
    dm.setup("fit")
    module = TranslationModule.from_config(cfg, dm.tokenizer.vocab_size)
    trainer = L.Trainer(
        max_steps=steps,
        max_epochs=-1,
        accelerator=t.accelerator,
        devices=1,
        precision=Precision.of(t).name,
        accumulate_grad_batches=t.accumulate,
        gradient_clip_val=t.clip_grad or None,
        val_check_interval=steps * t.accumulate,
        check_val_every_n_epoch=None,
        limit_val_batches=1,
        num_sanity_val_steps=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        use_distributed_sampler=False,  # as in a trial: the token-bucket sampler shards by itself
        deterministic=t.deterministic,
        default_root_dir=cfg.out_dir,
    )
    trainer.fit(module, datamodule=dm)
    return {"peak_reserved": torch.cuda.max_memory_reserved(0), "steps": trainer.global_step, "gpus": gpus}


if __name__ == "__main__":
    # python -m ablate.sweep.probe CONFIG.yaml STEPS, run by run_probe with CUDA_VISIBLE_DEVICES set to the sweep's GPUs.
    print(MARK + json.dumps(measure_here(sys.argv[1], int(sys.argv[2]))), flush=True)

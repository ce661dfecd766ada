"""Faults for the fault tests, injected the way a researcher adds a callback (a plugin registering in CALLBACKS), so
no config key or environment variable users see exists for them: a loss that turns NaN from a step on, and a real
signal the training process sends itself at a step.

`fault_plugin(folder, ...)` writes the plugin file a test names in its config's `plugins:`. Each fault is bound to
the runs it is meant for (`when`: flattened config keys and values, e.g. the out_dir or a sweep row), so a test
process that imports the plugin while loading a config (a sweep validating its rows) trains nothing differently.
A signal fires once per marker file: a run resumed with the same config does not preempt itself again."""

from __future__ import annotations

import hashlib
import os
import signal
from pathlib import Path

import lightning as L

from ablate.config import flatten, to_dict
from ablate.registry import register
from ablate.run.callbacks import CALLBACKS

TESTS = Path(__file__).resolve().parent


def fault_plugin(folder: Path, *, nan_from: int | None = None, signal_at: str | None = None, when: dict | None = None) -> Path:
    """A plugin file under `folder` injecting the faults asked for into the runs matching `when` (all when None):
    `nan_from` (the training loss is NaN from that global step on), `signal_at` ("STEP[@val]:SIGNAME[:RANK]": the
    process of global rank RANK, default 0, sends itself SIGNAME as optimizer step STEP starts, 0-based, or with
    @val as the validation after STEP steps does). Returns its path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256(repr((str(folder), nan_from, signal_at, sorted((when or {}).items()))).encode()).hexdigest()[:12]
    path = folder / f"faults_{key}.py"
    lines = ["import sys", f"sys.path.insert(0, {str(TESTS)!r})", "import fault_injection"]
    if nan_from is not None:
        lines.append(f"fault_injection.nan_from({nan_from}, when={when!r}, name={key!r})")
    if signal_at is not None:
        lines.append(f"fault_injection.signal_at({signal_at!r}, when={when!r}, once={str(folder / f'fired_{key}')!r}, name={key!r})")
    path.write_text("\n".join(lines) + "\n")
    return path


def _matches(module: L.LightningModule, when: dict | None) -> bool:
    config = flatten(to_dict(module.cfg))
    return all(config.get(k) == v for k, v in (when or {}).items())


def nan_from(step: int, when: dict | None = None, name: str = "") -> None:
    @register(CALLBACKS, f"test-nan-from-{name}")
    class NanLoss(L.Callback):
        """The summed loss of every training batch from global step `step` on times NaN, where the run computes it
        (before its NaN guard reads it): the guard, the save guard and the error are the run's own."""

        def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
            if not _matches(pl_module, when):
                return
            compute = pl_module._step

            def poisoned(batch: dict):
                loss, nll, ntok = compute(batch)
                if pl_module.training and pl_module.global_step >= step:
                    loss = loss * float("nan")
                return loss, nll, ntok

            pl_module._step = poisoned


def signal_at(spec: str, when: dict | None = None, once: str | None = None, name: str = "") -> None:
    at, signame, *rank = spec.split(":")
    at_step, _, phase = at.partition("@")
    signum = signal.Signals[f"SIG{signame.removeprefix('SIG')}"]

    @register(CALLBACKS, f"test-signal-at-{name}")
    class SelfSignal(L.Callback):
        def _fire(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
            if trainer.global_step != int(at_step) or trainer.global_rank != (int(rank[0]) if rank else 0):
                return
            if not _matches(pl_module, when) or (once and os.path.exists(once)):
                return
            if once:
                Path(once).touch()
            os.kill(os.getpid(), signum)

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
            if phase != "val":
                self._fire(trainer, pl_module)

        def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0) -> None:
            if phase == "val" and not trainer.sanity_checking:
                self._fire(trainer, pl_module)

"""The training step never waits on the host: no device value is read between log steps (issue 30, item 2).

A step that reads a device value (`.item()`, `int(t)`, a boolean-mask index whose size depends on the data) waits
for the device to finish everything queued before it, so a GPU idles while the host prepares the next step. Both
tests run the Trainer that `ablate train` builds (`ablate.run.train.train`, every callback, CSV and W&B-offline
logging, the progress bar) and watch 20 optimizer steps that hold no log, validation or checkpoint step:

- on CPU, a TorchFunctionMode records every call that would read a device value on a GPU;
- on a GPU (`-m gpu`), torch's own detector, `torch.cuda.set_sync_debug_mode`, records every synchronisation.

A read that Lightning or PyTorch cannot avoid goes on ALLOWED, with the reason; anything else fails the test.
"""

from __future__ import annotations

import traceback
import warnings

import lightning as L
import pytest
import torch
from helpers import tiny_experiment, write_corpus
from torch.overrides import TorchFunctionMode

from ablate.run.train import train

FIRST, STEPS = 5, 20  # the watched window: optimizer steps 5..24, between the sanity check and the first log step
LOG_EVERY = 50  # Lightning logs after step 49: outside the window

# Calls that make the host wait for a device tensor's value (on CPU they are free, so they are found by name).
READS = {
    torch.Tensor.item,
    torch.Tensor.tolist,
    torch.Tensor.__bool__,
    torch.Tensor.__int__,
    torch.Tensor.__float__,
    torch.Tensor.__index__,
    torch.Tensor.numpy,
    torch.Tensor.nonzero,
    torch.nonzero,
    torch.Tensor.masked_select,
    torch.masked_select,
    torch.Tensor.unique,
    torch.unique,
}
# Host-side work that only looks like a read on CPU: the DataLoader collates batches from host memory.
HOST_SIDE = ("torch/utils/data/",)
# (file fragment, function, why it is allowed). Nothing of ablate's own is here.
ALLOWED: list[tuple[str, str, str]] = [
    # An unfused Adam keeps its step counter in a host tensor (on a GPU too), so reading it waits for nothing; on
    # CUDA ablate's Adam is fused and does not read it.
    ("torch/optim/", "_get_value", "Adam's step counter is a host tensor"),
]


def _where(stack: list[traceback.FrameSummary]) -> str:
    inner = stack[-6:]
    return " <- ".join(f"{f.filename.split('site-packages/')[-1].split('/src/')[-1]}:{f.lineno} {f.name}" for f in reversed(inner))


def _unexplained(events: list[list[traceback.FrameSummary]]) -> list[str]:
    found = []
    for stack in events:
        if any(part in f.filename for f in stack for part in HOST_SIDE):
            continue
        if any(part in f.filename and f.name == fn for f in stack for part, fn, _ in ALLOWED):
            continue
        found.append(_where(stack))
    return found


class _ReadRecorder(TorchFunctionMode):
    def __init__(self, events: list):
        super().__init__()
        self.events = events

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        boolean_index = func is torch.Tensor.__getitem__ and _has_bool_tensor(args[1] if len(args) > 1 else None)
        if func in READS or boolean_index:
            self.events.append(traceback.extract_stack()[:-1])
        return func(*args, **kwargs)


def _has_bool_tensor(index) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in items)


class Window(L.Callback):
    """Opens `watch` (a context manager factory) at the start of step FIRST and closes it at the start of step
    FIRST + STEPS: everything in between (the steps, every callback's hooks, logging, the next batch's transfer)."""

    def __init__(self, watch):
        self.watch, self.active, self.steps_seen = watch, None, []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        step = trainer.global_step
        if step == FIRST:
            self.active = self.watch()
            self.active.__enter__()
        elif step == FIRST + STEPS and self.active is not None:
            self.active.__exit__(None, None, None)
            self.active = None
        if self.active is not None:
            self.steps_seen.append(step)

    def on_validation_start(self, trainer, pl_module) -> None:
        assert self.active is None or trainer.sanity_checking, f"validation at step {trainer.global_step}, inside the window"

    def on_save_checkpoint(self, trainer, pl_module, checkpoint) -> None:
        assert self.active is None, f"a checkpoint at step {trainer.global_step}, inside the window"


def _run(tmp_path, watch, **train_overrides) -> Window:
    corpus = write_corpus(tmp_path / "big-corpus", n_train=3000)  # ~100 batches: the window stays in one epoch
    cfg = tiny_experiment(
        tmp_path,
        data={"train_prefix": str(corpus / "train"), "valid_prefix": str(corpus / "valid"), "max_tokens": 256},
        train={"max_steps": FIRST + STEPS + 5, "val_every_steps": 1000, "log_every_steps": LOG_EVERY, **train_overrides},
        logging={"wandb": True, "mode": "offline", "progress": True},
    )
    window = Window(watch)
    train(cfg, callbacks=[window])
    assert window.steps_seen == list(range(FIRST, FIRST + STEPS)), window.steps_seen
    return window


@pytest.mark.slow
def test_training_steps_read_no_device_value_between_log_steps(tmp_path):
    events: list = []
    _run(tmp_path, lambda: _ReadRecorder(events))
    assert not _unexplained(events), "device reads in the hot loop:\n" + "\n".join(_unexplained(events))


def _read_the_loss_every_step(monkeypatch) -> None:
    """What the loop had before: the loss read on the host at every step."""
    import ablate.training.module

    step = ablate.training.module.TranslationModule.training_step

    def reading_step(self, batch, batch_idx):
        loss = step(self, batch, batch_idx)
        float(loss)
        return loss

    monkeypatch.setattr(ablate.training.module.TranslationModule, "training_step", reading_step)


@pytest.mark.slow
def test_the_recorder_sees_a_read_in_the_step(tmp_path, monkeypatch):
    """The detector is not blind: a loss read every step is caught and located."""
    _read_the_loss_every_step(monkeypatch)
    events: list = []
    _run(tmp_path, lambda: _ReadRecorder(events))
    found = _unexplained(events)
    assert len(found) >= STEPS and all("reading_step" in where for where in found[:STEPS])


class _SyncRecorder:
    """torch.cuda.set_sync_debug_mode("warn") for the window, each warning's Python stack kept. Only warnings
    between the two mode switches count: torch 2.11 itself warns, with "synchronizing" in the text, when the mode is
    set (seen on an H200, 2026-11-28)."""

    def __init__(self, events: list):
        self.events, self._catch, self.armed = events, warnings.catch_warnings(), False

    def __enter__(self):
        self._catch.__enter__()
        warnings.simplefilter("always")
        shown = warnings.showwarning

        def keep(message, category, *args, **kwargs):
            if self.armed and "synchronizing" in str(message).lower():
                self.events.append(traceback.extract_stack()[:-1])
            else:
                shown(message, category, *args, **kwargs)

        warnings.showwarning = keep
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("warn")
        self.armed = True
        return self

    def __exit__(self, *exc):
        self.armed = False
        torch.cuda.set_sync_debug_mode("default")
        self._catch.__exit__(*exc)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("precision", ["32", "bf16-mixed"])
def test_training_steps_do_not_synchronise_the_gpu(tmp_path, precision):
    events: list = []
    _run(tmp_path, lambda: _SyncRecorder(events), accelerator="gpu", devices=1, precision=precision)
    assert not _unexplained(events), "host-device synchronisations in the hot loop:\n" + "\n".join(_unexplained(events))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_the_gpu_recorder_sees_a_read_in_the_step(tmp_path, monkeypatch):
    """torch's detector, as the window sets it, is not blind either: the same per-step read is caught and located."""
    _read_the_loss_every_step(monkeypatch)
    events: list = []
    _run(tmp_path, lambda: _SyncRecorder(events), accelerator="gpu", devices=1, precision="bf16-mixed")
    found = _unexplained(events)
    assert len(found) >= STEPS and all("reading_step" in where for where in found[:STEPS])

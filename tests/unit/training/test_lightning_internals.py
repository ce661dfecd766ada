"""Lightning's private state that ablate.training.lightning_internals reads and writes is still there and means what
it did: this fails when a Lightning release changes it, before a resumed run silently logs the wrong steps or a
preempted one fails to stop. And nothing else in ablate reaches into it."""

from __future__ import annotations

import re
from pathlib import Path

import lightning as L
import pytest
from lightning.pytorch.demos.boring_classes import BoringModel

from ablate.training.lightning_internals import StepCheckpoint, logs_this_step, pin_logging_counter, stop_as_on_sigterm

SRC = Path(__file__).resolve().parents[3] / "src" / "ablate"
PRIVATE = re.compile(r"\._(logger_connector|signal_connector|batches_that_stepped|trainer\b)")


class Probe(L.Callback):
    def __init__(self):
        self.logged, self.saved = [], None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.logged.append(logs_this_step(pl_module, batch_idx, 3))

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == 5:
            stop_as_on_sigterm(trainer)


def test_the_private_state_ablate_uses_is_where_it_was(tmp_path):
    probe = Probe()
    trainer = L.Trainer(max_steps=20, log_every_n_steps=3, callbacks=[probe], logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path, limit_val_batches=0)  # fmt: skip
    from lightning.pytorch.utilities.exceptions import SIGTERMException

    with pytest.raises(SIGTERMException):  # how Lightning stops on SIGTERM: ablate.run.train exits 75 on it
        trainer.fit(BoringModel())
    assert trainer.global_step == 5  # the flag stopped training after the step that set it, as a SIGTERM does
    assert probe.logged[:5] == [False, False, True, False, False]  # Lightning's own rule: every 3rd step, from step 2
    checkpoint = trainer._checkpoint_connector.dump_checkpoint()
    loops = checkpoint["loops"]["fit_loop"]["epoch_loop.state_dict"]
    assert "_batches_that_stepped" in loops
    pin_logging_counter(checkpoint)
    assert loops["_batches_that_stepped"] == checkpoint["global_step"] - 1
    assert logs_this_step(BoringModel(), 6, 3) and not logs_this_step(BoringModel(), 7, 3)  # outside a Trainer


def test_no_other_module_reaches_into_lightnings_private_state():
    found = [
        f"{path.relative_to(SRC)}:{n}: {line.strip()}"
        for path in SRC.rglob("*.py")
        if path.name != "lightning_internals.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if PRIVATE.search(line)
    ]
    assert not found, "use ablate.training.lightning_internals:\n" + "\n".join(found)


def test_step_checkpoint_releases_the_step_file_a_run_resumed_from_and_nothing_outside_its_folder(tmp_path):
    """Lightning keeps the file a Trainer resumed from (pinned: the reason StepCheckpoint exists); StepCheckpoint lets
    keep_last remove it when it is one of its own, never a checkpoint elsewhere."""
    from types import SimpleNamespace

    from lightning.pytorch.callbacks import ModelCheckpoint

    own, newer, outside = (str(tmp_path / "checkpoints" / f"step={n}.ckpt") for n in (30, 50, 60))
    outside = str(tmp_path / "elsewhere" / "step=30.ckpt")
    resumed = SimpleNamespace(ckpt_path=own)
    assert not ModelCheckpoint(dirpath=tmp_path / "checkpoints")._should_remove_checkpoint(resumed, own, newer)
    steps = StepCheckpoint(dirpath=tmp_path / "checkpoints")
    assert steps._should_remove_checkpoint(resumed, own, newer)
    assert not steps._should_remove_checkpoint(resumed, own, own)  # overwritten in place, never removed
    assert not steps._should_remove_checkpoint(SimpleNamespace(ckpt_path=outside), outside, newer)
    assert steps._should_remove_checkpoint(SimpleNamespace(ckpt_path=None), own, newer)


def test_step_checkpoint_keeps_model_checkpoints_state_key_so_older_runs_resume_their_bookkeeping(tmp_path):
    from lightning.pytorch.callbacks import ModelCheckpoint

    kwargs = dict(dirpath=tmp_path, filename="step={step}", monitor="step", mode="max", save_top_k=2, save_last=True)
    key = StepCheckpoint(**kwargs).state_key
    assert key == ModelCheckpoint(**kwargs).state_key and key.startswith("ModelCheckpoint{")

"""TranslationModule without a Trainer: the Noam schedule, the shared step, the optimizer, checkpoint hooks and
the generator states they carry. Hooks that read the trainer get a two-attribute stand-in, nothing deeper."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import tiny_experiment

from ablate import plugins
from ablate.config import to_dict
from ablate.data.batching import collate
from ablate.model.tokens import PAD_ID
from ablate.training.module import TranslationModule, noam_factor

VOCAB = 64


class StubTrainer:
    """What the hooks under test read from a Trainer; nothing else."""

    def __init__(self, global_step: int = 0, world_size: int = 1):
        self.global_step, self.world_size, self.global_rank = global_step, world_size, 0
        self.sanity_checking = False


def make_module(tmp_path, **train) -> TranslationModule:
    return TranslationModule.from_config(tiny_experiment(tmp_path, train=train), VOCAB)


def make_batch(seed: int = 0, rows: int = 3) -> dict:
    """A real collated batch (BOS/EOS and padding as the data pipeline makes them) of random ids."""
    rng = np.random.default_rng(seed)
    samples = [(i, rng.integers(4, VOCAB, rng.integers(2, 8)), rng.integers(4, VOCAB, rng.integers(2, 8))) for i in range(rows)]
    return collate(samples)


def reference_loss(module: TranslationModule, batch: dict, smoothing: float) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Summed smoothed loss and NLL over the real target tokens, from torch's cross entropy on the full logits."""
    with torch.no_grad():
        logits = module.model(batch["src"], batch["tgt_in"])  # (B, T, V)
    keep = batch["tgt_out"] != PAD_ID
    target = batch["tgt_out"][keep]
    loss = F.cross_entropy(logits[keep], target, label_smoothing=smoothing, reduction="sum")
    nll = F.cross_entropy(logits[keep], target, reduction="sum")
    return loss, nll, int(keep.sum())


# --- the Noam schedule (Eq. 3) ------------------------------------------------------------------------------------


def test_noam_factor_rises_linearly_peaks_at_warmup_then_decays_as_inverse_sqrt():
    d, w = 64, 100
    peak = noam_factor(w, d, w)
    assert peak == pytest.approx(d**-0.5 * w**-0.5)
    assert noam_factor(10, d, w) == pytest.approx(10 * noam_factor(1, d, w))  # linear warmup
    assert noam_factor(w - 1, d, w) < peak and noam_factor(w + 1, d, w) < peak
    assert noam_factor(4 * w, d, w) == pytest.approx(peak / 2)  # step^-0.5 after warmup
    assert noam_factor(0, d, w) == noam_factor(1, d, w) > 0  # step counts from 1
    assert noam_factor(37, d, w, scale=2.5) == pytest.approx(2.5 * noam_factor(37, d, w))
    assert noam_factor(w, 4 * d, w) == pytest.approx(peak / 2)  # d_model^-0.5


def test_configure_optimizers_is_adam_with_the_configs_settings_and_a_per_step_noam_schedule(tmp_path):
    module = make_module(tmp_path, betas=[0.8, 0.95], eps=1e-7, weight_decay=0.01)  # warmup 10, lr_scale 2, d_model 32
    conf = module.configure_optimizers()
    opt, sched = conf["optimizer"], conf["lr_scheduler"]["scheduler"]
    assert isinstance(opt, torch.optim.Adam) and conf["lr_scheduler"]["interval"] == "step"
    group = opt.param_groups[0]
    assert group["betas"] == (0.8, 0.95) and group["eps"] == 1e-7 and group["weight_decay"] == 0.01
    assert sum(p.numel() for p in group["params"]) == sum(p.numel() for p in module.parameters())
    for step in range(1, 25):  # the first optimizer step already uses the step-1 rate, not zero
        assert group["lr"] == pytest.approx(noam_factor(step, 32, 10, 2.0))
        opt.step()
        sched.step()


def test_from_config_keeps_the_config_and_vocab_as_hyperparameters_and_counts_parameters(tmp_path):
    cfg = tiny_experiment(tmp_path)
    module = TranslationModule.from_config(cfg, VOCAB)
    assert module.hparams["config"] == to_dict(cfg) and module.hparams["vocab_size"] == VOCAB
    assert module.cfg == cfg
    assert module.params["total"] == sum(p.numel() for p in module.model.parameters())  # tied weights once


# --- the shared step ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("grad", [True, False], ids=["train", "eval"])
def test_step_is_the_summed_smoothed_loss_over_real_target_tokens(tmp_path, smoothing, grad):
    module = make_module(tmp_path, label_smoothing=smoothing)
    batch = make_batch()
    ref_loss, ref_nll, ntok = reference_loss(module, batch, smoothing)
    with torch.set_grad_enabled(grad):
        loss, nll, n = module._step(batch)
    assert int(n) == ntok == int((batch["tgt_out"] != PAD_ID).sum()) < batch["tgt_out"].numel()  # padding not counted
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(nll, ref_nll, rtol=1e-5, atol=1e-4)
    assert loss.requires_grad == grad
    if smoothing == 0.0:
        torch.testing.assert_close(loss, nll)


def test_training_step_returns_the_per_token_loss_and_logs_loss_ppl_and_lr(tmp_path, monkeypatch):
    module = make_module(tmp_path)
    logged = {}
    monkeypatch.setattr(module, "log", lambda name, value, **kw: logged.__setitem__(name, (value, kw)))
    lr = type("Sched", (), {"get_last_lr": lambda self: [0.123]})()
    monkeypatch.setattr(module, "lr_schedulers", lambda: lr)
    batch = make_batch()
    ref_loss, ref_nll, ntok = reference_loss(module, batch, module.cfg.train.label_smoothing)
    out = module.training_step(batch, 0)
    torch.testing.assert_close(out.detach(), ref_loss / ntok, rtol=1e-5, atol=1e-5)
    assert out.requires_grad
    assert set(logged) == {"train/loss", "train/ppl", "train/lr"}
    assert logged["train/loss"][1]["batch_size"] == ntok
    torch.testing.assert_close(logged["train/ppl"][0], torch.exp(ref_nll / ntok), rtol=1e-5, atol=1e-5)
    assert logged["train/lr"][0] == 0.123


def poison(module: TranslationModule) -> None:
    with torch.no_grad():
        next(module.model.parameters()).fill_(float("nan"))


def test_training_step_raises_on_a_non_finite_loss_at_check_steps_only(tmp_path, monkeypatch):
    module = make_module(tmp_path)  # log_every_steps=5
    poison(module)
    with pytest.raises(FloatingPointError, match="train/loss is nan at step 0"):
        module.training_step(make_batch(), 5)
    monkeypatch.setattr(module, "log", lambda *a, **kw: None)
    monkeypatch.setattr(module, "lr_schedulers", lambda: type("S", (), {"get_last_lr": lambda self: [1.0]})())
    assert torch.isnan(module.training_step(make_batch(), 3))  # between checks: no host sync, no raise


def validate(module, batches: list, monkeypatch) -> dict:
    """One validation epoch over `batches`: the metrics the module reports."""
    reported = {}
    monkeypatch.setattr(module, "log_dict", lambda metrics, **kw: reported.update(metrics))
    module.on_validation_epoch_start()
    with torch.no_grad():
        for i, b in enumerate(batches):
            module.validation_step(b, i)
    module.on_validation_epoch_end()
    return reported


def test_validation_accumulates_sums_over_batches_and_reports_per_token_metrics(tmp_path, monkeypatch):
    module = make_module(tmp_path, val_bleu=False)
    batches = [make_batch(seed) for seed in (1, 2)]
    refs = [reference_loss(module, b, module.cfg.train.label_smoothing) for b in batches]
    reported = validate(module, batches, monkeypatch)
    loss = sum(float(r[0]) for r in refs)
    nll = sum(float(r[1]) for r in refs)
    ntok = sum(r[2] for r in refs)
    assert set(reported) == {"val/loss", "val/nll", "val/ppl"}  # no BLEU when val_bleu is off
    assert reported["val/loss"] == pytest.approx(loss / ntok, rel=1e-5)
    assert reported["val/nll"] == pytest.approx(nll / ntok, rel=1e-5)
    assert reported["val/ppl"] == pytest.approx(math.exp(nll / ntok), rel=1e-5)
    reported = validate(module, batches[:1], monkeypatch)  # a new epoch starts from zero
    assert reported["val/loss"] == pytest.approx(float(refs[0][0]) / refs[0][2], rel=1e-5)


def test_a_float64_runs_validation_metrics_are_summed_in_float64(tmp_path, monkeypatch):
    module = make_module(tmp_path, val_bleu=False).double()  # precision '64': a float32 sum would round at ~1e-7
    batches = [make_batch(seed) for seed in (1, 2, 3)]
    refs = [reference_loss(module, b, module.cfg.train.label_smoothing) for b in batches]
    reported = validate(module, batches, monkeypatch)
    ntok = sum(r[2] for r in refs)
    assert reported["val/loss"] == pytest.approx(sum(float(r[0]) for r in refs) / ntok, rel=1e-13)
    assert reported["val/nll"] == pytest.approx(sum(float(r[1]) for r in refs) / ntok, rel=1e-13)


# --- checkpoint hooks ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model, train, same",
    [
        ({"heads": 1}, {}, True),  # another head split of the same projections
        ({"heads": 8}, {}, True),
        ({"dropout": 0.3}, {}, True),
        ({}, {"label_smoothing": 0.0}, True),
        ({"d_k": 4}, {}, False),  # other projection shapes: other draws
    ],
)
def test_a_seed_starts_rows_that_keep_the_weights_shapes_from_the_same_weights(tmp_path, model, train, same):
    """What makes seeds blocks across a study's rows (ablate.table.seed_luck): a row that only re-splits heads or
    changes dropout or smoothing starts, for a seed, from the very weights the base starts from."""

    def initial(**sections):
        torch.manual_seed(7)
        return TranslationModule.from_config(tiny_experiment(tmp_path, **sections), VOCAB).state_dict()

    base, row = initial(), initial(model=model, train=train)
    shapes = {k: v.shape for k, v in base.items()} == {k: v.shape for k, v in row.items()}
    assert (shapes and all(torch.equal(base[k], row[k]) for k in base)) is same


def test_on_save_checkpoint_refuses_non_finite_weights(tmp_path):
    module = make_module(tmp_path)
    poison(module)
    checkpoint = {"global_step": 7}
    with pytest.raises(FloatingPointError, match="non-finite weights"):
        module.on_save_checkpoint(checkpoint)
    assert checkpoint == {"global_step": 7}


def test_on_save_checkpoint_adds_tokenizer_and_params_and_pins_the_logging_step(tmp_path):
    module = make_module(tmp_path)
    module.trainer = StubTrainer(global_step=20)
    module.tokenizer_proto = b"spm-bytes"
    loops = {"_batches_that_stepped": 21, "other": 1}
    checkpoint = {"global_step": 20, "loops": {"fit_loop": {"epoch_loop.state_dict": loops}}}
    module.on_save_checkpoint(checkpoint)
    assert checkpoint["tokenizer_model"] == b"spm-bytes"
    assert checkpoint["params"] == module.params
    assert loops == {"_batches_that_stepped": 19, "other": 1}
    assert "rng" not in checkpoint  # the generators are the RngState callback's (ablate.training.rng)
    module.on_load_checkpoint({"tokenizer_model": b"proto"})
    assert module.tokenizer_proto == b"proto"


def test_a_runs_id_is_in_its_checkpoints_and_a_resume_keeps_it(tmp_path):
    module, other = make_module(tmp_path), make_module(tmp_path)
    module.trainer = StubTrainer(global_step=5)
    checkpoint = {"global_step": 5}
    module.on_save_checkpoint(checkpoint)
    assert checkpoint["run_id"] == module.run_id != other.run_id  # two runs of one config are two ids
    other.on_load_checkpoint(checkpoint)
    assert other.run_id == module.run_id
    other.on_load_checkpoint({"tokenizer_model": None})  # saved before run ids: keeps its own
    assert other.run_id == module.run_id


def test_a_checkpoint_records_the_sha256_of_each_plugin_file_as_the_run_imported_it(tmp_path, monkeypatch):
    monkeypatch.setattr(plugins, "_imported", {})
    monkeypatch.setattr(plugins, "_hashes", {})
    plugin = tmp_path / "mine.py"
    plugin.write_text("SCALE = 1\n")
    module = TranslationModule.from_config(tiny_experiment(tmp_path, plugins=[str(plugin)]), VOCAB)
    module.trainer = StubTrainer(global_step=5)
    plugin.write_text("SCALE = 0\n")  # edited while the run trains: its weights learned with the code it imported
    checkpoint = {"global_step": 5}
    module.on_save_checkpoint(checkpoint)
    assert checkpoint[plugins.PLUGIN_HASHES] == {str(plugin): hashlib.sha256(b"SCALE = 1\n").hexdigest()}

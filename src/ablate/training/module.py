"""`TranslationModule`: the thin Lightning shell around the Transformer (Sec. 5.3-5.4).

Label-smoothed cross entropy, Adam(0.9, 0.98, 1e-9) with the inverse-sqrt warmup schedule,
and validation reporting loss, perplexity and sacreBLEU of beam-search output.
"""

from __future__ import annotations

import uuid

import lightning as L
import torch

from ablate import plugins
from ablate.config import ExperimentConfig, to_dict
from ablate.data.subset import bleu_rows, host_rows
from ablate.evaluation.scores import bleu_tokenizer, validation_scores
from ablate.evaluation.sentence_scores import decode_rows
from ablate.experiment import from_dict
from ablate.model import build_transformer, count_parameters
from ablate.model.loss import translation_loss
from ablate.training.lightning_internals import logs_this_step, pin_logging_counter
from ablate.training.precision import Precision


def noam_factor(step: int, d_model: int, warmup: int, scale: float = 1.0) -> float:
    """lr = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), step counted from 1 (Eq. 3)."""
    step = max(step, 1)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


class TranslationModule(L.LightningModule):
    def __init__(self, config: dict, vocab_size: int):
        super().__init__()
        self.save_hyperparameters()  # the resolved config and vocab size travel in every checkpoint
        self.cfg: ExperimentConfig = from_dict(config)
        self.model = build_transformer(self.cfg.model, vocab_size)
        self.params = count_parameters(self.model)
        self.tokenizer_proto: bytes | None = None  # set by train(); makes checkpoints self-contained
        # Tells this run's checkpoints from another run's of the same seed and model (`ablate average`); a resume keeps it.
        self.run_id = uuid.uuid4().hex
        self.bleu_signature = ""
        self._val_sums = torch.zeros(3)  # smoothed loss, nll, target tokens
        self._hyps: dict[int, list[int]] = {}
        self._bleu_rows: frozenset[int] | None = None  # the fixed sample of validation sentences val/bleu is on; None = all
        self.decoded: tuple[int, dict[int, list[int]]] | None = None  # (global step, {index: ids}) of the last decoding validation
        self.model.to(Precision.of(self.cfg.train).params_dtype)  # float64 from the start for "64" (Precision says why)
        if self.cfg.train.compile:
            self.model.compile()  # in place: state-dict keys stay those of the plain model

    @classmethod
    def from_config(cls, cfg: ExperimentConfig, vocab_size: int) -> TranslationModule:
        return cls(to_dict(cfg), vocab_size)

    def _step(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Summed label-smoothed loss, summed NLL (for perplexity) and the number of target tokens."""
        return translation_loss(self.model, batch, self.cfg.train.label_smoothing)

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        loss, nll, ntok = self._step(batch)
        loss = loss / ntok
        if self._logging_step(batch_idx):
            # Values are read on the host only here, every log_every_steps batches: a read waits for the device to
            # finish the step, and one per step would keep the GPU idle while the host prepares the next (NaN weights
            # persist, so a periodic check still catches them). Lightning's loggers write only at these steps too.
            if not torch.isfinite(loss):
                raise FloatingPointError(
                    f"train/loss is {loss.item()} at step {self.global_step}; the last checkpoint is the last good one"
                )
            tokens = batch["tgt_tokens"]  # a Python int from the collate: no device read
            self.log("train/loss", loss, prog_bar=True, batch_size=tokens)
            self.log("train/ppl", torch.exp(nll / ntok), batch_size=tokens)
            self.log("train/lr", self.lr_schedulers().get_last_lr()[0])
        return loss

    def _logging_step(self, batch_idx: int) -> bool:
        """Whether Lightning writes this batch's metrics to the loggers (every log_every_steps optimizer steps)."""
        return logs_this_step(self, batch_idx, self.cfg.train.log_every_steps)

    def on_validation_epoch_start(self) -> None:
        # float64, whatever the precision: a float32 sum over a split's batches rounds a float64 run's validation metrics
        self._val_sums = torch.zeros(3, dtype=torch.float64, device=self.device)
        self._hyps = {}
        if self.cfg.train.val_max_sentences:
            self._bleu_rows = bleu_rows(len(self.trainer.datamodule.raw("valid")[1]), self.cfg.train)

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        loss, nll, ntok = self._step(batch)
        self._val_sums += torch.stack([loss.detach().double(), nll.double(), ntok.double()])
        if self.cfg.train.val_bleu and not self.trainer.sanity_checking:
            # TranslationDataModule picked the rows on the host; a batch from elsewhere is picked here (with reads).
            found = batch.get("bleu") or host_rows(batch, self._bleu_rows)
            if found["idx"]:
                src = batch["src"].index_select(0, found["rows"].to(batch["src"].device))  # (B', S)
                self._hyps.update(zip(found["idx"], decode_rows(self.model, src, self.cfg, found["width"])))

    def on_validation_epoch_end(self) -> None:
        dm = self.trainer.datamodule if self._hyps else None  # (loss alone needs no Trainer: tests, benchmarks)
        decode, refs = (dm.tokenizer.decode, dm.raw("valid")[1]) if dm else (None, [])
        tokenize = bleu_tokenizer(self.cfg.data.tgt_lang)
        metrics, signature = validation_scores(self._val_sums.tolist(), self._hyps, decode, refs, tokenize)
        if signature is not None:
            self.bleu_signature, self.decoded = signature, (self.global_step, self._hyps)
        self.log_dict(metrics)

    def configure_optimizers(self):
        t = self.cfg.train
        # Fused on CUDA: one kernel for the whole update instead of a launch per tensor group (same arithmetic).
        fused = self.device.type == "cuda"
        opt = torch.optim.Adam(self.parameters(), lr=1.0, betas=tuple(t.betas), eps=t.eps, weight_decay=t.weight_decay, fused=fused or None)
        schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: noam_factor(step + 1, self.cfg.model.d_model, t.warmup, t.lr_scale))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        # Never let non-finite weights replace the last good checkpoint (the periodic loss check may not have run yet).
        if not all(torch.isfinite(p).all() for p in self.parameters()):
            raise FloatingPointError(
                f"non-finite weights at step {self.global_step}: not saving them; the last checkpoint is the last good one"
            )
        if self.tokenizer_proto is not None:
            checkpoint["tokenizer_model"] = self.tokenizer_proto
        checkpoint["run_id"] = self.run_id
        checkpoint[plugins.PLUGIN_HASHES] = plugins.contents(self.cfg.plugins)  # the code its variants ran, as imported
        checkpoint["params"] = dict(self.params)
        pin_logging_counter(checkpoint)

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.tokenizer_proto = checkpoint.get("tokenizer_model")
        self.run_id = checkpoint.get("run_id", self.run_id)  # a checkpoint saved before run ids: this one from now on

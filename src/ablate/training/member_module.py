"""`MemberModule`: K runs of one architecture trained as one Lightning module (ablate.model.members).

Member k starts from the weights its own run would (ablate.training.member_training.initial_weights) and trains with
its own schedule, clipping, label smoothing and dropout rate under MemberAdam. Validation scores every member on the
same batches: the loss in one batched pass, beam search on an ordinary copy of each member's weights (decoding is
per member, as each run's own would be). Per-member results are left in `member_metrics` and `train_losses` for the
callbacks that write each member's run directory (ablate.run.member_runs).
"""

from __future__ import annotations

import math
import uuid

import lightning as L
import torch
from torch import Tensor

from ablate import plugins
from ablate.config import to_dict
from ablate.config.members import member_values
from ablate.data.member_batches import tile_batch
from ablate.data.subset import bleu_rows, host_rows
from ablate.evaluation.scores import bleu_tokenizer, validation_scores
from ablate.evaluation.sentence_scores import decode_rows
from ablate.experiment import from_dict
from ablate.model import build_transformer, count_parameters
from ablate.model.member_loss import member_translation_loss
from ablate.model.members import member_state_dict
from ablate.training.lightning_internals import logs_this_step, pin_logging_counter
from ablate.training.member_adam import MemberAdam, member_optimizer_state
from ablate.training.member_training import build_member_model, member_adam, member_objective
from ablate.training.precision import Precision


class MemberModule(L.LightningModule):
    def __init__(self, configs: list[dict], vocab_size: int):
        super().__init__()
        self.save_hyperparameters()
        self.cfgs = [from_dict(c) for c in configs]
        self.members, self.vocab_size = len(configs), vocab_size
        self.values = member_values(self.cfgs)  # refuses a group whose members differ in a key they may not
        self.cfg = cfg = self.cfgs[0]  # what every member shares (a plugin's callback reads it as a run's cfg)
        # float64 from the start for "64" (Precision says why)
        self.model = build_member_model(self.cfgs, vocab_size, dtype=Precision.of(cfg.train).params_dtype)
        self.register_buffer("smoothing", torch.tensor(self.values["train.label_smoothing"], dtype=torch.float64), persistent=False)
        with torch.device("meta"):
            self.params = count_parameters(build_transformer(cfg.model, vocab_size))  # one member's
        self.train_losses: Tensor | None = None  # (K,) each member's mean smoothed loss at the last logging step
        self.member_metrics: list[dict[str, float]] = []  # each member's metrics of the last validation
        self.bleu_signature = ""
        self.tokenizer_proto: bytes | None = None  # set by the group's trainer: its checkpoint is self-contained
        self.run_id = uuid.uuid4().hex  # the group's; its members' checkpoints carry it (as TranslationModule's)
        self._val_sums = torch.zeros(self.members, 3)
        self._hyps: list[dict[int, list[int]]] = []
        self._decoders: tuple = ()  # ordinary models member weights are copied into for beam search (not parameters)
        if cfg.train.compile:
            self.model.compile()

    @classmethod
    def from_configs(cls, configs: list, vocab_size: int) -> MemberModule:
        return cls([to_dict(c) for c in configs], vocab_size)

    @property
    def optimizer(self) -> MemberAdam:
        return self.optimizers(use_pl_optimizer=False)

    def training_step(self, batch: dict, batch_idx: int) -> Tensor:
        total, per_token, nll, ntok = member_objective(self.model, batch, self.smoothing, self.optimizer.active_on(self.device))
        if logs_this_step(self, batch_idx, self.cfgs[0].train.log_every_steps):  # the steps Lightning logs a run's at
            # Read on the host only at logging steps (ablate.training.module explains why).
            self.train_losses, self.train_step = per_token.detach().double().cpu(), self.global_step
            self.train_ppl = torch.exp(nll / ntok.to(nll.dtype).clamp(min=1)).detach().double().cpu()
            shown = self.train_losses[self.optimizer.active]
            self.log("train/loss", shown.mean() if shown.numel() else math.nan, prog_bar=True, batch_size=batch["tgt_tokens"])
        return total

    def on_validation_epoch_start(self) -> None:
        self._val_sums = torch.zeros(self.members, 3, dtype=torch.float64, device=self.device)
        self._hyps = [{} for _ in range(self.members)]
        if self.cfgs[0].train.val_bleu and not self.trainer.sanity_checking:
            self._load_decoders()

    def _load_decoders(self) -> None:
        """Copy each member's current weights into its ordinary model, built once per process: on the CPU's generator
        forked, since initialising weights (overwritten at once) draws from the one dropout draws from, and a resumed
        group builds them at another step than the run it continues did, so every later mask would differ."""
        cfg = self.cfgs[0]
        if not self._decoders:
            with torch.random.fork_rng(devices=[]):  # built on the CPU, then moved
                self._decoders = tuple(build_transformer(cfg.model, self.vocab_size) for _ in range(self.members))
        state = self.model.state_dict()
        for k, decoder in enumerate(self._decoders):
            decoder.load_state_dict(member_state_dict(state, k))
            decoder.to(device=self.device, dtype=next(self.model.parameters()).dtype).eval()

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        loss, nll, ntok = member_translation_loss(self.model, tile_batch(batch, self.members), self.smoothing)
        self._val_sums += torch.stack([loss.double(), nll.double(), ntok.to(self._val_sums)], dim=1)
        if self._decoders and not self.trainer.sanity_checking:
            found = batch.get("bleu") or host_rows(batch, self._bleu_rows())
            if found["idx"]:
                src = batch["src"].index_select(0, found["rows"].to(batch["src"].device))  # (B', S)
                for k, decoder in enumerate(self._decoders):
                    if bool(self.optimizer.active[k]):  # a stopped member's scores stay those it stopped with
                        self._hyps[k].update(zip(found["idx"], decode_rows(decoder, src, self.cfgs[0], found["width"])))

    def _bleu_rows(self):
        return bleu_rows(len(self.trainer.datamodule.raw("valid")[1]), self.cfgs[0].train)

    def on_validation_epoch_end(self) -> None:
        sums = self._val_sums.cpu().tolist()
        self.member_metrics = []
        refs = self.trainer.datamodule.raw("valid")[1] if any(self._hyps) else []
        decode, tokenize = self.trainer.datamodule.tokenizer.decode, bleu_tokenizer(self.cfgs[0].data.tgt_lang)
        for k, member_sums in enumerate(sums):
            m, signature = validation_scores(member_sums, self._hyps[k], decode, refs, tokenize)
            self.bleu_signature = signature or self.bleu_signature
            self.member_metrics.append(m)
        live = [m for k, m in enumerate(self.member_metrics) if bool(self.optimizer.active[k])] or self.member_metrics
        # The group's mean, for the progress bar and the budgets' bookkeeping; each member's own go to its run directory.
        self.log_dict({key: sum(m[key] for m in live) / len(live) for key in live[0] if all(key in m for m in live)})

    def configure_optimizers(self):
        return member_adam(self.model.parameters(), self.cfgs, self.device)

    def member_weights(self, k: int) -> dict[str, Tensor]:
        """Member k's weights as its own run's model holds them."""
        return member_state_dict(self.model.state_dict(), k)

    def member_optimizer(self, k: int) -> dict:
        """Member k's Adam state as its own run's torch.optim.Adam saves it."""
        return member_optimizer_state(self.optimizer, k)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        if self.tokenizer_proto is not None:
            checkpoint["tokenizer_model"] = self.tokenizer_proto
        checkpoint["run_id"] = self.run_id
        checkpoint[plugins.PLUGIN_HASHES] = plugins.contents(self.cfg.plugins)  # as TranslationModule's
        pin_logging_counter(checkpoint)  # a resumed group logs at the steps it would have (as TranslationModule)

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.tokenizer_proto = checkpoint.get("tokenizer_model")
        self.run_id = checkpoint.get("run_id", self.run_id)

"""The data pipeline as a LightningDataModule: files -> pairs -> joint BPE -> token-bucketed batches (Sec. 5.1).

The parts live in small modules and are re-exported here: `ablate.data.datasets` (where files come from),
`ablate.data.corpus` (reading them), `ablate.data.tokenizer` (SentencePiece BPE) and `ablate.data.batching` (samplers, collate).
"""

from __future__ import annotations

import functools
import logging
from typing import Optional

import lightning as L
import torch
from torch.utils.data import DataLoader

from ablate.data.batching import EncodedSplit, TokenBucketBatchSampler, collate, encode_pairs, make_loader
from ablate.data.corpus import CorpusStats, read_lines, read_parallel
from ablate.data.datasets import DATASETS, cache_dir, resolve_split
from ablate.data.location import SPLITS, available_splits
from ablate.data.subset import bleu_rows, host_rows
from ablate.data.tokenizer import Tokenizer, load_or_train_tokenizer
from ablate.model import max_length

log = logging.getLogger(__name__)

STAGE_SPLITS = {"fit": ("train", "valid"), "validate": ("valid",)}  # a test split is scored from its text, never by Lightning

__all__ = [
    "DATASETS", "CorpusStats", "EncodedSplit", "TokenBucketBatchSampler", "Tokenizer",
    "TranslationDataModule", "cache_dir", "collate", "encode_pairs", "load_or_train_tokenizer", "make_loader",
    "available_splits", "read_lines", "read_parallel", "resolve_split",
]  # fmt: skip


class TranslationDataModule(L.LightningDataModule):
    """Train/valid/test splits of `cfg.data`, its tokenizer, and raw text for BLEU against detokenized output."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.data_cfg = cfg.data
        self.tokenizer: Optional[Tokenizer] = None
        self._raw: dict[str, list[tuple[str, str]]] = {}
        self._encoded: dict[str, EncodedSplit] = {}
        self.dropped: dict[str, dict] = {}  # split -> what was left out and why (kept in the run's summary)

    def _source_cap(self) -> int | None:
        """The longest evaluation source kept: the model's bound (none for most positional encodings), less what
        padding to data.pad_multiple would add past it."""
        cap = max_length(self.cfg.model)
        return None if cap is None else cap - cap % self.data_cfg.pad_multiple

    def prepare_data(self) -> None:
        # Runs on one process per node before setup(): downloads and tokenizer training happen once, not per rank.
        for split in available_splits(self.data_cfg):
            resolve_split(self.data_cfg, split)
        if self.tokenizer is None:  # a resumed run brings its own (ablate.run.rundir): train none it would not use
            load_or_train_tokenizer(self.data_cfg, *resolve_split(self.data_cfg, "train"))

    def setup(self, stage: Optional[str] = None) -> None:
        if self.tokenizer is None:
            self.tokenizer = load_or_train_tokenizer(self.data_cfg, *resolve_split(self.data_cfg, "train"))
        wanted = STAGE_SPLITS.get(stage, SPLITS) if stage else SPLITS
        for split in wanted:
            if split in self._encoded or (split != "train" and split not in available_splits(self.data_cfg)):
                continue
            files = resolve_split(self.data_cfg, split)
            pairs, stats = read_parallel(*files)
            if not pairs:
                raise ValueError(f"the {split} split has no sentence pairs: {files[0]} / {files[1]} are empty or hold only empty lines")
            self._raw[split] = pairs
            # Training drops over-long pairs; evaluation keeps them (encode_pairs) so BLEU still covers every reference.
            overlong = "drop" if split == "train" else "truncate"
            self._encoded[split] = encode_pairs(self.tokenizer, pairs, self.data_cfg.max_len, overlong, self._source_cap())
            self._report(split, files, stats, self._encoded[split].overlong)

    def _report(self, split: str, files: tuple, stats: CorpusStats, overlong: int) -> None:
        """Say what was left out of a split and why; refuse a training split that loses more than the allowed share."""
        self.dropped[split] = {
            "files": [str(f) for f in files],
            "pairs": stats.lines,
            "empty": stats.empty,
            "too_long": overlong if split == "train" else 0,
        }
        where = f"{files[0]} / {files[1]}"
        if stats.empty:
            log.info("%s: dropped %d of %d pairs with an empty side (%s)", split, stats.empty, stats.lines, where)
        if overlong:
            kept = "dropped" if split == "train" else "kept (a target cut there for the loss, a source read whole)"
            log.info(
                "%s: %d of %d pairs longer than data.max_len=%d tokens on a side, %s (%s)",
                split,
                overlong,
                stats.lines,
                self.data_cfg.max_len,
                kept,
                where,
            )
        lost = (stats.empty + self.dropped[split]["too_long"]) / max(stats.lines, 1)
        if split == "train" and stats.lines and lost >= 1:  # max_dropped_share=1 let it by: 0 steps, exit 0, a "finished" run
            raise ValueError(
                f"{where}: every one of the {stats.lines} training pairs would be dropped ({stats.empty} with an empty side, "
                f"{overlong} longer than data.max_len={self.data_cfg.max_len} tokens): nothing to train on; check the "
                "files, or raise data.max_len"
            )
        if split == "train" and lost > self.data_cfg.max_dropped_share:
            raise ValueError(
                f"{where}: {lost:.1%} of the {stats.lines} training pairs would be dropped ({stats.empty} with an "
                f"empty side, {overlong} longer than data.max_len={self.data_cfg.max_len} tokens), more than "
                f"data.max_dropped_share={self.data_cfg.max_dropped_share}; check the files, or raise "
                "data.max_len or data.max_dropped_share"
            )

    def encoded(self, split: str) -> EncodedSplit:
        if split not in self._encoded:
            ready = sorted(self._encoded)
            raise RuntimeError(f"split '{split}' is not set up; call setup() first (set up: {ready})")
        return self._encoded[split]

    def raw(self, split: str) -> tuple[list[str], list[str]]:
        """(sources, references) of `split`; `batch['idx']` indexes into both lists."""
        self.encoded(split)
        pairs = self._raw[split]
        return [s for s, _ in pairs], [t for _, t in pairs]

    def on_before_batch_transfer(self, batch, dataloader_idx: int):
        # val/bleu's rows are picked while the batch is still on the host, so the device step reads nothing back.
        trainer = getattr(self, "trainer", None)
        if trainer is not None and trainer.validating and not trainer.sanity_checking and self.cfg.train.val_bleu:
            batch["bleu"] = host_rows(batch, self._bleu_rows)
        return batch

    @functools.cached_property
    def _bleu_rows(self) -> frozenset[int] | None:
        return bleu_rows(len(self.raw("valid")[1]), self.cfg.train)

    def _ranks(self) -> tuple[int, int]:
        trainer = getattr(self, "trainer", None)
        if trainer is None:
            return 1, 0
        return trainer.world_size, trainer.global_rank

    def _to_cuda(self) -> bool:
        """Whether batches go to a CUDA device, so pinned host memory speeds their copy: a CPU run on a GPU machine
        (train.accelerator=cpu) pinned every batch for nothing, and failed where CUDA is seen but has no driver."""
        strategy = getattr(getattr(self, "trainer", None), "strategy", None)
        if strategy is not None:
            return strategy.root_device.type == "cuda"
        return torch.cuda.is_available() and self.cfg.train.accelerator in ("auto", "gpu", "cuda")

    def _loader(self, split: str, shuffle: bool, shard: bool, accumulate: int = 1) -> DataLoader:
        replicas, rank = self._ranks() if shard else (1, 0)
        return make_loader(
            self.encoded(split),
            self.data_cfg.max_tokens,
            shuffle=shuffle,
            seed=self.cfg.seed,
            num_replicas=replicas,
            rank=rank,
            num_workers=self.data_cfg.num_workers,
            pin_memory=self._to_cuda(),
            accumulate=accumulate,
            pad_multiple=self.data_cfg.pad_multiple,
        )

    def train_dataloader(self) -> DataLoader:
        loader = self._loader("train", shuffle=True, shard=True, accumulate=self.cfg.train.accumulate)
        self._follow_trainer(loader)
        return loader

    def _follow_trainer(self, loader: DataLoader) -> None:
        """The training sampler's epoch read from the trainer, and on resume its place from the checkpoint
        (ablate.data.epoch_position)."""
        resume_at, self._resume_at = getattr(self, "_resume_at", None), None
        loader.batch_sampler.sampler.follow(lambda: self.trainer.current_epoch, resume_at)

    # Saved in every checkpoint: where in the epoch's batch order training stands, so a resumed run skips exactly
    # the batches it has trained on (Lightning restores its counters but would replay the epoch from its start).
    def state_dict(self) -> dict:
        trainer = getattr(self, "trainer", None)
        if trainer is None:
            return {}
        epoch, done = trainer.current_epoch, trainer.fit_loop.epoch_loop.batch_progress.current.processed
        if done >= trainer.num_training_batches:  # saved at an epoch's end: the resume point is the next epoch's start
            epoch, done = epoch + 1, 0
        return {"epoch": epoch, "batches_done": done}

    def load_state_dict(self, state: dict) -> None:
        self._resume_at = (state["epoch"], state["batches_done"]) if state else None

    # Evaluation is not sharded: every rank sees the whole split in length order, so BLEU needs no gathering.
    def val_dataloader(self) -> DataLoader | list:
        return self._loader("valid", shuffle=False, shard=False) if "valid" in self._encoded else []

"""The data of a member group (ablate.data.member_sampler): the training split as one batch per member and step, the
validation split as ordinary batches that every member scores; the position in the epoch travels in the group's
checkpoint, so a resumed group skips exactly the steps it trained."""

from __future__ import annotations

import functools
from collections.abc import Iterator

import torch
from torch.utils.data import DataLoader, Dataset

from ablate.data.batching import EncodedSplit
from ablate.data.member_batches import collate_members
from ablate.data.member_sampler import MemberBatchSampler
from ablate.data.module import TranslationDataModule


class _MemberPairs(Dataset):
    """Item = one step: K lists of indices -> K lists of encoded pairs (collate_members pads them into one batch)."""

    def __init__(self, split: EncodedSplit):
        self.split = split

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, step: list[list[int]]) -> list[list[tuple]]:
        return [[self.split[i] for i in rows] for rows in step]


class _Resumable:
    """The member sampler, skipping on its first pass the steps a resumed group already trained in that epoch."""

    def __init__(self, sampler: MemberBatchSampler, epoch_source):
        self.sampler, self.epoch_source = sampler, epoch_source
        self.resume_at: tuple[int, int] | None = None

    def set_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(self.epoch_source())

    def __len__(self) -> int:
        return len(self.sampler)

    def __iter__(self) -> Iterator[list[list[int]]]:
        skip = 0
        if self.resume_at is not None and self.resume_at[0] == self.sampler.epoch:
            skip, self.resume_at = self.resume_at[1], None
        for i, step in enumerate(self.sampler):
            if i >= skip:
                yield step


class MemberDataModule(TranslationDataModule):
    """TranslationDataModule for K members with seeds `seeds` (the group's own seed, cfg.seed, sets the length
    schedule); `shared`: every member trains on the group seed's batches (docs/members.md)."""

    def __init__(self, cfg, seeds: list[int], shared: bool = False):
        super().__init__(cfg)
        self.seeds, self.shared = list(seeds), shared
        self._resume_at: tuple[int, int] | None = None

    def train_dataloader(self) -> DataLoader:
        enc = self.encoded("train")
        sampler = MemberBatchSampler(enc.src_lens, enc.tgt_lens, self.data_cfg.max_tokens, self.seeds, self.cfg.seed, shared=self.shared)
        sampler.set_epoch(self.trainer.current_epoch)
        steps = _Resumable(sampler, lambda: self.trainer.current_epoch)
        if self._resume_at is not None:
            sampler.set_epoch(self._resume_at[0])
            steps.resume_at, self._resume_at = self._resume_at, None
        return DataLoader(
            _MemberPairs(enc),
            sampler=steps,
            batch_size=None,  # each item is already a step: K members' index lists
            # An iterator draws its seed from this generator, not torch's global one, which dropout uses: otherwise where
            # a group resumes (before or after an epoch's iterator exists) would change dropout masks (as batching.py's).
            generator=torch.Generator().manual_seed(self.cfg.seed),
            collate_fn=functools.partial(collate_members, pad_multiple=self.data_cfg.pad_multiple),
            num_workers=self.data_cfg.num_workers,
            persistent_workers=self.data_cfg.num_workers > 0,
        )

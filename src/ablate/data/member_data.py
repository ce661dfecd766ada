"""The data of a member group (ablate.data.member_sampler): the training split as one batch per member and step, the
validation split as ordinary batches that every member scores; the position in the epoch travels in the group's
checkpoint, so a resumed group skips exactly the steps it trained."""

from __future__ import annotations

import functools

import torch
from torch.utils.data import DataLoader, Dataset

from ablate.data.batching import EncodedSplit
from ablate.data.loader_workers import worker_init
from ablate.data.member_batches import collate_members
from ablate.data.member_sampler import MemberBatchSampler
from ablate.data.module import TranslationDataModule


class _MemberPairs(Dataset):
    """Item = one member's rows of a step -> its encoded pairs (collate_members pads a step's K lists into one batch)."""

    def __init__(self, split: EncodedSplit):
        self.split = split

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, rows: list[int]) -> list[tuple]:
        return [self.split[i] for i in rows]


class MemberDataModule(TranslationDataModule):
    """TranslationDataModule for K members with seeds `seeds` (the group's own seed, cfg.seed, sets the length
    schedule); `shared`: every member trains on the group seed's batches (docs/members.md)."""

    def __init__(self, cfg, seeds: list[int], shared: bool = False):
        super().__init__(cfg)
        self.seeds, self.shared = list(seeds), shared

    def train_dataloader(self) -> DataLoader:
        enc = self.encoded("train")
        sampler = MemberBatchSampler(enc.src_lens, enc.tgt_lens, self.data_cfg.max_tokens, self.seeds, self.cfg.seed, shared=self.shared)
        loader = DataLoader(
            _MemberPairs(enc),
            batch_sampler=sampler,  # each step: K members' index lists, one item each
            # An iterator draws its seed from this generator, not torch's global one, which dropout uses: otherwise where
            # a group resumes (before or after an epoch's iterator exists) would change dropout masks (as batching.py's).
            generator=torch.Generator().manual_seed(self.cfg.seed),
            collate_fn=functools.partial(collate_members, pad_multiple=self.data_cfg.pad_multiple),
            num_workers=self.data_cfg.num_workers,
            persistent_workers=self.data_cfg.num_workers > 0,
            worker_init_fn=worker_init,  # stopping is the training process's (ablate.data.loader_workers)
        )
        self._follow_trainer(loader)
        return loader

"""EpochPosition: a training sampler's epoch taken from the trainer and a resume's trained batches skipped once, for a
run's batches and a member group's alike, through the DataLoader Lightning sees."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from lightning.fabric.utilities.data import _set_sampler_epoch
from text_corpora import data_cfg, write_corpus

from ablate.config import ExperimentConfig
from ablate.data.batching import TokenBucketBatchSampler
from ablate.data.epoch_position import EpochPosition
from ablate.data.member_data import MemberDataModule
from ablate.data.member_sampler import MemberBatchSampler
from ablate.data.module import TranslationDataModule


class _Epochs:
    def __init__(self):
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch


def test_the_epoch_comes_from_the_source_and_a_resume_skips_its_trained_batches_once():
    owner = _Epochs()
    position = EpochPosition(owner)
    position.set_epoch(4)  # no source: Lightning's argument
    assert owner.epoch == 4
    position.follow(lambda: 2, resume_at=(1, 3))
    assert owner.epoch == 1  # a resume starts in its checkpoint's epoch, before Lightning's first call
    assert list(position.untrained(range(6))) == [3, 4, 5]
    assert list(position.untrained(range(6))) == list(range(6))  # once only
    position.set_epoch(9)
    assert owner.epoch == 2  # the trainer's epoch, not Lightning's argument
    position.resume_at = (0, 2)
    assert list(position.untrained(range(4))) == list(range(4))  # a resume point of another epoch skips nothing


def lengths(n: int = 400) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    tgt = rng.integers(3, 40, n)
    return np.clip(tgt + rng.integers(-3, 4, n), 2, None), tgt


@pytest.mark.parametrize(
    "make",
    [
        lambda src, tgt: TokenBucketBatchSampler(src, tgt, 200, shuffle=True, seed=3),
        lambda src, tgt: MemberBatchSampler(src, tgt, 200, seeds=[1, 2, 3], group_seed=3),
    ],
    ids=["run", "members"],
)
def test_a_resumed_sampler_goes_on_where_its_epoch_stopped(make):
    src, tgt = lengths()
    sampler = make(src, tgt)
    sampler.set_epoch(1)
    whole = list(sampler)
    assert list(sampler) == whole and len(whole) == len(sampler)  # the order is the epoch's, every pass
    resumed = make(src, tgt)
    resumed.sampler.follow(lambda: 1, resume_at=(1, 5))
    assert list(resumed) == whole[5:]
    assert list(resumed) == whole


def corpus_cfg(tmp_path, workers: int) -> ExperimentConfig:
    folder = tmp_path / "corpus"
    folder.mkdir()
    write_corpus(folder, "train", 200, seed=0)
    write_corpus(folder, "valid", 20, seed=1)
    prefixes = dict(train_prefix=str(folder / "train"), valid_prefix=str(folder / "valid"))
    return ExperimentConfig(seed=7, data=data_cfg(tmp_path, max_len=80, max_tokens=240, num_workers=workers, **prefixes))


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("members", [False, True], ids=["run", "members"])
def test_lightning_sets_the_trainers_epoch_on_the_training_loader_and_a_resume_skips_its_batches(tmp_path, members, workers):
    """With workers, a DataLoader makes an iterator of its batch sampler that it never draws from before the one it
    uses: a skip spent when an iterator was made left the run, and then a member group, replaying trained steps."""
    cfg = corpus_cfg(tmp_path, workers)
    dm = MemberDataModule(cfg, [1, 2, 3]) if members else TranslationDataModule(cfg)
    dm.prepare_data()
    dm.setup("fit")
    dm.trainer = SimpleNamespace(current_epoch=2, world_size=1, global_rank=0)
    loader = dm.train_dataloader()
    _set_sampler_epoch(loader, 3)  # Lightning's call, its argument one ahead of the trainer's epoch
    assert loader.batch_sampler.epoch == 2
    full = [_rows(batch) for batch in loader]
    dm.load_state_dict({"epoch": 2, "batches_done": 4})  # what a checkpoint four batches into epoch 2 holds
    resumed = dm.train_dataloader()
    batches = iter(resumed)  # on a resume Lightning makes the epoch's iterator before it sets the epoch
    _set_sampler_epoch(resumed, 3)
    assert [_rows(batch) for batch in batches] == full[4:]


def _rows(batch: dict) -> list[list[int]]:
    """A batch's sentences: one list, or one per member."""
    idx = batch["idx"]
    return [i.tolist() for i in idx] if isinstance(idx, list) else [idx.tolist()]

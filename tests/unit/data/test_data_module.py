"""The DataModule: batches aligned with the raw text, and the shuffle Lightning advances each epoch."""

from __future__ import annotations

import lightning as L
import pytest
import torch
from text_corpora import corpus, data_cfg, write, write_corpus

from ablate.config import ExperimentConfig
from ablate.data.module import TranslationDataModule
from ablate.model.tokens import EOS_ID


@pytest.fixture
def datamodule(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    write_corpus(folder, "train", 300, seed=0)
    src, tgt = corpus(30, seed=1)
    write(folder / "valid.en", src[:10] + [""] + src[10:])  # an empty pair: idx must still align with raw()
    write(folder / "valid.de", tgt[:10] + ["leer"] + tgt[10:])
    prefixes = dict(train_prefix=str(folder / "train"), valid_prefix=str(folder / "valid"))
    cfg = ExperimentConfig(seed=7, data=data_cfg(tmp_path, max_len=80, max_tokens=240, **prefixes))
    dm = TranslationDataModule(cfg)
    dm.prepare_data()
    dm.setup("fit")
    return dm


def test_datamodule_batches_and_raw_alignment(datamodule):
    dm = datamodule
    assert dm.tokenizer.vocab_size == 64
    for batch in dm.train_dataloader():
        b, s = batch["src"].shape
        assert batch["tgt_in"].shape == batch["tgt_out"].shape and batch["idx"].shape == (b,)
        assert b * max(s, batch["tgt_in"].shape[1]) <= 240
    srcs, refs = dm.raw("valid")
    assert len(srcs) == len(refs) == 30
    seen = []
    for batch in dm.val_dataloader():
        for i, src_ids, tgt_ids in zip(batch["idx"].tolist(), batch["src"], batch["tgt_out"]):
            assert dm.tokenizer.decode([src_ids])[0] == srcs[i]
            assert dm.tokenizer.decode([tgt_ids])[0] == refs[i]
            seen.append(i)
    assert sorted(seen) == list(range(30))


class _Recorder(L.LightningModule):
    """Records the sentence indices of every training batch, per epoch."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.seen: dict[int, list[list[int]]] = {}

    def training_step(self, batch, batch_idx):
        self.seen.setdefault(self.current_epoch, []).append(batch["idx"].tolist())
        return self.w.sum() * batch["src"].float().mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.0)


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore:.*LeafSpec:FutureWarning")  # Lightning-internal chatter
def test_lightning_advances_the_shuffle_each_epoch(datamodule):
    model = _Recorder()
    trainer = L.Trainer(
        max_epochs=2, accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, use_distributed_sampler=False, limit_val_batches=0,
    )  # fmt: skip
    trainer.fit(model, datamodule=datamodule)
    expected = datamodule.train_dataloader().batch_sampler
    for epoch in (0, 1):
        expected.set_epoch(epoch)
        assert model.seen[epoch] == [[int(datamodule.encoded("train").idx[j]) for j in b] for b in expected]
    assert model.seen[0] != model.seen[1]


def test_batches_are_pinned_only_for_a_cuda_device(datamodule, monkeypatch):
    """A CPU run on a GPU machine (train.accelerator=cpu) pinned every batch for nothing, and failed where CUDA is
    seen but has no driver (torch's CUDA wheel on a CPU machine, with Lightning's NVML check)."""
    from types import SimpleNamespace

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for accelerator, pinned in (("cpu", False), ("auto", True), ("gpu", True)):
        datamodule.cfg.train.accelerator = accelerator
        assert datamodule._to_cuda() is pinned, accelerator
    datamodule.trainer = SimpleNamespace(strategy=SimpleNamespace(root_device=torch.device("cpu")), world_size=1, global_rank=0)
    assert datamodule._to_cuda() is False  # the trainer's device decides once there is one
    assert datamodule.val_dataloader().pin_memory is False


@pytest.mark.parametrize("positional, kept", [("sinusoidal", None), ("learned", 12)])
def test_evaluation_sources_are_cut_only_at_the_models_bound_as_translate_cuts_them(tmp_path, positional, kept):
    """data.max_len drops long training pairs; a validation source is read whole (sinusoids: no bound), or cut at
    what learned positions take less padding's rounding (model.max_positions 14, data.pad_multiple 4: 12), as
    `ablate translate` reads it, so a run's records and `ablate evaluate` of its checkpoint decode the same source.
    Its target is cut at data.max_len (teacher forcing); BLEU scores the raw reference."""
    from dataclasses import replace

    folder = tmp_path / "corpus"
    folder.mkdir()
    write_corpus(folder, "train", 300, seed=0)
    src, tgt = corpus(20, seed=1)
    src[3], tgt[3] = " ".join([src[3]] * 6), " ".join([tgt[3]] * 6)
    write(folder / "valid.en", src), write(folder / "valid.de", tgt)
    prefixes = dict(train_prefix=str(folder / "train"), valid_prefix=str(folder / "valid"))
    cfg = ExperimentConfig(data=data_cfg(tmp_path, max_len=10, pad_multiple=4, max_dropped_share=1.0, **prefixes))
    cfg = replace(cfg, model=replace(cfg.model, positional=positional, max_positions=14))
    dm = TranslationDataModule(cfg)
    dm.prepare_data()
    dm.setup("fit")
    ids = dm.tokenizer.encode([src[3]])[0]
    assert len(ids) > 14
    for batch in dm.val_dataloader():
        assert batch["src"].shape[1] <= (kept or batch["src"].shape[1])
        for i, src_ids, tgt_out in zip(batch["idx"].tolist(), batch["src"], batch["tgt_out"]):
            assert int((tgt_out != 0).sum()) <= 10  # the target: at most data.max_len with EOS
            if i == 3:
                real = src_ids[src_ids != 0].tolist()
                assert real == (ids if kept is None else ids[: kept - 1]) + [EOS_ID]


def test_a_training_split_every_pair_of_which_is_dropped_is_refused_whatever_the_allowed_share(tmp_path):
    """The data review: with data.max_dropped_share=1 a corpus longer than data.max_len everywhere trained 0 steps and
    ended as a finished run, exit 0, its summary the untrained model's."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    write_corpus(folder, "train", 300, seed=0)
    cfg = ExperimentConfig(data=data_cfg(tmp_path, max_len=1, max_dropped_share=1.0, train_prefix=str(folder / "train")))
    dm = TranslationDataModule(cfg)
    dm.prepare_data()
    with pytest.raises(ValueError, match=r"every one of the 300 training pairs would be dropped .* nothing to train on"):
        dm.setup("fit")

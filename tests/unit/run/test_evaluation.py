"""The end of a run without training: the fixed random validation subset (the same for every run seed, not the
shortest sentences), validation decoding only it, the evaluation record written from the validation loader (NLL
summing to the loss's NLL, hypotheses reused when they are of these weights), and averaging the last K step
checkpoints into avg.ckpt without touching last.ckpt or what a resume picks."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from helpers import tiny_experiment

from ablate.config import to_dict
from ablate.data.module import TranslationDataModule
from ablate.data.subset import fixed_subset
from ablate.evaluation.records import read_eval_file
from ablate.model.loss import translation_loss
from ablate.run.evaluation import scored_on, select_weights, val_subset, write_record
from ablate.run.resume_point import resume_checkpoint
from ablate.training.module import TranslationModule


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A tiny config, its datamodule (corpus of 40 validation pairs, tokenizer) and an untrained module."""
    tmp = tmp_path_factory.mktemp("evaluation")
    cfg = tiny_experiment(tmp, train={"max_len_b": 5})  # short outputs: an untrained model decodes fast
    dm = TranslationDataModule(cfg)
    dm.prepare_data()
    dm.setup("fit")
    return cfg, dm


def make_module(cfg, dm) -> TranslationModule:
    torch.manual_seed(0)
    return TranslationModule.from_config(cfg, dm.tokenizer.vocab_size).eval()


def stub_trainer(step: int = 30) -> SimpleNamespace:
    validated = []
    return SimpleNamespace(
        global_step=step,
        is_global_zero=True,
        strategy=SimpleNamespace(root_device=torch.device("cpu")),
        precision_plugin=SimpleNamespace(),
        validated=validated,
        validate=lambda module, datamodule, verbose: validated.append(module),
    )


def with_train(cfg, **train):
    return replace(cfg, train=replace(cfg.train, **train))


# --- the validation subset -----------------------------------------------------------------------------------------


def test_subset_is_a_fixed_random_sample_the_same_for_every_run_seed_and_not_the_shortest(setup):
    cfg, dm = setup
    one, two = replace(with_train(cfg, val_max_sentences=10), seed=1), replace(with_train(cfg, val_max_sentences=10), seed=2)
    chosen, subset = val_subset(one, 40)
    assert chosen == val_subset(two, 40)[0] and len(chosen) == 10 == len(set(chosen)) and chosen == sorted(chosen)
    assert subset == "random 10 of 40 (seed 0)"
    sources = dm.raw("valid")[0]
    shortest = sorted(range(40), key=lambda i: (len(sources[i].split()), i))[:10]
    assert chosen != sorted(shortest)
    assert val_subset(with_train(cfg, val_max_sentences=10, val_subset_seed=1), 40)[0] != chosen  # its own seed
    assert set(chosen) <= set(fixed_subset(40, 20, 0))  # a larger sample keeps the smaller one's sentences
    assert fixed_subset(40, 0, 0) is None and fixed_subset(40, 40, 0) is None and val_subset(cfg, 40) == (None, "all")


def test_validation_decodes_exactly_the_subset(setup):
    cfg, dm = setup
    cfg = with_train(cfg, val_max_sentences=7)
    module = make_module(cfg, dm)
    module.trainer = SimpleNamespace(datamodule=dm, sanity_checking=False, global_step=0, world_size=1)
    module.on_validation_epoch_start()
    with torch.no_grad():
        for batch in dm.val_dataloader():
            module.validation_step(batch, 0)
    assert sorted(module._hyps) == val_subset(cfg, 40)[0]


def test_validation_picks_the_subset_on_the_host_copy_and_decodes_the_same_rows(setup):
    """The datamodule marks val/bleu's rows before the batch moves to the device (nothing is read back there); the
    module decodes exactly those, as it does when it has to pick them itself."""
    cfg, _ = setup
    cfg = with_train(cfg, val_max_sentences=7)
    dm = TranslationDataModule(cfg)
    dm.prepare_data()
    dm.setup("fit")
    dm.trainer = SimpleNamespace(validating=True, sanity_checking=False)
    module = make_module(cfg, dm)
    module.trainer = SimpleNamespace(datamodule=dm, sanity_checking=False, global_step=0, world_size=1)
    module.on_validation_epoch_start()
    marked = []
    with torch.no_grad():
        for batch in dm.val_dataloader():
            batch = dm.on_before_batch_transfer(batch, 0)
            marked += batch["bleu"]["idx"]
            assert batch["bleu"]["idx"] == batch["idx"][batch["bleu"]["rows"]].tolist()
            module.validation_step(batch, 0)
    assert sorted(marked) == sorted(module._hyps) == val_subset(cfg, 40)[0]
    dm.trainer = SimpleNamespace(validating=False, sanity_checking=False)  # training batches carry no such field
    assert "bleu" not in dm.on_before_batch_transfer(next(iter(dm.val_dataloader())), 0)


def test_scored_on_names_the_split_and_sentences(setup):
    cfg, dm = setup
    assert scored_on(with_train(cfg, val_max_sentences=10), dm) == {
        "val/split": "valid",
        "val/sentences": 40,
        "val/bleu_sentences": 10,
        "val/bleu_subset": "random 10 of 40 (seed 0)",
    }
    assert scored_on(with_train(cfg, val_bleu=False), dm) == {"val/split": "valid", "val/sentences": 40}


# --- the evaluation record -----------------------------------------------------------------------------------------


def test_record_covers_the_split_and_its_nll_sums_to_the_validation_nll(setup, tmp_path):
    cfg, dm = setup
    module = make_module(cfg, dm)
    module.decoded = (30, {i: [5 + i % 3] for i in range(40)})  # the last validation decoded these weights at step 30
    record = write_record(cfg, stub_trainer(30), module, dm, tmp_path, "final weights")
    saved = read_eval_file(tmp_path / "eval" / "valid.json", "valid")
    assert record == json.loads((tmp_path / "eval" / "valid.json").read_text(encoding="utf-8"))  # what it wrote, not re-read
    assert record["sentences"] == saved.sentences == 40 and saved.indices == list(range(40)) and saved.subset == "all"
    assert saved.checkpoint == "final weights" and saved.references == dm.raw("valid")[1]
    assert saved.hypotheses == dm.tokenizer.decode([[5 + i % 3] for i in range(40)])  # reused, not decoded again
    nll = tokens = 0.0
    with torch.no_grad():
        for batch in dm.val_dataloader():
            _, n, t = translation_loss(module.model, batch, 0.0)
            nll, tokens = nll + n.item(), tokens + t.item()
    assert sum(saved.nll) == pytest.approx(nll, rel=1e-5) and sum(saved.tokens) == tokens


def test_record_on_a_subset_decodes_the_weights_it_scores(setup, tmp_path):
    cfg, dm = setup
    cfg = with_train(cfg, val_max_sentences=6, val_bleu=False)
    module = make_module(cfg, dm)
    module.decoded = (20, {i: [5] for i in range(40)})  # decoded at an earlier step: not these weights
    write_record(cfg, stub_trainer(30), module, dm, tmp_path, "avg of last 2")
    saved = read_eval_file(tmp_path / "eval" / "valid.json")
    assert saved.indices == val_subset(cfg, 40)[0] and saved.subset == "random 6 of 40 (seed 0)"
    assert saved.checkpoint == "avg.ckpt" and len(saved.hypotheses) == len(saved.nll) == len(saved.tokens) == 6
    assert saved.hypotheses != dm.tokenizer.decode([[5]] * 6)


# --- the last-K average --------------------------------------------------------------------------------------------


def save_step(out: Path, module: TranslationModule, cfg, name: str, step: int, shift: float) -> Path:
    state = {k: v + shift if v.is_floating_point() else v for k, v in module.state_dict().items()}
    ckpt = {
        "state_dict": state,
        "hyper_parameters": {"config": to_dict(cfg), "vocab_size": module.hparams["vocab_size"]},
        "global_step": step,
        "optimizer_states": [{"state": {}}],
    }
    path = out / "checkpoints" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(ckpt, path)
    return path


def test_final_average_writes_avg_ckpt_loads_and_validates_it_and_leaves_last_ckpt_alone(setup, tmp_path):
    cfg, dm = setup
    cfg = with_train(cfg, final_average=2)
    module = make_module(cfg, dm)
    name = next(k for k, v in module.state_dict().items() if v.is_floating_point())
    base = module.state_dict()[name].clone()
    for step, shift in ((10, 1.0), (20, 2.0), (30, 4.0)):
        save_step(tmp_path, module, cfg, f"step={step}.ckpt", step, shift)
    last = save_step(tmp_path, module, cfg, "last.ckpt", 30, 4.0).read_bytes()
    trainer = stub_trainer(30)

    assert select_weights(cfg, trainer, module, dm, tmp_path) == {
        "selected": "avg of last 2",
        "averaged_from": ["step=20.ckpt", "step=30.ckpt"],
    }
    assert torch.allclose(module.state_dict()[name], base + 3.0)  # the mean of +2 and +4
    assert trainer.validated == [module]  # the summary's `last` metrics are the average's
    avg = torch.load(tmp_path / "checkpoints" / "avg.ckpt", weights_only=True)
    assert torch.allclose(avg["state_dict"][name], base + 3.0) and "optimizer_states" not in avg
    assert (tmp_path / "checkpoints" / "last.ckpt").read_bytes() == last
    assert resume_checkpoint(tmp_path).name in ("last.ckpt", "step=30.ckpt")  # never the weights-only average


def test_without_final_average_the_final_weights_are_reported(setup, tmp_path):
    cfg, dm = setup
    trainer = stub_trainer()
    assert select_weights(cfg, trainer, make_module(cfg, dm), dm, tmp_path) == {"selected": "final weights"}
    assert trainer.validated == [] and not (tmp_path / "checkpoints" / "avg.ckpt").exists()


def test_the_average_stops_at_a_checkpoint_of_another_model_or_seed_or_one_that_does_not_load(tmp_path):
    from ablate.run.evaluation import _this_model

    def ckpt(step: int, dropout: float, seed: int = 1) -> Path:
        path = tmp_path / f"step={step}.ckpt"
        torch.save({"state_dict": {}, "hyper_parameters": {"config": {"model": {"dropout": dropout}, "seed": seed}}}, path)
        return path

    run = lambda dropout, seed=1: {"model": {"dropout": dropout}, "seed": seed}  # noqa: E731

    paths = [ckpt(10, 0.1), ckpt(20, 0.3), ckpt(30, 0.3), ckpt(40, 0.3)]
    assert _this_model(paths, run(0.3), 5) == paths[1:]  # before the forced resume: another model
    assert _this_model(paths, run(0.3), 2) == paths[2:]
    paths[2].write_bytes(b"truncated")  # a kill mid-write that resume skipped past
    assert _this_model(paths, run(0.3), 5) == paths[3:]
    torch.save({"state_dict": {"w": torch.randn(50_000)}, "hyper_parameters": {"config": run(0.3)}}, paths[2])
    data = bytearray(paths[2].read_bytes())
    data[len(data) // 2 : len(data) // 2 + 4096] = b"\xff" * 4096  # damaged in place: loads, but fails its checksum
    paths[2].write_bytes(bytes(data))
    assert _this_model(paths, run(0.3), 5) == paths[3:]  # averaging it in would fail the run after training
    # a resume with --force seed=2: average_checkpoints refuses the mix, so the average stops there (it failed the run)
    later = [ckpt(50, 0.3, seed=2), ckpt(60, 0.3, seed=2)]
    assert _this_model([paths[3], *later], run(0.3, seed=2), 5) == later

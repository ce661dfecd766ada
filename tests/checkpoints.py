"""Real tiny checkpoints as `ablate train` writes their fields, for the commands that load one (translate, evaluate,
average): weights of a 1+1 layer model, hyper_parameters with the whole config, the SentencePiece model's bytes."""

from __future__ import annotations

from pathlib import Path

import torch
from helpers import tiny_model, write_corpus

from ablate.config import DataConfig, ExperimentConfig, to_dict
from ablate.model import build_transformer


def tiny_checkpoint(folder: Path, data: dict | None = None, **model) -> dict:
    """A checkpoint dict (torch.save it) of an untrained model over a 64-token vocabulary trained on a write_corpus()
    corpus in `folder`; `model` overrides tiny_model's settings (positional="learned", max_positions=...), `data`
    the saved data section's (max_len=...)."""
    from ablate.data.tokenizer import load_or_train_tokenizer

    corpus = write_corpus(Path(folder) / "corpus", n_valid=1, n_test=1)
    tok = DataConfig(dataset="files", vocab_size=64, cache_dir=str(Path(folder) / "tok"))
    spm = load_or_train_tokenizer(tok, corpus / "train.en", corpus / "train.de").path.read_bytes()
    model_cfg = tiny_model(enc_layers=1, dec_layers=1, **model)
    with torch.random.fork_rng():  # the same weights whatever ran before (test order, xdist), the caller's RNG untouched
        torch.manual_seed(0)
        weights = build_transformer(model_cfg, 64).state_dict()
    return {
        "state_dict": {f"model.{k}": v for k, v in weights.items()},
        "hyper_parameters": {"config": to_dict(ExperimentConfig(model=model_cfg, data=DataConfig(**(data or {})))), "vocab_size": 64},
        "tokenizer_model": spm,
        "global_step": 10,
    }

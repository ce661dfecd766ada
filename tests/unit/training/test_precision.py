"""train.precision in one place: the matmul precision that goes with it, the arithmetic MFU divides by, and the
autocast every decode outside the Trainer runs under (ablate.training.precision)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from helpers import write_corpus

from ablate.config import DataConfig, ExperimentConfig, ModelConfig, TrainConfig
from ablate.data.tokenizer import load_or_train_tokenizer
from ablate.inference.translation import translate
from ablate.model import build_transformer
from ablate.training.precision import Precision


@pytest.mark.parametrize(
    ("precision", "configured", "expected"),
    [
        ("32", None, "highest"),
        ("bf16-mixed", None, "high"),
        ("16-mixed", None, "high"),
        ("32", "high", "high"),
        ("bf16-mixed", "highest", "highest"),
    ],
)
def test_matmul_precision_follows_train_precision_unless_configured(precision, configured, expected):
    assert Precision.of(SimpleNamespace(precision=precision, matmul_precision=configured)).matmul == expected


def test_the_arithmetic_and_parameter_dtype_of_each_precision():
    made = [Precision.of(TrainConfig(precision=p)) for p in ("bf16-mixed", "16-mixed", "64", "32")]
    assert [p.arithmetic() for p in made] == ["bf16", "fp16", "fp64", "fp32"]
    assert Precision.of(TrainConfig(precision="32", matmul_precision="high")).arithmetic() == "tf32"
    assert [p.params_dtype for p in made] == [torch.float32, torch.float32, torch.float64, torch.float32]
    assert [p.half for p in made] == [torch.bfloat16, torch.float16, None, None]


@pytest.mark.parametrize(("precision", "dtype"), [("32", None), ("bf16-mixed", torch.bfloat16)])
def test_decoding_runs_in_the_runs_arithmetic_and_restores_the_process(precision, dtype):
    before = torch.get_float32_matmul_precision()
    t = TrainConfig(precision=precision)
    with Precision.of(t).decoding(torch.device("cpu")):
        assert torch.get_float32_matmul_precision() == Precision.of(t).matmul
        assert torch.is_autocast_enabled("cpu") == (dtype is not None)
        if dtype is not None:
            assert torch.get_autocast_dtype("cpu") == dtype
    assert torch.get_float32_matmul_precision() == before and not torch.is_autocast_enabled("cpu")


def test_translate_decodes_a_bf16_trained_model_under_bf16_autocast(tmp_path):
    """`ablate translate`/`evaluate`/`table --split test` decode as training validated: bf16 matmuls for a bf16 run."""
    corpus = write_corpus(tmp_path / "corpus", n_valid=1, n_test=1)
    tokenizer = load_or_train_tokenizer(
        DataConfig(dataset="files", vocab_size=64, cache_dir=str(tmp_path / "cache")), corpus / "train.en", corpus / "train.de"
    )
    seen = {}
    for precision in ("32", "bf16-mixed"):
        cfg = ExperimentConfig(
            model=ModelConfig(enc_layers=1, dec_layers=1, d_model=16, d_ff=32, heads=2, dropout=0.0),
            train=TrainConfig(beam_size=2, max_len_b=4, precision=precision),
        )
        model = build_transformer(cfg.model, tokenizer.vocab_size).eval()
        dtypes = seen.setdefault(precision, set())
        for layer in model.modules():
            if isinstance(layer, torch.nn.Linear):
                layer.register_forward_hook(lambda m, args, out, into=dtypes: into.add(out.dtype))
        assert translate(model, tokenizer, ["the dog runs"], cfg)
    assert seen["32"] == {torch.float32} and torch.bfloat16 in seen["bf16-mixed"]

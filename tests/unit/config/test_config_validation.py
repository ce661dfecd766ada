"""Validation: every problem names the key, the bad value and what is allowed, and all are reported at once."""

from __future__ import annotations

import pytest

from ablate.config import ConfigError
from ablate.experiment import load_config
from ablate.model import POSITIONAL, compatible, compatible_positionals

BOUNDED = sorted(n for n, c in POSITIONAL.items() if c.bounded_length)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["model.heads=7"], r"model.d_model=512 is not divisible by model.heads=7"),
        (["model.kv_heads=3"], r"model.kv_heads=3 must divide model.heads=8"),
        (["model.dropout=-0.1"], r"model.dropout=-0.1 must be in \[0, 1\)"),
        (["model.attention=addtive"], r"model.attention='addtive' is not one of .*\(did you mean 'additive'\?\)"),
        (["model.positional=rope_"], r"model.positional='rope_' is not one of \[.*'sinusoidal'"),
        (["model.attention_scaling=sqrt"], r"model.attention_scaling='sqrt'"),
        (["model.activation=relu6"], r"model.activation='relu6' is not one of \['relu', 'gelu'\] \(did you mean 'relu'\?\)"),
        (["train.beam_size=0"], r"train.beam_size=0 must be >= 1"),
        (["train.precision=8"], r"train.precision='8'"),
        (["data.max_tokens=10"], r"data.max_tokens=10 must be >= data.max_len"),
        (["model.attention_window=0"], r"model.attention_window=0 must be >= 1"),
        (["seed=-1"], r"seed=-1 must be from 0 to 4294967295"),
        (["seed=4294967296"], r"seed=4294967296 must be from 0 to 4294967295"),
        (["sweep.trial=-1"], r"sweep.trial=-1 must be >= 0"),
        (["train.eps=0"], r"train.eps=0.0 must be > 0"),
        (["train.lr_scale=1e308"], r"train.lr_scale=1e\+308 must be from -3.4e\+38 to 3.4e\+38"),
        (["model.init_std=1e308"], r"model.init_std=1e\+308 must be > 0 and at most 3.4e\+38"),
        (["train.devices=100000"], r"train.devices=100000 must be from 0 to 1024"),
        (["data.num_workers=100000"], r"data.num_workers=100000 must be from 0 to 1024"),
        (["data.pad_multiple=512"], r"data.pad_multiple=512 must be at most data.max_len=256"),
        (["train.max_len_b=-1"], r"train.max_len_a=1.0 and train.max_len_b=-1 must be >= 0"),
        (["train.max_len_b=1000000000000"], r"allow outputs of 1e\+12 tokens for data.max_len=256; at most 10,000"),
        (["train.beam_size=10000"], r"train.beam_size=10000 must be at most data.vocab_size=8000"),
        (
            ["model.d_model=1000000000000"],
            r"the model would hold about 7.2e\+25 weights \(.*model.d_model=1000000000000.*\); at most 1e\+11",
        ),
        (["model.enc_layers=1000000000000"], r"the model would hold about .* weights \(model.enc_layers=1000000000000"),
    ],
)
def test_impossible_combinations_fail_naming_the_key(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(overrides=overrides)


def test_all_problems_reported_at_once():
    with pytest.raises(ConfigError) as err:
        load_config(overrides=["model.heads=7", "model.dropout=2.0", "train.warmup=0"])
    text = str(err.value)
    assert "model.heads=7" in text and "model.dropout=2.0" in text and "train.warmup=0" in text


def test_d_k_override_lifts_divisibility():
    cfg = load_config(overrides=["model.heads=7", "model.d_k=64", "model.d_v=64"])
    assert cfg.model.heads == 7
    assert cfg.model.head_dims == (64, 64)


def test_kernel_without_bias_support_lists_exactly_the_compatible_encodings():
    with pytest.raises(ConfigError) as err:
        load_config(overrides=["model.attention=linear", "model.positional=alibi"])
    assert (f"model.attention='linear' cannot add the position biases of model.positional='alibi'; "
            f"choose one of {compatible_positionals('linear')}") in str(err.value)  # fmt: skip
    assert sorted(compatible_positionals("linear")) == sorted(n for n, c in POSITIONAL.items() if not c.adds_bias)


@pytest.mark.parametrize("positional", BOUNDED)
def test_bounded_positions_must_hold_the_longest_pair(positional):
    with pytest.raises(ConfigError, match=rf"data.max_len=300 exceeds model.max_positions=256.*'{positional}'"):
        load_config(overrides=[f"model.positional={positional}", "model.max_positions=256", "data.max_len=300"])
    load_config(overrides=[f"model.positional={positional}", "model.max_positions=256", "data.max_len=256"])


def test_unbounded_positions_take_any_max_len():
    unbounded = next(n for n, c in POSITIONAL.items() if not c.bounded_length)
    load_config(overrides=[f"model.positional={unbounded}", "model.max_positions=16", "data.max_len=300"])


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["train.lr_scale=inf"], r"train.lr_scale=inf is not a finite number"),
        (["train.lr_scale=nan"], r"train.lr_scale=nan is not a finite number"),
        (["train.betas=[0.9,nan]"], r"train.betas\[1\]=nan is not a finite number"),
        (["model.init_std=-inf"], r"model.init_std=-inf is not a finite number"),
        (["data.character_coverage=nan"], r"data.character_coverage=nan is not a finite number"),
        (["train.peak_tflops=inf"], r"train.peak_tflops=inf is not a finite number"),
    ],
)
def test_non_finite_numbers_fail_naming_the_key(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config([], overrides)


@pytest.mark.parametrize("sample", [-5, 1, 50, 100])
def test_a_tokenizer_sample_sentencepiece_cannot_take_fails_before_any_work(sample):
    with pytest.raises(ConfigError, match=rf"data.tokenizer_sample={sample} must be 0 \(all sentences\) or > 100"):
        load_config([], [f"data.tokenizer_sample={sample}"])
    for fine in (0, 101):
        assert load_config([], [f"data.tokenizer_sample={fine}"]).data.tokenizer_sample == fine


def test_non_finite_numbers_in_a_yaml_file_fail_too(tmp_path):
    f = tmp_path / "exp.yaml"
    f.write_text("train:\n  label_smoothing: .nan\n  eps: .inf\n")
    with pytest.raises(ConfigError, match=r"train.label_smoothing=nan is not a finite number") as err:
        load_config([f])
    assert "train.eps=inf is not a finite number" in str(err.value)


def test_the_weights_estimate_bounds_the_real_count_from_above():
    """The validator's size bound (MAX_WEIGHTS) is checked on an estimate: at least the real count, never far above."""
    from ablate.config import ModelConfig
    from ablate.config.validation import weights_estimate
    from ablate.model import build_transformer

    structures = [{}, {"kv_heads": 2}, {"d_k": 100, "d_v": 30}, {"tie_embeddings": "none"}]
    for settings in structures + [{"positional": name} for name in POSITIONAL if compatible("scaled_dot_product", name)]:
        cfg = ModelConfig(**{"d_model": 64, "d_ff": 128, "heads": 4, "max_positions": 128, **settings})
        model = build_transformer(cfg, 500)
        real = sum(p.numel() for p in model.parameters()) + sum(b.numel() for b in model.buffers())
        assert real <= weights_estimate(cfg, 500) < 4 * real, settings

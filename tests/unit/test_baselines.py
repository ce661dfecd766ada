"""The benchmark baselines must compute ablate's function, or the speed ratios compare different work."""

import sys
from pathlib import Path

import pytest
import torch

from ablate.evaluation.search import beam_search, greedy_decode
from ablate.experiment import load_config
from ablate.model import build_transformer

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
from baselines import MarianBaseline, TorchTransformer  # noqa: E402

V = 60


@pytest.fixture
def ablate_model():
    cfg = load_config([], ["model.d_model=32", "model.d_ff=48", "model.heads=4", "model.enc_layers=2",
                           "model.dec_layers=2", "model.max_positions=64"])  # fmt: skip
    torch.manual_seed(0)
    return cfg, build_transformer(cfg.model, V).eval()


def batch():
    g = torch.Generator().manual_seed(1)
    src, tgt = torch.randint(4, V, (3, 9), generator=g), torch.randint(4, V, (3, 7), generator=g)
    src[0, 6:] = 0
    tgt[:, 0] = 2
    tgt[2, 4:] = 0
    return src, tgt


def needs_marian() -> None:
    """The bench extra's transformers, with its PyTorch side on: a transformers newer than the torch installed (the
    newest asks torch >= 2.6; ablate's floor is 2.5) loads without its models."""
    transformers = pytest.importorskip("transformers", reason="the MarianMT baseline needs the bench extra")
    if not transformers.is_torch_available():
        pytest.skip(f"transformers {transformers.__version__} does not use torch {torch.__version__}: no MarianMT here")


@pytest.mark.parametrize("name", ["nn.Transformer", "MarianMT"])
def test_baseline_with_copied_weights_gives_ablates_logits(ablate_model, name):
    if name == "MarianMT":
        needs_marian()
    cfg, model = ablate_model
    baseline = {"nn.Transformer": TorchTransformer, "MarianMT": MarianBaseline}[name](cfg.model, V)
    with torch.no_grad():
        before = baseline(*batch())
    baseline.copy_from(model)
    baseline.eval()
    src, tgt = batch()
    keep = tgt != 0
    with torch.no_grad():
        ours, theirs = model(src, tgt)[keep], baseline(src, tgt)[keep]
    assert (before[keep] - ours).abs().max() > 1e-2  # the copy is what made them agree
    torch.testing.assert_close(theirs, ours, atol=1e-4, rtol=1e-4)


def test_marian_generate_matches_ablate_decoding(ablate_model):
    needs_marian()
    cfg, model = ablate_model
    marian = MarianBaseline(cfg.model, V)
    marian.copy_from(model)
    marian.eval()
    src, _ = batch()
    # ablate's limit a * len + b counts the EOS it forces; Marian's max_new_tokens does not.
    greedy = greedy_decode(model, src, max_len_a=0.0, max_len_b=12)
    assert marian.generate(src, beam=1, max_new_tokens=11, alpha=0.6) == greedy
    beams = beam_search(model, src, beam=4, alpha=0.0, max_len_a=0.0, max_len_b=12)
    assert marian.generate(src, beam=4, max_new_tokens=11, alpha=0.0) == beams

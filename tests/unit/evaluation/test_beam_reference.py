"""The device-resident search against the pre-change one (tests/reference_beam.py) on a briefly trained model, and its
host syncs: one per decoding step, where the old search made several plus per-sentence Python work (counted by name
on CPU; on a GPU, `-m gpu`, by torch's sync detector)."""

from __future__ import annotations

import pytest
import torch
from helpers import VOCAB, random_batch, tiny_model
from reference_beam import beam_search as reference_beam_search
from reference_beam import greedy_decode as reference_greedy
from torch.utils._python_dispatch import TorchDispatchMode

from ablate.evaluation.scores import bleu
from ablate.evaluation.search import beam_search, greedy_decode
from ablate.model import build_transformer
from ablate.model.tokens import BOS_ID, EOS_ID, PAD_ID

pytestmark = pytest.mark.slow  # a model trained, 256 sentences decoded twice: seconds; the default set stays under a minute

SENTENCES, BATCH = 256, 64


def reversal_pairs(n: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random sources of 3-9 tokens and their reversals: src (N, 9), tgt_in (N, 10) and tgt_out (N, 10), padded."""
    lengths = torch.randint(3, 10, (n,), generator=gen).tolist()
    src, tgt_in, tgt_out = (torch.full((n, w), PAD_ID) for w in (9, 10, 10))
    for i, length in enumerate(lengths):
        s = torch.randint(4, VOCAB, (length,), generator=gen)
        src[i, :length], tgt_in[i, 0], tgt_in[i, 1 : length + 1] = s, BOS_ID, s.flip(0)
        tgt_out[i, :length], tgt_out[i, length] = s.flip(0), EOS_ID
    return src, tgt_in, tgt_out


@pytest.fixture(scope="module")
def trained():
    """A tiny model after 200 Adam steps on the reversal task: right on some sentences, wrong, shorter or longer
    (up to the length limit) on others, so the searches have real choices to agree on. ~2 s on one core."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    model = build_transformer(tiny_model(enc_layers=1, dec_layers=1, d_model=32, d_ff=64), VOCAB)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    for _ in range(200):
        src, tgt_in, tgt_out = reversal_pairs(32, gen)
        loss = torch.nn.functional.cross_entropy(model(src, tgt_in).flatten(0, 1), tgt_out.flatten(), ignore_index=PAD_ID)
        opt.zero_grad()
        loss.backward()
        opt.step()
    src, _, tgt_out = reversal_pairs(SENTENCES, gen)
    return model.eval(), src, [row[row > EOS_ID].tolist() for row in tgt_out]


def decode(search, model, src, **kw) -> list[list[int]]:
    """Batches of BATCH unsorted sentences, so sentences leave each batch at many different steps."""
    return [h for i in range(0, len(src), BATCH) for h in search(model, src[i : i + BATCH], **kw)]


def joined(hyps: list[list[int]]) -> list[str]:
    return [" ".join(map(str, h)) for h in hyps]


def test_beam_search_gives_the_pre_change_hypotheses_and_bleu(trained):
    model, src, refs = trained
    kw = dict(beam=4, alpha=0.6, max_len_a=1.0, max_len_b=3)
    new, old = decode(beam_search, model, src, **kw), decode(reference_beam_search, model, src, **kw)
    same = sum(a == b for a, b in zip(new, old))
    assert same >= 0.99 * SENTENCES, f"{SENTENCES - same} of {SENTENCES} hypotheses differ"
    new_bleu, old_bleu = bleu(joined(new), joined(refs)).score, bleu(joined(old), joined(refs)).score
    assert abs(new_bleu - old_bleu) <= 0.1
    # The model is neither untrained nor perfect: a test it could pass by echoing one answer would prove nothing.
    assert 10 < old_bleu < 90 and len({tuple(h) for h in old}) > 0.9 * SENTENCES
    at_limit = sum(len(h) == int((s != PAD_ID).sum()) + 2 for h, s in zip(old, src))  # forced EOS: |src| + 3 with EOS
    assert 0 < at_limit < SENTENCES
    assert any(len(h) < len(r) for h, r in zip(old, refs))  # and some end early


def test_greedy_gives_the_pre_change_hypotheses(trained):
    model, src, _ = trained
    assert decode(greedy_decode, model, src, max_len_a=1.0, max_len_b=3) == decode(reference_greedy, model, src, max_len_a=1.0, max_len_b=3)


def test_beam_search_honours_the_cap_as_the_reference_does(trained):
    model, src, _ = trained
    new = decode(beam_search, model, src[:BATCH], beam=3, max_len_a=1.0, max_len_b=50, cap=6)
    assert new == decode(reference_beam_search, model, src[:BATCH], beam=3, max_len_a=1.0, max_len_b=50, cap=6)
    assert max(len(h) for h in new) == 5


class Syncs(TorchDispatchMode):
    """Counts the ops that make the host wait for the device: reading a value (`item`, `bool`, `int`), `nonzero`,
    `masked_select` and indexing with a boolean mask, whose result size depends on the data."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        masks = name.startswith("index") and any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] or []))
        self.count += name in ("_local_scalar_dense", "nonzero", "masked_select") or masks
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("search", [beam_search, greedy_decode], ids=["beam", "greedy"])
def test_one_host_sync_per_decoding_step(search, monkeypatch):
    model = build_transformer(tiny_model(), VOCAB).eval()
    src, _ = random_batch(b=6, s=8)
    steps = 10  # every sentence's limit: max_len_b with max_len_a 0
    tolist = []
    real = torch.Tensor.tolist
    monkeypatch.setattr(torch.Tensor, "tolist", lambda self: tolist.append(self.shape) or real(self))
    kw = dict(max_len_a=0.0, max_len_b=steps) | ({"beam": 4} if search is beam_search else {})
    with Syncs() as syncs:
        search(model, src, **kw)
    assert syncs.count <= 1 + steps  # the loop's length, then one count of live sentences per step
    assert len(tolist) == 1  # the hypotheses come to the host once
    with Syncs() as old:
        (reference_beam_search if search is beam_search else reference_greedy)(model, src, **kw)
    if search is beam_search:
        assert old.count > 2 * steps  # what the count would catch: the pre-change search syncs several times a step


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_a_gpu_one_synchronisation_per_step_and_the_pre_change_hypotheses(trained):
    """torch's own detector counts every synchronisation of a batch: the loop's length, one per step, the results."""
    import copy
    import warnings

    model, src, _ = trained
    model, src = copy.deepcopy(model).cuda(), src[:BATCH].cuda()
    steps = int((src != PAD_ID).sum(1).max()) + 3  # max_len_a 1, max_len_b 3
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            new = beam_search(model, src, beam=4, max_len_a=1.0, max_len_b=3)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    syncs = [w for w in caught if "synchroniz" in str(w.message)]
    assert len(syncs) <= steps + 2, "\n".join(str(w.message) for w in syncs)
    assert new == reference_beam_search(model, src, beam=4, max_len_a=1.0, max_len_b=3)

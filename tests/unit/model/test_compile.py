"""torch.compile of the training loss: one graph, no graph break, no recompile per batch shape (issue 30, item 5).

Compiled with backend="eager", dynamo traces exactly what inductor would get, in a fraction of the time: a graph
break (a host read, a data-dependent shape) fails `fullgraph=True`, and dynamo's counters say how many graphs it
made."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import tiny_model

from ablate.data.batching import collate
from ablate.model import build_transformer
from ablate.model.loss import translation_loss

torch_dynamo = pytest.importorskip("torch._dynamo")


def _batch(rng: np.random.Generator, rows: int, src_max: int, tgt_max: int) -> dict:
    samples = [
        (i, rng.integers(4, 32, rng.integers(2, src_max + 1)), rng.integers(4, 32, rng.integers(2, tgt_max + 1))) for i in range(rows)
    ]
    return collate(samples)


def _compiled_loss(model, dynamic):
    def per_token_loss(batch):
        loss, _, ntok = translation_loss(model, batch, 0.1)
        return loss / ntok

    return torch.compile(per_token_loss, fullgraph=True, backend="eager", dynamic=dynamic), per_token_loss


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch_dynamo.reset()
    torch_dynamo.utils.counters.clear()
    yield
    torch_dynamo.reset()


@pytest.mark.slow  # torch.compile tracing: seconds; the default set stays under a minute
def test_training_loss_compiles_as_one_graph_with_the_eager_result_and_gradients():
    torch.manual_seed(0)
    model = build_transformer(tiny_model(), 32)
    compiled, eager = _compiled_loss(model, dynamic=None)
    batch = _batch(np.random.default_rng(0), 4, 9, 9)
    loss = compiled(batch)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    expected = eager(batch)
    expected.backward()
    torch.testing.assert_close(loss, expected)
    for n, p in model.named_parameters():
        torch.testing.assert_close(grads[n], p.grad, msg=n)
    counters = torch_dynamo.utils.counters
    assert counters["stats"]["unique_graphs"] == 1 and not counters["graph_break"]


@pytest.mark.slow  # ten shapes, three traces: ~10 s
def test_varying_batch_shapes_do_not_recompile_per_shape():
    """Token-bucketed batches change (B, S, T) and the count of real targets every step; after dynamo marks the
    varying sizes dynamic (a recompile or two), new shapes reuse the graph. (data.pad_multiple only rounds S and T:
    the real-target count varies inside a bucket by design, so static shapes would recompile per batch.)"""
    torch.manual_seed(0)
    model = build_transformer(tiny_model(), 32)
    compiled, _ = _compiled_loss(model, dynamic=None)
    rng = np.random.default_rng(1)
    shapes = set()
    for rows, longest in [(4, 6), (4, 9), (6, 5), (3, 12), (8, 4), (5, 10), (7, 7), (2, 14), (6, 11), (3, 3)]:
        batch = _batch(rng, rows, longest, longest)
        shapes.add((tuple(batch["src"].shape), tuple(batch["tgt_in"].shape)))
        compiled(batch).backward()
    counters = torch_dynamo.utils.counters
    assert len(shapes) >= 8 and counters["stats"]["unique_graphs"] <= 3 and not counters["graph_break"]

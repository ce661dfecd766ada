"""Per-sentence scores of a split: beam-search output of a batch's rows and each reference's teacher-forced NLL (the
per-sentence records of `ablate.evaluation.records`; BLEU as in Sec. 6.1), on the sentences ablate.data.subset picks.

Plain functions with no Lightning import: validation (`ablate.training.module`), the end-of-run record (`ablate.run.evaluation`)
and `ablate table --split test` (`ablate.table.checkpoint_scoring`) share them, so all three score sentences the same way.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ablate.data.batching import collate
from ablate.data.subset import filled_width
from ablate.evaluation.search import beam_search
from ablate.model import max_length
from ablate.model.loss import upcast
from ablate.model.tokens import PAD_ID

BATCH_SENTENCES = 64


def decode_rows(model, src: Tensor, cfg, width: int | None = None) -> list[list[int]]:
    """Beam search on `src` (B, S) with the run's decoding settings (`cfg.train`), as validation decodes for val/bleu.

    Columns that are padding in every row (left behind when rows of a batch are left out) are cut first: they only
    cost time. A caller that knows how many columns the rows fill (`width`, from `host_rows`) spares the device read.
    """
    t = cfg.train
    width = filled_width(src) if width is None else width
    src = src[:, :width] if width else src  # (B, S')
    return beam_search(model, src, t.beam_size, t.length_penalty, t.max_len_a, t.max_len_b, max_length(cfg.model))


@torch.no_grad()
def sentence_nll(model, batch: dict) -> tuple[Tensor, Tensor]:
    """Each sentence's summed NLL (nats) of its reference, teacher-forced, without label smoothing, and its number
    of target tokens (EOS included): (B,) and (B,). Sums to `ablate.model.loss.translation_loss`'s NLL over the batch."""
    logits = model(batch["src"], batch["tgt_in"])  # (B, T, V)
    logp = torch.log_softmax(upcast(logits), dim=-1)  # (B, T, V), in the run's own precision when it is fp64
    keep = batch["tgt_out"] != PAD_ID  # (B, T)
    nll = -logp.gather(-1, batch["tgt_out"].unsqueeze(-1)).squeeze(-1)  # (B, T)
    return (nll * keep).sum(dim=1), keep.sum(dim=1)


def split_nll(model, encoded, device: torch.device) -> tuple[list[float], list[int]]:
    """`sentence_nll` of every pair of an `EncodedSplit`, in its order; batches of similar length."""
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i][2]))
    nll, tokens = [0.0] * len(encoded), [0] * len(encoded)
    for start in range(0, len(order), BATCH_SENTENCES):
        rows = order[start : start + BATCH_SENTENCES]
        batch = collate([encoded[i] for i in rows])
        s, n = sentence_nll(model, {k: batch[k].to(device) for k in ("src", "tgt_in", "tgt_out")})
        for i, a, b in zip(rows, s.tolist(), n.tolist()):
            nll[i], tokens[i] = a, int(b)
    return nll, tokens

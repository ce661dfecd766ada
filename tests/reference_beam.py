"""The pre-change greedy and beam search of `ablate.evaluation.search` (git 33d9dc2), frozen as an oracle for the new ones.

Kept verbatim below this docstring: it syncs with the host every step (nonzero, per-sentence Python bookkeeping,
boolean indexing), which issue 30 removed from `ablate.evaluation.search`, so tests can check that the device-resident search
returns the same hypotheses. Do not "fix" it. Sec. 6.1: beam 4, length penalty 0.6, max len = src + 50.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ablate.model.tokens import BOS_ID, EOS_ID, PAD_ID
from ablate.model.transformer import Transformer, reorder_cache


def length_penalty(length: Tensor | int, alpha: float) -> Tensor | float:
    """GNMT's ((5 + |Y|) / 6)^alpha (Wu et al. 2016), the paper's length penalty."""
    return ((5.0 + length) / 6.0) ** alpha


def max_lengths(src: Tensor, a: float, b: int, cap: int | None = None) -> Tensor:
    """Per-sentence output limit a * |source| + b (|source| counts non-pad tokens), EOS included."""
    limit = (a * (src != PAD_ID).sum(1).float() + b).long().clamp(min=1)
    return limit if cap is None else limit.clamp(max=cap)


@torch.no_grad()
def greedy_decode(model: Transformer, src: Tensor, max_len_a: float = 1.0, max_len_b: int = 50, cap: int | None = None) -> list[list[int]]:
    """Argmax decoding; returns token ids without BOS/EOS, one list per source row."""
    memory, src_mask = model.encode(src)
    limits = max_lengths(src, max_len_a, max_len_b, cap)
    b = src.size(0)
    tokens = torch.full((b, 1), BOS_ID, dtype=torch.long, device=src.device)
    done = torch.zeros(b, dtype=torch.bool, device=src.device)
    cache = model.new_cache()
    out: list[Tensor] = []
    for t in range(int(limits.max())):
        logits = model.decode(tokens, memory, src_mask, cache, start=t)[:, -1]  # (B, V)
        logits[:, PAD_ID] = logits[:, BOS_ID] = float("-inf")
        nxt = logits.argmax(-1)
        nxt = torch.where(limits <= t + 1, torch.full_like(nxt, EOS_ID), nxt)  # forced EOS at the limit
        nxt = torch.where(done, torch.full_like(nxt, PAD_ID), nxt)
        out.append(nxt)
        done |= nxt == EOS_ID
        if done.all():
            break
        tokens = nxt.unsqueeze(1)
    seqs = torch.stack(out, 1).tolist()
    return [[tok for tok in row if tok not in (PAD_ID, EOS_ID)] for row in seqs]


@torch.no_grad()
def beam_search(
    model: Transformer, src: Tensor, beam: int = 4, alpha: float = 0.6, max_len_a: float = 1.0, max_len_b: int = 50, cap: int | None = None
) -> list[list[int]]:
    """Batched beam search; returns the best hypothesis per row (ids without BOS/EOS).

    Each step ranks the 2K best extensions of the K live beams: EOS extensions among the top K
    become finished hypotheses (scored by log-prob / length penalty), the best K others live on.
    A sentence stops when K hypotheses have finished or its length limit forces EOS.
    """
    if beam == 1:
        return greedy_decode(model, src, max_len_a, max_len_b, cap)
    device, n, k = src.device, src.size(0), beam
    memory, src_mask = model.encode(src)
    memory, src_mask = memory.repeat_interleave(k, 0), src_mask.repeat_interleave(k, 0)  # (N*K, S, D)
    limits = max_lengths(src, max_len_a, max_len_b, cap)  # (N,)
    sent = torch.arange(n, device=device)  # global sentence id of each live row
    scores = torch.full((n, k), float("-inf"), device=device)
    scores[:, 0] = 0.0  # all beams start identical: expand only the first
    tokens = torch.full((n * k, 1), BOS_ID, dtype=torch.long, device=device)
    best_score = torch.full((n,), float("-inf"), device=device)
    best: list[list[int]] = [[] for _ in range(n)]
    n_finished = torch.zeros(n, dtype=torch.long, device=device)
    cache = model.new_cache()
    for t in range(int(limits.max())):
        b = sent.numel()
        logp = model.decode(tokens[:, -1:], memory, src_mask, cache, start=t)[:, -1].float().log_softmax(-1)  # (B*K, V)
        logp[:, PAD_ID] = logp[:, BOS_ID] = float("-inf")
        v = logp.size(-1)
        logp = logp.view(b, k, v)
        forced = limits[sent] <= t + 1  # (B,) must end now
        if forced.any():
            eos_only = torch.full_like(logp[0], float("-inf"))
            eos_only[:, EOS_ID] = 0.0
            logp = torch.where(forced[:, None, None], logp + eos_only, logp)
        cand = (scores.unsqueeze(-1) + logp).view(b, k * v)
        top, idx = cand.topk(2 * k, dim=1)  # (B, 2K)
        src_beam, tok = idx // v, idx % v
        is_eos = tok == EOS_ID
        # EOS among the first K candidates: a finished hypothesis.
        fin = is_eos & torch.isfinite(top)
        fin[:, k:] = False
        normed = torch.where(fin, top / length_penalty(t + 1, alpha), float("-inf"))
        cand_best, arg = normed.max(1)
        improved = (cand_best > best_score[sent]).nonzero().flatten().tolist()
        if improved:
            history = tokens.view(b, k, -1)
            for i in improved:
                g = int(sent[i])
                best_score[g] = cand_best[i]
                best[g] = history[i, src_beam[i, arg[i]], 1:].tolist()
        n_finished[sent] += fin.sum(1)
        # The best K non-EOS extensions live on.
        live_scores, order = torch.where(is_eos, float("-inf"), top).topk(k, dim=1)  # (B, K)
        keep = ~(forced | (n_finished[sent] >= k))  # sentences still searching
        if not keep.any():
            break
        rows = (torch.arange(b, device=device)[:, None] * k + src_beam.gather(1, order))[keep].flatten()  # (B'*K,)
        tokens = torch.cat([tokens[rows], tok.gather(1, order)[keep].view(-1, 1)], dim=1)
        scores, sent = live_scores[keep], sent[keep]
        memory, src_mask = memory[rows], src_mask[rows]
        reorder_cache(cache, rows)
    return best

"""Greedy and batched beam search with the KV cache (Sec. 6.1: beam 4, length penalty 0.6, max len = src + 50).

Pure torch, no Lightning: tests and `ablate translate` call these directly. The search keeps its bookkeeping in
device tensors: a decoding step's only host sync is one count of the sentences still searching, which ends the loop
and lets finished sentences leave the batch (so a batch costs as long as its longest live hypothesis, not its longest
limit). Hypotheses reach the host once per batch.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ablate.model.loss import upcast
from ablate.model.tokens import BOS_ID, EOS_ID, PAD_ID
from ablate.model.transformer import Transformer, reorder_cache


def length_penalty(length: Tensor | int, alpha: float) -> Tensor | float:
    """GNMT's ((5 + |Y|) / 6)^alpha (Wu et al. 2016), the paper's length penalty; infinite past the float range (a
    huge alpha), as a tensor's power would be, rather than Python's OverflowError."""
    try:
        return ((5.0 + length) / 6.0) ** alpha
    except OverflowError:
        return float("inf")


def max_lengths(src: Tensor, a: float, b: int, cap: int | None = None) -> Tensor:
    """Per-sentence output limit a * |source| + b (|source| counts non-pad tokens), EOS included."""
    limit = (a * (src != PAD_ID).sum(1).float() + b).long().clamp(min=1)
    return limit if cap is None else limit.clamp(max=cap)


def live_rows(done: Tensor) -> tuple[int, Tensor | None]:
    """A decoding step's one host sync: how many of the rows (`done`, (B,) bool) still search, and where they are
    (ascending) when some have just finished, else None. A stable sort, not `nonzero`, finds them: the count is known
    on the host already, so the index needs no second sync."""
    n_live = int((~done).sum())
    if n_live in (0, done.numel()):
        return n_live, None
    return n_live, torch.argsort(done.to(torch.uint8), stable=True)[:n_live]  # (B',)


@torch.no_grad()
def greedy_decode(model: Transformer, src: Tensor, max_len_a: float = 1.0, max_len_b: int = 50, cap: int | None = None) -> list[list[int]]:
    """Argmax decoding; returns token ids without BOS/EOS, one list per source row."""
    memory, src_mask = model.encode(src)
    limits = max_lengths(src, max_len_a, max_len_b, cap)  # (N,)
    steps = int(limits.max())
    out = torch.full((src.size(0), steps), PAD_ID, dtype=torch.long, device=src.device)  # (N, L)
    sent = torch.arange(src.size(0), device=src.device)  # (B,) sentence of each live row
    tokens = torch.full((src.size(0), 1), BOS_ID, dtype=torch.long, device=src.device)
    cache = model.new_cache()
    for t in range(steps):
        logits = model.decode(tokens, memory, src_mask, cache, start=t)[:, -1]  # (B, V)
        logits[:, PAD_ID] = logits[:, BOS_ID] = float("-inf")
        nxt = torch.where(limits[sent] <= t + 1, EOS_ID, logits.argmax(-1))  # forced EOS at the limit
        out[sent, t] = nxt
        n_live, keep = live_rows(nxt == EOS_ID)
        if n_live == 0:
            break
        if keep is not None:
            nxt, sent, memory, src_mask = nxt[keep], sent[keep], memory[keep], src_mask[keep]
            reorder_cache(cache, keep)
        tokens = nxt.unsqueeze(1)
    return [[tok for tok in row if tok not in (PAD_ID, EOS_ID)] for row in out.tolist()]


class BestFinished:
    """Each sentence's best finished hypothesis so far, in device tensors: score / length penalty, length and ids."""

    def __init__(self, n: int, steps: int, device: torch.device, dtype: torch.dtype):
        self.score = torch.full((n,), float("-inf"), device=device, dtype=dtype)  # (N,)
        self.length = torch.zeros(n, dtype=torch.long, device=device)  # (N,)
        self.ids = torch.full((n, max(steps - 1, 1)), PAD_ID, dtype=torch.long, device=device)  # (N, L-1): EOS at step t ends t ids

    def update(self, sent: Tensor, normed: Tensor, src_beam: Tensor, history: Tensor, t: int) -> None:
        """Keep the best of `normed` ((B, 2K) normalised scores of this step's finished candidates, -inf elsewhere)
        where it beats a sentence's best; `history` (B, K, t) holds each live beam's ids, `sent` (B,) the sentences."""
        cand, arg = normed.max(1)  # (B,)
        better = cand > self.score[sent]  # strict: of equal scores the one that finished first stays
        self.score[sent] = torch.where(better, cand, self.score[sent])
        self.length[sent] = torch.where(better, t, self.length[sent])
        if t:
            beam = src_beam.gather(1, arg[:, None])  # (B, 1)
            ids = history.gather(1, beam[:, :, None].expand(-1, 1, t)).squeeze(1)  # (B, t)
            self.ids[sent, :t] = torch.where(better[:, None], ids, self.ids[sent, :t])

    def hypotheses(self) -> list[list[int]]:
        rows = torch.cat([self.length[:, None], self.ids], 1).tolist()  # the batch's one copy to the host
        return [row[1 : 1 + row[0]] for row in rows]


def extend(logp: Tensor, scores: Tensor, forced: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The 2K best extensions of each sentence's K beams: scores (B, 2K), source beams and tokens. `logp` (B, K, V)
    loses PAD and BOS; a `forced` (B,) sentence may only end (EOS keeps its log-prob)."""
    b, k, v = logp.shape
    logp[..., PAD_ID] = logp[..., BOS_ID] = float("-inf")
    top, idx = (scores.unsqueeze(-1) + logp).view(b, k * v).topk(2 * k, dim=1)  # (B, 2K)
    # A forced sentence's candidates are its beams' EOS extensions, best first, then nothing (-inf): found among K
    # values rather than by masking all K * V, which would cost as much as a second top-k every step.
    eos, beam = (scores + logp[..., EOS_ID]).topk(k, dim=1)  # (B, K)
    top = torch.where(forced[:, None], torch.cat([eos, torch.full_like(eos, float("-inf"))], 1), top)
    src_beam = torch.where(forced[:, None], beam.repeat(1, 2), idx // v)
    return top, src_beam, torch.where(forced[:, None], EOS_ID, idx % v)


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
    steps = int(limits.max())
    dtype = upcast(memory).dtype  # a float64 model's beams rank in float64; half precisions in float32
    best = BestFinished(n, steps, device, dtype)
    sent = torch.arange(n, device=device)  # (B,) sentence of each live row
    scores = torch.full((n, k), float("-inf"), device=device, dtype=dtype)
    scores[:, 0] = 0.0  # all beams start identical: expand only the first
    tokens = torch.full((n * k, 1), BOS_ID, dtype=torch.long, device=device)  # (B*K, t+1) each live beam's ids
    n_finished = torch.zeros(n, dtype=torch.long, device=device)  # (B,)
    cache = model.new_cache()
    for t in range(steps):
        b = sent.numel()
        logp = model.decode(tokens[:, -1:], memory, src_mask, cache, start=t)[:, -1].to(dtype).log_softmax(-1)  # (B*K, V)
        forced = limits[sent] <= t + 1  # (B,) must end now
        top, src_beam, tok = extend(logp.view(b, k, -1), scores, forced)  # (B, 2K) each
        fin = (tok == EOS_ID) & torch.isfinite(top)
        fin[:, k:] = False  # only EOS among the first K candidates finishes a hypothesis
        best.update(sent, torch.where(fin, top / length_penalty(t + 1, alpha), float("-inf")), src_beam, tokens.view(b, k, -1)[..., 1:], t)
        n_finished = n_finished + fin.sum(1)
        scores, order = torch.where(tok == EOS_ID, float("-inf"), top).topk(k, dim=1)  # (B, K): the best K others live on
        n_live, keep = live_rows(forced | (n_finished >= k))
        if n_live == 0:
            break
        rows = torch.arange(b, device=device)[:, None] * k + src_beam.gather(1, order)  # (B, K)
        nxt = tok.gather(1, order)  # (B, K)
        if keep is not None:  # finished sentences leave the batch
            rows, nxt, scores, sent, n_finished = rows[keep], nxt[keep], scores[keep], sent[keep], n_finished[keep]
        rows = rows.flatten()  # (B'*K,)
        tokens = torch.cat([tokens[rows], nxt.view(-1, 1)], dim=1)
        if keep is None:  # beams moved within their sentences: the source side, equal across a sentence's beams, stays
            reorder_cache([{"self": layer["self"]} for layer in cache], rows)  # in place: the same dicts as `cache`'s
        else:
            memory, src_mask = memory[rows], src_mask[rows]
            reorder_cache(cache, rows)
    return best.hypotheses()

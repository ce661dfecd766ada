"""Multi-head attention (Sec. 3.2.2): the projections, head split, grouped keys/values and KV cache around a kernel
of ablate.model.attention."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ablate.model.attention import AttentionKernel
from ablate.model.members import MemberLinear, member_rows, project
from ablate.model.positional import RelativePosition
from ablate.model.scaling import Scaling


class MultiHeadAttention(nn.Module):
    """Projections, head split and KV cache around a pluggable kernel (Sec. 3.2.2).

    One fused input projection holds W_q, W_k, W_v: self-attention applies it in one matmul,
    cross attention applies its Q rows to the decoder state and its K/V rows to the encoder
    output. `kv_heads < heads` gives grouped-query attention (1 = multi-query).
    """

    def __init__(
        self,
        *,
        d_model: int,
        heads: int,
        d_k: int,
        d_v: int,
        kv_heads: int,
        kernel: AttentionKernel,
        scaling: Scaling,
        position: RelativePosition | None = None,
        members: int | None = None,
    ):
        super().__init__()
        if heads % kv_heads:
            raise ValueError(f"kv_heads={kv_heads} must divide heads={heads}")
        self.heads, self.kv_heads, self.d_k, self.d_v, self.members = heads, kv_heads, d_k, d_v, members
        self.q_dim, self.k_dim, self.v_dim = heads * d_k, kv_heads * d_k, kv_heads * d_v
        linear = nn.Linear if members is None else lambda *shape: MemberLinear(members, *shape)
        self.in_proj = linear(d_model, self.q_dim + self.k_dim + self.v_dim)
        self.out_proj = linear(heads * d_v, d_model)
        self.kernel, self.scaling, self.position = kernel, scaling, position  # position: a relative scheme, self-attention only
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # Xavier per projection, as if W_q, W_k, W_v were separate matrices (fusing must not change init); per member.
        with torch.no_grad():
            in_weights = [self.in_proj.weight] if self.members is None else list(self.in_proj.weight)
            out_weights = [self.out_proj.weight] if self.members is None else list(self.out_proj.weight)
            for weight in in_weights:
                for block in weight.split([self.q_dim, self.k_dim, self.v_dim]):
                    nn.init.xavier_uniform_(block)
            for weight in out_weights:
                nn.init.xavier_uniform_(weight)
            nn.init.zeros_(self.in_proj.bias)
            nn.init.zeros_(self.out_proj.bias)

    def _split(self, x: Tensor, heads: int) -> Tensor:
        b, t, _ = x.shape
        return x.view(b, t, heads, -1).transpose(1, 2)  # (B, heads, T, d)

    def _project_kv(self, context: Tensor) -> tuple[Tensor, Tensor]:
        k, v = project(self.in_proj, context, slice(self.q_dim, None)).split([self.k_dim, self.v_dim], dim=-1)
        return self._split(k, self.kv_heads), self._split(v, self.kv_heads)  # (B, G, S, Dk), (B, G, S, Dv)

    def forward(
        self, x: Tensor, context: Tensor | None = None, mask: Tensor | None = None, cache: dict | None = None, start: int = 0
    ) -> Tensor:
        """x: (B, T, D) queries at positions start.. start+T-1. context: (B, S, D) for cross attention, None for self.

        cache: a dict owned by this layer for incremental decoding. Self-attention appends this
        step's keys/values to it; cross attention projects the context once and reuses it.
        """
        scale = self.scaling()
        if self.members is not None and isinstance(scale, Tensor) and scale.dim() == 4:  # (K, H, 1, 1): one per row
            scale = member_rows(scale, x.size(0) // self.members)
        if context is None:
            q, k, v, mask = self._self_attention_inputs(x, mask, cache, start, scale)
        else:
            q, k, v = self._cross_attention_inputs(x, context, cache)
        out = self.kernel(q, k, v, mask, scale)  # (B, H, T, Dv)
        if out.shape != (*q.shape[:3], v.size(-1)):  # a kernel of one's own, named, not a matmul's shape error later on
            expected = (*q.shape[:3], v.size(-1))
            raise ValueError(
                f"attention kernel {type(self.kernel).__name__} returned shape {tuple(out.shape)}; (B, H, T, Dv) = {expected} "
                "is expected (docs/variants.md)"
            )
        return self.out_proj(out.transpose(1, 2).flatten(2))  # (B, T, D)

    def _self_attention_inputs(self, x: Tensor, mask: Tensor | None, cache: dict | None, start: int, scale):
        q, k, v = self.in_proj(x).split([self.q_dim, self.k_dim, self.v_dim], dim=-1)
        q, k, v = self._split(q, self.heads), self._split(k, self.kv_heads), self._split(v, self.kv_heads)
        q, k = self.scaling.normalize(q), self.scaling.normalize(k)
        if self.position is not None:
            pos = torch.arange(start, start + x.size(1), device=x.device)
            q, k = self.position.rotate(q, k, pos)  # keys enter the cache already rotated
        if cache is not None:
            if "k" in cache:
                k, v = torch.cat([cache["k"], k], dim=2), torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
        if self.position is not None and self.position.adds_bias:
            bias = self.position.bias(q, pos, torch.arange(k.size(2), device=x.device), scale)  # float, broadcastable to (B, H, T, S)
            mask = bias if mask is None else bias.masked_fill(~mask, float("-inf"))
        return q, k, v, mask

    def _cross_attention_inputs(self, x: Tensor, context: Tensor, cache: dict | None) -> tuple[Tensor, Tensor, Tensor]:
        q = self._split(project(self.in_proj, x, slice(None, self.q_dim)), self.heads)
        if cache is not None and "k" in cache:
            k, v = cache["k"], cache["v"]
        else:
            k, v = self._project_kv(context)
            k = self.scaling.normalize(k)
            if cache is not None:
                cache["k"], cache["v"] = k, v
        return self.scaling.normalize(q), k, v

"""The plugin file the plugin tests write: what a user's own variants module looks like."""

from __future__ import annotations

TEMPLATE = '''
"""A user's variants: a kernel, a relative position scheme and a logit scaling; notes each importing process."""
import os
from pathlib import Path

import torch
import torch.nn.functional as F

from ablate.model.attention import ATTENTION, AttentionKernel, repeat_kv, softmax_attend
from ablate.model.positional import POSITIONAL, RelativePosition
from ablate.model.scaling import SCALING, Scaling
from ablate.registry import register

with open(Path(__file__).with_name("imported.txt"), "a") as f:
    f.write(f"{os.getpid()}\\n")


@register(ATTENTION, "PREFIX_cosine")
class ClassCosine(AttentionKernel):
    def __init__(self, *, heads, d_k, dropout=0.0):
        super().__init__()
        self.dropout = dropout

    def forward(self, q, k, v, mask, scale):
        scores = F.normalize(q, dim=-1) @ F.normalize(repeat_kv(k, q.size(1)), dim=-1).transpose(-1, -2) * scale
        return softmax_attend(scores, v, mask, self.dropout, self.training)


@register(POSITIONAL, "PREFIX_distance")
class ClassDistance(RelativePosition):
    adds_bias = True

    def __init__(self, *, heads, d_k, max_positions, causal):
        super().__init__(heads=heads, d_k=d_k, max_positions=max_positions, causal=causal)
        self.weight = torch.nn.Parameter(torch.full((heads, 1, 1), 0.5))

    def bias(self, q, q_pos, k_pos, scale):
        return -self.weight * (q_pos[:, None] - k_pos[None, :]).abs().float().to(q.dtype)


@register(SCALING, "PREFIX_half")
class ClassHalf(Scaling):
    def __init__(self, *, heads, d_k):
        super().__init__()
        self.value = 0.5 * d_k**-0.5

    def forward(self):
        return self.value
'''


def plugin_source(prefix: str) -> str:
    """Registers PREFIX_cosine, PREFIX_distance and PREFIX_half (classes named Prefix...); each import appends the
    importing process's id to imported.txt beside the file, so "never imported" can be checked."""
    return TEMPLATE.replace("PREFIX", prefix).replace("class Class", f"class {prefix.title()}")

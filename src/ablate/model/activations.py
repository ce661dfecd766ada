"""The feed-forward's activation (`model.activation`; the paper's is ReLU, Sec. 3.3): a registry of modules.

An entry is built once per feed-forward layer with no arguments. A member model refuses one with parameters (it would
be one set shared by all members).
"""

from __future__ import annotations

from torch import nn

from ablate.registry import Registry, register

ACTIVATIONS: dict[str, type[nn.Module]] = Registry(nn.Module)
register(ACTIVATIONS, "relu")(nn.ReLU)
register(ACTIVATIONS, "gelu")(nn.GELU)

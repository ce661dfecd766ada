"""The pluggable Transformer: attention kernels, positional encodings and the builder that wires them."""

from ablate.model.attention import ATTENTION, SCALING, MultiHeadAttention
from ablate.model.positional import POSITIONAL
from ablate.model.transformer import Transformer, build_transformer, count_parameters

__all__ = ["ATTENTION", "SCALING", "POSITIONAL", "MultiHeadAttention", "Transformer", "build_transformer", "count_parameters"]

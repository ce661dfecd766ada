"""The pluggable Transformer: attention kernels, logit scalings, positional encodings, activations and the builder that
wires them."""

from ablate.model.activations import ACTIVATIONS
from ablate.model.attention import ATTENTION
from ablate.model.build import build_transformer, count_parameters
from ablate.model.multi_head import MultiHeadAttention
from ablate.model.positional import POSITIONAL
from ablate.model.scaling import SCALING
from ablate.model.transformer import Transformer
from ablate.model.variants import compatible, compatible_positionals, max_length

__all__ = [
    "ACTIVATIONS", "ATTENTION", "POSITIONAL", "SCALING", "MultiHeadAttention", "Transformer", "build_transformer",
    "compatible", "compatible_positionals", "count_parameters", "max_length",
]  # fmt: skip

"""ablate: ablation studies of the encoder-decoder Transformer of "Attention Is All You Need"."""

__version__ = "0.1.0"

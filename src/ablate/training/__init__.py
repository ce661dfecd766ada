"""What one training step needs beside the model: the Lightning module (loss, schedule, validation), FLOPs and
MFU, BLEU and speed metrics, and checkpoints (safe loading, averaging)."""

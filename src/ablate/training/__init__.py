"""What one training step needs beside the model: the Lightning module (loss, schedule, validation; BLEU itself is
ablate.evaluation's), FLOPs and MFU, speed metrics, and checkpoints (safe loading, averaging)."""

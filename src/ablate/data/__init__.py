"""The data pipeline: corpus files, named datasets, the joint BPE tokenizer, token-bucketed batches, and the
LightningDataModule that joins them (`ablate.data.module`)."""

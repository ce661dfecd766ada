"""`ablate translate` and `ablate evaluate`: decoding a checkpoint for a user, above the training that wrote it
(ablate.evaluation holds what validation and these commands share: beam search, sentence scores, BLEU)."""

"""The fixed special token ids (pad=0, unk=1, bos=2, eos=3) that the tokenizer, the batches, the model and decoding share.

A plain module with no imports, so the model package can use them without depending on SentencePiece.
"""

PAD_ID = 0  # padding: masked out of attention and the loss
UNK_ID = 1  # a piece outside the vocabulary
BOS_ID = 2  # starts every target input
EOS_ID = 3  # ends every source and target output

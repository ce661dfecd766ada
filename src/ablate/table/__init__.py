"""`ablate table`: finished runs (finished_runs; those left out: left_out), their per-sentence records read and aligned
(sentence_records) and each row tested against the base row (row_tests, on paired_bootstrap), compared with the base
row and the paper (compare), rendered (render, latex, terminal, plot) and written (file_writes, page);
checkpoint_scoring scores a checkpoint on a split a run saved no record for."""

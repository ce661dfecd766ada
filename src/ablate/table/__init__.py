"""`ablate table`: finished runs (load) with their per-sentence records tested against the base row
(sentence_records, row_tests, on paired_bootstrap), compared with the base row and the paper (compare), rendered (render, plot); evaluation scores a
checkpoint on a split a run saved no record for."""

"""`ablate table`: finished runs (load) with their per-sentence records tested against the base row (significance,
on stats), compared with the base row and the paper (compare), rendered (render, plot); evaluation scores a
checkpoint on a split a run saved no record for."""

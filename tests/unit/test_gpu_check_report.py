"""benchmarks/gpu_check_report.py's members line: K members against one run and against the row's runs packed as
`trials_per_gpu: auto` packs them (issue 37's two GPU gates), from the files the part wrote; a missing one says so."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
import gpu_check_report as report  # noqa: E402

RUN = {"tokens_per_s": {"members": 600_000.0, "one_run": 60_000.0}, "ratio_members_vs_one_run": 10.0,
       "ratio_members_vs_runs": 9.0, "ratio_member1_step_vs_run": 1.02, "padded_share": 0.1}  # fmt: skip


def test_the_members_line_holds_k_members_against_one_run_and_against_packed_runs(tmp_path):
    (tmp_path / "members-8.json").write_text(json.dumps({**RUN, "members": 8, "peak_mib": {"run-0": 700, "members": 5600}}))
    (tmp_path / "members-16.json").write_text(json.dumps({**RUN, "members": 16}))
    eight, sixteen = report.members(tmp_path)
    assert "10.00x (trials/h; target >= 8x: meets)" in eight and "peak MiB run 700, K members 5600" in eight
    assert "peak memory not measured at this K" in sixteen
    assert "vs packed runs: missing (no packed.json" in eight  # the packed arm cut at the part's limit: said, not guessed
    packed = {"processes": 16, "tokens_per_s": {"packed": 250_000.0}, "mps": "CUDA MPS: off (no daemon)", "fits": False}
    (tmp_path / "packed.json").write_text(json.dumps(packed))
    eight, _ = report.members(tmp_path)
    assert "vs 16 runs packed at once (250,000 tgt tok/s, CUDA MPS: off (no daemon), their peaks do not fit" in eight
    assert eight.endswith("2.40x (target >= 2x: meets)")

"""keep_freed_memory: a training step takes the host memory the step before freed, without page faults."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ablate.training.host_memory import MMAP_THRESHOLD, keep_freed_memory

PROBE = """
import resource, sys
from ablate.training.host_memory import keep_freed_memory
if sys.argv[1] == "keep" and not keep_freed_memory():
    print("not glibc")
    sys.exit()
def step():  # a step's activations: 8 blocks of 8 MiB held at once (written: each page touched), then freed
    blocks = [bytearray(8 << 20) for _ in range(8)]
    del blocks
for _ in range(3):
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    step()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], check=True, capture_output=True, text=True).stdout.strip()
    if out == "not glibc":
        pytest.skip("the C library is not glibc")
    return int(out)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
@pytest.mark.skipif(
    "LD_PRELOAD" in os.environ or any(k.startswith("MALLOC_") for k in os.environ), reason="another allocator or glibc's settings"
)
def test_steps_reuse_freed_memory_instead_of_faulting_it_in_again():
    kept = _faults("keep")
    step_pages = 8 * (8 << 20) // 4096
    assert _faults("default") > 10 * step_pages // 2  # glibc's own thresholds hand the blocks back: faulted in again
    assert kept < step_pages // 10  # kept: not a tenth of one step's pages in 10 steps


def test_the_threshold_is_one_glibc_accepts_and_other_systems_are_left_alone(monkeypatch):
    """glibc refuses an mmap threshold over 32 MiB (then nothing would be kept); off Linux nothing is called."""
    assert MMAP_THRESHOLD <= 32 << 20
    monkeypatch.setattr(sys, "platform", "darwin")
    assert keep_freed_memory() is False

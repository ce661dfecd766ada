"""Fixtures of the table's statistics tests: references, crafted systems of three seeds each, their BLEU statistics
and paired bootstraps against base, computed once for all the files that use them."""

import numpy as np
import pytest
from bleu_systems import sentence, system

from ablate.table.corpus_scores import bleu_stats
from ablate.table.paired_bootstrap import paired_bleu_stats


@pytest.fixture(scope="session")
def refs():
    rng = np.random.default_rng(123)
    return [sentence(rng) for _ in range(300)]


@pytest.fixture(scope="session")
def systems(refs):
    """Three seeds each: base copies ~30% of references, better ~60%; one_better is better on one seed only."""
    base = [system(refs, 0.3, 10 + s) for s in range(3)]
    better = [system(refs, 0.6, 20 + s) for s in range(3)]
    return {"base": base, "better": better, "one_better": [better[0], base[1], base[2]]}


@pytest.fixture(scope="session")
def sstats(refs, systems):
    """Per-seed BLEU statistics of each system, extracted once for the whole session."""
    return {name: [bleu_stats(h, refs) for h in seeds] for name, seeds in systems.items()}


@pytest.fixture(scope="session")
def boot(sstats):
    """The paired bootstrap of each system against base."""
    return {name: paired_bleu_stats(sstats["base"], s) for name, s in sstats.items()}

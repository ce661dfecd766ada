"""A config's corpus found or not before a run starts (ablate.data.location): the check `ablate sweep` makes when it
loads, in the words `ablate train` uses, downloading nothing unless asked."""

from __future__ import annotations

import pytest
from helpers import offline as no_network

from ablate.config.schema import DataConfig
from ablate.data.location import available_splits, corpus_problem


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """multi30k with an empty cache; a download fails as on a machine with no network, and is counted."""
    return DataConfig(dataset="multi30k", cache_dir=str(tmp_path / "cache")), no_network(monkeypatch)


def test_an_env_dir_that_is_no_folder_is_the_problem_named_as_train_names_it(offline, monkeypatch, tmp_path):
    cfg, tried = offline
    monkeypatch.setenv("ABLATE_DATA_DIR", str(tmp_path / "nope"))
    assert corpus_problem(cfg).startswith(f"ABLATE_DATA_DIR={tmp_path / 'nope'} is no folder here") and not tried


def test_a_corpus_only_a_download_brings_is_passed_over_unless_fetched(offline, monkeypatch, tmp_path):
    cfg, tried = offline
    assert corpus_problem(cfg) is None and not tried  # a dry run downloads nothing
    monkeypatch.setenv("ABLATE_DATA_DIR", str(tmp_path))  # a folder, without the corpus
    said = corpus_problem(cfg, fetch=True)
    assert "failed: offline" in said and f"ABLATE_DATA_DIR={tmp_path} holds neither" in said and len(tried) == 1


def test_files_and_data_dir_that_lack_the_corpus_are_named(tmp_path):
    (tmp_path / "train.en").write_text("a\n")
    (tmp_path / "train.de").write_text("b\n")
    files = DataConfig(dataset="files", train_prefix=str(tmp_path / "train"))
    assert available_splits(files) == ("train",) and corpus_problem(files) is None
    assert "data.valid_prefix=" in corpus_problem(DataConfig(dataset="files", train_prefix=str(tmp_path / "train"), valid_prefix="x"))
    assert corpus_problem(DataConfig(dataset="multi30k", dir=str(tmp_path))).startswith(f"data.dir='{tmp_path}' lacks")

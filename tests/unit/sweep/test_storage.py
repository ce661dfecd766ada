"""Study storage URLs: what is accepted, what is refused (naming it, password hidden)."""

from __future__ import annotations

import pytest
from sweep_files import write

from ablate.sweep.load import load_sweep
from ablate.sweep.storage import storage_url


@pytest.mark.parametrize("storage", ["journal.log", "/tmp/optuna-journal.log", "redis://:pw@127.0.0.1/0"])
def test_storage_that_is_not_a_database_url_is_refused_naming_it(tmp_path, storage):
    sweep = load_sweep(write(tmp_path, f"name: s\nbase: base.yaml\nstorage: '{storage}'\nvariants: {{base: {{}}}}\n"))
    with pytest.raises(ValueError, match="neither a database URL nor a journal file") as err:
        storage_url(sweep.out_dir, sweep.storage)
    assert "pw" not in str(err.value)  # a password in the URL is redacted even here
    assert storage_url(sweep.out_dir, sweep.storage, "sqlite:////tmp/x.db") == "sqlite:////tmp/x.db"
    assert storage_url(sweep.out_dir, sweep.storage, "postgresql+psycopg2://u:p@127.0.0.1/db").startswith("postgresql+psycopg2://")

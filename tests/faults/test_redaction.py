"""Issue 18 item 1: a database password is never printed, whatever characters it holds.

SQLAlchemy reads everything between `user:` and the `@` before the host as the password, `/` included
(make_url('postgresql+psycopg2://u:pa/ss@h/db').password == 'pa/ss'); the redaction must hide all of it. The storage here
is an unreachable PostgreSQL port, so the sweep stops at "cannot open the study ..." having printed the URL.
(A real sweep whose password holds `/`, checked in every file it writes, is in test_postgres_urls.py.)
"""

from __future__ import annotations

import sys

import pytest
import yaml
from helpers import multi30k_names

from ablate.cli import main

# Two distinctive halves around the odd character(s): neither half may appear anywhere in the output.
HEAD, TAIL = "Zq7k", "Wx9v"


@pytest.mark.parametrize(
    "middle",
    [
        pytest.param("/", id="slash"),
        pytest.param("/:", id="slash-colon"),
        pytest.param("a/b/c", id="two-slashes"),
        # Guards (pass today): odd characters SQLAlchemy accepts in a password that redaction already hides. A raw
        # '@' is not among them: SQLAlchemy ends the password at the first '@', so it must be written %40.
        pytest.param(":", id="colon"),
        pytest.param("%2F", id="encoded-slash"),
        pytest.param("%40", id="encoded-at"),
        pytest.param("#", id="hash"),
        pytest.param(" ", id="space"),
        pytest.param("?", id="question-mark"),
    ],
)
def test_cannot_open_the_study_never_prints_the_password(tmp_path, capfd, monkeypatch, middle):
    (tmp_path / "base.yaml").write_text("model: {d_model: 32, heads: 4}\n")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        yaml.safe_dump({"name": "r", "base": str(tmp_path / "base.yaml"), "out_dir": str(tmp_path / "out"), "variants": {"base": {}}})
    )
    # +psycopg2: the driver the `postgres` extra installs (a bare postgresql:// is item 8's problem, not this one's)
    url = f"postgresql+psycopg2://u:{HEAD}{middle}{TAIL}@127.0.0.1:1/db"  # port 1: nothing listens
    monkeypatch.setattr(sys, "argv", ["ablate", "sweep", str(sweep), "--storage", url])  # sweep_cli rewrites sys.argv
    monkeypatch.delenv("ABLATE_SWEEP_STORAGE", raising=False)
    monkeypatch.setenv("ABLATE_DATA_DIR", str(multi30k_names(tmp_path / "data")))  # found before the storage is opened
    rc = main(["sweep", str(sweep), "--storage", url])
    out, err = capfd.readouterr()
    assert rc == 2 and "cannot open the study 'r'" in err, out[-2000:] + err[-2000:]
    leaked = [part for part in (HEAD, TAIL) if part in out + err]
    assert not leaked, f"password parts {leaked} printed: {err.strip()[-600:]}"
    assert "127.0.0.1" in err  # the error still says where it tried

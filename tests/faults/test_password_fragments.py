"""Issue 32 item 1: no part of a storage password leaves ablate, whatever the driver says, and `ablate status` on a
server it cannot reach is a clear error.

A raw '@' in a password ends it early for SQLAlchemy (postgresql://alice:Zq9S@Wx8v@host reads host 'Wx8v@host'), so
the driver's "failed to resolve host 'Wx8v@127.0.0.1'" carried the password's tail past a redaction that masked the
password only whole. Passwords here hold each of @ : / ? # % and a space, raw and percent-encoded; no output holds
any 4-character fragment of one. (A real sweep on a real server with such passwords: test_postgres_urls.py.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from urllib.parse import quote, unquote

import pytest
import yaml
from helpers import multi30k_names

from ablate.cli import main

UNREACHABLE = "127.0.0.1:5999"  # nothing listens
HEAD, TAIL = "Zq9S", "Wx8v"
ODD = ["@", ":", "/", "?", "#", "%", " "]
ALL = "Zq9S@Kp4:Lm3/Tn5?Rv6#Yb7%Hc2 Wx8v"  # every odd character at once


def passwords() -> list:
    """(password as written in the URL, id): each odd character raw and percent-encoded, and all of them at once."""
    cases = [(f"{HEAD}{c}{TAIL}", f"raw-{c if c != ' ' else 'space'}") for c in ODD]
    cases += [(f"{HEAD}{quote(c, safe='')}{TAIL}", f"encoded-{c if c != ' ' else 'space'}") for c in ODD]
    cases += [(ALL, "all-raw"), (quote(ALL, safe=""), "all-encoded")]
    return cases


def fragments(written: str) -> set[str]:
    """Every 4-character piece of the password as written and as meant (percent-decoded)."""
    return {form[i : i + 4] for form in {written, unquote(written)} for i in range(len(form) - 3)}


def leaked(written: str, text: str) -> list[str]:
    return sorted(f for f in fragments(written) if f in text)


def url_with(password: str) -> str:
    return f"postgresql+psycopg2://alice:{password}@{UNREACHABLE}/db"


def driver_messages(url: str) -> list[str]:
    """What a driver may say about a URL it parsed its own way: the host, the user, the password whole or in part."""
    from sqlalchemy.engine import make_url

    written = url.split("alice:", 1)[1].rsplit("@", 1)[0]
    piece = f"syntax error near '{unquote(written)[2:-2]}'"  # a driver quoting the middle of what it took apart
    try:
        u = make_url(url)
    except ValueError as e:  # a raw '@' before a ':' makes the password's next piece the "port"
        return [f"invalid URL: {e}", f"could not connect: {url}", piece]
    pw = u.password or ""
    return [
        piece,
        f"failed to resolve host '{u.host}': [Errno -2] Name or service not known",
        f'connection to server at "{u.host}", port {u.port} failed: password authentication failed for user "{u.username}"',
        f"invalid connection option near '{pw[2:]}' in \"password={pw}\"",
        f"could not connect: {url} (password {unquote(written)!r})",
    ]


@pytest.mark.parametrize("written", [pytest.param(p, id=i) for p, i in passwords()])
def test_redact_masks_every_fragment_of_a_seen_password_in_any_driver_text(written):
    from ablate.messages.redact import redact, remember

    url = url_with(written)
    remember(url)  # as make_storage does before the driver sees the URL
    for message in driver_messages(url):
        shown = redact(message)
        assert not leaked(written, shown), f"{leaked(written, shown)} in {shown!r}"
    assert redact(url) == f"postgresql+psycopg2://alice:***@{UNREACHABLE}/db"


def sweep_file(tmp_path) -> str:
    (tmp_path / "base.yaml").write_text("model: {d_model: 32, heads: 4}\n")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        yaml.safe_dump({"name": "r", "base": str(tmp_path / "base.yaml"), "out_dir": str(tmp_path / "out"), "variants": {"base": {}}})
    )
    return str(sweep)


@pytest.mark.parametrize("written", [pytest.param(p, id=i) for p, i in passwords()])
def test_a_sweep_on_an_unreachable_server_prints_no_fragment_of_the_password(tmp_path, capfd, monkeypatch, written):
    sweep, url = sweep_file(tmp_path), url_with(written)
    monkeypatch.setattr(sys, "argv", ["ablate", "sweep", sweep, "--storage", url])  # sweep_cli rewrites sys.argv
    monkeypatch.delenv("ABLATE_SWEEP_STORAGE", raising=False)
    monkeypatch.setenv("ABLATE_DATA_DIR", str(multi30k_names(tmp_path / "data")))  # found before the storage is opened
    rc = main(["sweep", sweep, "--storage", url])
    out, err = capfd.readouterr()
    assert rc == 2 and err.startswith("ablate sweep: error: ") and "127.0.0.1" in err, out[-2000:] + err[-2000:]
    assert not leaked(written, out + err), err


@pytest.mark.slow  # a subprocess each (a fresh process: no password remembered before): seconds; the default set stays under a minute
@pytest.mark.parametrize("written", [f"{HEAD}%40{TAIL}", ALL.replace("@", "%40")], ids=["encoded-@", "all-but-@-raw"])
def test_status_on_an_unreachable_server_is_a_clear_error_with_no_fragment(written):
    url = url_with(written)
    env = {k: v for k, v in os.environ.items() if k != "ABLATE_SWEEP_STORAGE"}
    proc = subprocess.run([sys.executable, "-m", "ablate.cli", "status", url], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.startswith("ablate status: error: cannot open the storage postgresql+psycopg2://alice:***@127.0.0.1:5999/db")
    assert not leaked(written, proc.stdout + proc.stderr), proc.stderr


@pytest.fixture
def role_url(postgres_url, request):
    """A database of its own, owned by a role whose password is request.param as meant; yields the URL holding it as
    written (request.param) and the password as written."""
    import uuid

    import psycopg2
    from psycopg2 import sql
    from sqlalchemy.engine import make_url

    admin, written = make_url(postgres_url), request.param
    role = f"frag_{uuid.uuid4().hex[:8]}"
    con = psycopg2.connect(host=admin.host, port=admin.port, user=admin.username, password=admin.password, dbname=admin.database)
    con.autocommit = True
    try:
        with con.cursor() as cur:
            cur.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD %s").format(sql.Identifier(role)), [unquote(written)])
            cur.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(role), sql.Identifier(role)))
    except psycopg2.Error as e:
        con.close()
        pytest.skip(f"cannot create a role and database on the test server: {e}")
    try:
        yield f"postgresql+psycopg2://{role}:{written}@{admin.host}:{admin.port}/{role}", written
    finally:
        with con.cursor() as cur:
            cur.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(role)))
            cur.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
        con.close()


@pytest.mark.slow
@pytest.mark.parametrize("role_url", [quote(ALL, safe=""), ALL.replace("@", "%40")], ids=["all-encoded", "all-but-@-raw"], indirect=True)
def test_a_real_sweep_writes_no_fragment_of_the_password_anywhere(tmp_path, role_url):
    """Output, results, trial configs, train logs and W&B files of a sweep (by --storage, so W&B's command line
    holds the URL) on a real server."""
    from helpers import tiny_sections

    url, written = role_url
    base = tiny_sections(tmp_path)
    base["train"] = {"max_steps": 4, "warmup": 10, "val_every_steps": 2, "log_every_steps": 2, "val_bleu": False, "num_threads": 1}
    base["logging"] = {"wandb": True, "mode": "offline", "progress": False}
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base))
    sweep = tmp_path / "sweep.yaml"
    spec = {"name": "frag", "base": str(tmp_path / "base.yaml"), "out_dir": str(tmp_path / "out"), "variants": {"base": {}}}
    sweep.write_text(yaml.safe_dump({**spec, "objective": {"metric": "val/loss", "direction": "minimize"}}))
    env = {**os.environ, "ABLATE_SWEEP_HEARTBEAT": "1", "WANDB_MODE": "offline"}
    env.pop("ABLATE_SWEEP_STORAGE", None)
    proc = subprocess.run(
        [sys.executable, "-m", "ablate.cli", "sweep", str(sweep), "--storage", url], capture_output=True, text=True, timeout=600, env=env
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    files = [f for f in (tmp_path / "out").rglob("*") if f.is_file()]
    assert {"results.json", "trial.yaml", "config.yaml", "train.log"} <= {f.name for f in files} and any(
        f.suffix == ".wandb" for f in files
    )
    leaks = {"output": leaked(written, proc.stdout + proc.stderr)}
    leaks |= {str(f.relative_to(tmp_path)): leaked(written, f.read_bytes().decode("utf-8", "replace")) for f in files}
    assert not {k: v for k, v in leaks.items() if v}
    assert "***@" in proc.stdout  # the study's location is still shown, masked

"""Storage URLs lose their password, and a W&B key its value, before anything prints or saves them."""

import os
import subprocess
import sys

from ablate.messages import redact as redact_module
from ablate.messages.redact import redact, remember


def test_redact_hides_the_password_and_leaves_other_urls_alone():
    assert redact("postgresql://ablate:s3cret@127.0.0.1:5432/db") == "postgresql://ablate:***@127.0.0.1:5432/db"
    assert redact("sqlite:////tmp/x.db") == "sqlite:////tmp/x.db"


def test_a_wandb_key_is_masked_wherever_a_message_quotes_it(monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "0123abcd" * 5)
    assert redact(f"error: invalid key {'0123abcd' * 5} (40 characters)") == "error: invalid key *** (40 characters)"
    assert redact("POST /graphql?api_key=zzzz9999&x=1 failed") == "POST /graphql?api_key=***&x=1 failed"
    assert redact(f"WANDB_API_KEY={'9' * 40} rejected") == "WANDB_API_KEY=*** rejected"
    monkeypatch.delenv("WANDB_API_KEY")
    assert redact("commit 0123abcd0123abcd") == "commit 0123abcd0123abcd"  # no key set: nothing taken for one
    assert redact(f"WANDB_API_KEY={'9' * 40} rejected") == "WANDB_API_KEY=*** rejected"  # unset here, quoted by name
    monkeypatch.setenv("WANDB_API_KEY", "test")  # no real key: the word is left alone wherever it appears
    assert redact("--split test: /data/test.de missing") == "--split test: /data/test.de missing"


def test_the_words_of_a_password_no_parser_can_split_are_left_in_text_and_the_whole_is_masked(monkeypatch):
    """With the password `training-2026`, a trial's fail reason "too large for this training corpus" became "this ***
    corpus" and "step 2026" "step ***". A password of URL-unreserved characters alone is never taken apart by a
    driver, so only the whole is a secret; one a parser can split (here at a raw '@') keeps its pieces masked."""
    monkeypatch.setattr(redact_module, "_seen", set())
    remember("postgresql://ablate:training-2026@db.example/study")
    assert (
        redact("data.vocab_size=90000 is too large for this training corpus")
        == "data.vocab_size=90000 is too large for this training corpus"
    )
    assert redact("NaN loss at step 2026") == "NaN loss at step 2026"
    assert redact("auth failed: password training-2026 rejected") == "auth failed: password *** rejected"
    assert redact("could not connect to postgresql://ablate:training-2026@db.example/study") == (
        "could not connect to postgresql://ablate:***@db.example/study"
    )
    remember("postgresql://ablate:Zq9S@Wx8v-2026@db.example/study")
    assert redact("failed to resolve host 'Wx8v-2026@db.example'") == "failed to resolve host '***@db.example'"


def test_an_uncaught_exception_prints_its_traceback_with_a_given_password_masked(tmp_path):
    """An error no command worded (a driver's, a library's) may quote the storage URL: Python printed it as it is. A
    password with a space is found by no pattern in text, only as one seen (here given, as a worker is, by environment)."""
    url = "postgresql://bob:Open Sesame42@127.0.0.1:1/db"
    code = (
        "from ablate.messages.redact import redact_tracebacks\n"
        f"redact_tracebacks({url!r})\n"
        "raise RuntimeError('driver says: password Open Sesame42 rejected')\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr.startswith("Traceback (most recent call last):"), proc.stderr
    assert proc.stderr.endswith("RuntimeError: driver says: password *** rejected\n") and "Sesame" not in proc.stderr, proc.stderr

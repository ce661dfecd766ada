"""Storage URLs lose their password, and a W&B key its value, before anything prints or saves them."""

from ablate.messages.redact import redact


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

"""Storage URLs lose their password before anything prints or saves them."""

from ablate.messages.redact import redact


def test_redact_hides_the_password_and_leaves_other_urls_alone():
    assert redact("postgresql://ablate:s3cret@127.0.0.1:5432/db") == "postgresql://ablate:***@127.0.0.1:5432/db"
    assert redact("sqlite:////tmp/x.db") == "sqlite:////tmp/x.db"

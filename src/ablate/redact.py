"""Secrets out of anything ablate prints or saves: the password of a storage URL, whatever characters it holds.

Both sides of a sweep need it (the sweep's errors and results, a run's W&B config and logs), so it lives below
both rather than in either. A URL's password is found by its place (everything between `user:` and the last
`@`, so a `/`, `@`, `:`, `#` or space in it does not end it early) or as a `password=` query value; every
password of a URL this process has seen is remembered and masked wherever it appears later, in any text (a
driver's error quoting it, say), percent-encoded or not. URLs in text that were never seen whole are masked
by pattern.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, quote, unquote

MASK = "***"
_SCHEME = re.compile(r"^[A-Za-z][\w+.-]*://")
_IN_TEXT = re.compile(r"(?P<head>\b[A-Za-z][\w+.-]*://[^\s:/@]*:)(?P<password>\S+)@")
_QUERY = re.compile(r"(?i)(\bpassword=)[^&\s]+")
_seen: set[str] = set()


def remember(url: str) -> None:
    """Note the passwords of `url` (a whole URL) so that `redact` masks them in any text from now on."""
    if not _SCHEME.match(url):
        return
    rest = url[_SCHEME.match(url).end() :]
    if "@" in rest:
        userinfo = rest[: rest.rindex("@")]
        if ":" in userinfo:
            _seen.add(userinfo.split(":", 1)[1])
    if "?" in rest:
        _seen.update(v for k, v in parse_qsl(rest.split("?", 1)[1], keep_blank_values=False) if k.lower() == "password")


def redact(text: str) -> str:
    """postgresql://user:secret@host/db -> postgresql://user:***@host/db, for a URL or any text holding one."""
    remember(text)
    for secret in sorted(_seen, key=len, reverse=True):
        for form in sorted({secret, unquote(secret), quote(secret, safe=""), quote(unquote(secret), safe="")}, key=len, reverse=True):
            if len(form) >= 3:  # a 1-2 character "password" would mask innocent text everywhere
                text = text.replace(form, MASK)
    text = _IN_TEXT.sub(lambda m: f"{m.group('head')}{MASK}@", text)
    return _QUERY.sub(rf"\1{MASK}", text)

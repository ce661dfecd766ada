"""Secrets out of anything ablate prints or saves: the password of a storage URL, whatever characters it holds.

Both sides of a sweep need it (the sweep's errors and results, a run's W&B config and logs), so it lives below
both rather than in either. A URL's password is found by its place (everything between `user:` and the last
`@`, so a `/`, `@`, `:`, `#` or space in it does not end it early) or as a `password=` query value; every
password of a URL this process has seen is remembered and masked wherever it appears later, in any text,
percent-encoded or not, and so is every piece of it of FRAGMENT characters or more: a driver that parsed the URL
its own way (a raw `@` ends the password early for SQLAlchemy, and the rest becomes the "host") quotes pieces,
never the whole. Only a password a parser can take apart has pieces to mask: one of letters, digits and `-._~`
alone (URL-unreserved, raw and decoded) ends nowhere but at its ends in any URL or connection string, so it is masked
whole only, and the words and numbers it is made of ("training" of `training-2026`) stay readable in a trial's fail
reason or log line. URLs in text that were never seen whole are masked by pattern. A W&B key (`WANDB_API_KEY`, or any
`api_key=`/`password=` value) is masked too: a library's error message may quote it.
"""

from __future__ import annotations

import os
import re
import sys
import traceback
from urllib.parse import parse_qsl, quote, quote_plus, unquote

MASK = "***"
FRAGMENT = 4  # the shortest piece of a seen password that is masked on its own
_SCHEME = re.compile(r"^[A-Za-z][\w+.-]*://")
_IN_TEXT = re.compile(r"(?P<head>\b[A-Za-z][\w+.-]*://[^\s:/@]*:)(?P<password>\S+)@")
# a key=value secret, also inside a longer name (WANDB_API_KEY=..., where \b would not start a word at "API")
_QUERY = re.compile(r"(?i)((?<![a-z0-9])(?:password|api_key|apikey)=)[^&\s]+")
_ENV_SECRETS = ("WANDB_API_KEY",)  # keys a library reads from the environment and may quote
_WHOLE = re.compile(r"[A-Za-z0-9._~-]+")  # a password of these alone is never split by a parser: masked whole only
KEY_LENGTH = 20  # W&B keys are 40 characters (86 for a local server's): a shorter value is masked only after `api_key=`
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
    text = _mask_seen(text)
    for name in _ENV_SECRETS:
        if len(key := os.environ.get(name, "")) >= KEY_LENGTH:  # a real key, not a word such as "test" set in a test
            text = text.replace(key, MASK)
    text = _IN_TEXT.sub(lambda m: f"{m.group('head')}{MASK}@", text)
    return _QUERY.sub(rf"\1{MASK}", text)


def redact_tracebacks(*urls: str) -> None:
    """Print an uncaught exception's traceback with secrets masked (sys.excepthook, for the rest of this process): an
    error ablate did not word itself, a driver's or a library's, may quote a URL it was given, password and all.
    `urls`: ones this process was given (by environment) and may not have opened yet, remembered now."""
    for url in urls:
        remember(url)
    sys.excepthook = _masked_traceback


def _masked_traceback(kind: type[BaseException], value: BaseException, tb) -> None:
    sys.stderr.write(redact("".join(traceback.format_exception(kind, value, tb))))


def _mask_seen(text: str) -> str:
    """Every run of `text` that is a piece (FRAGMENT characters or more; a 3-character password whole) of a seen
    password, in any of its spellings, masked. A password is matched as it sits in its URL, `:secret@`, so a piece
    running into the `@` or `:` around it ("failed to resolve host 'ret@127.0.0.1'") is caught, and those keep."""
    wrapped = {f":{form}@" for secret in _seen for form in _spellings(secret) if len(form) >= 3}
    if not wrapped:
        return text
    whole = {f":{secret}@" for secret in _seen if _WHOLE.fullmatch(secret) and _WHOLE.fullmatch(unquote(secret))}
    starts = {w[j : j + 3] for w in wrapped for j in range(len(w) - 2)}
    out, i = [], 0
    while i < len(text):
        n, w = _longest(text, i, wrapped, whole) if text[i : i + 3] in starts else (0, "")
        if not n:
            out.append(text[i])
            i += 1
            continue
        at = w.find(text[i : i + n])
        head, tail = (":" if at == 0 else ""), ("@" if at + n == len(w) else "")
        out.append(head + ("" if out and out[-1].endswith(MASK) and not head else MASK) + tail)
        i += n
    return "".join(out)


def _spellings(secret: str) -> set[str]:
    plain = unquote(secret)
    return {secret, plain, quote(secret, safe=""), quote(plain, safe=""), quote_plus(plain)}


def _longest(text: str, i: int, wrapped: set[str], whole: set[str]) -> tuple[int, str]:
    """The longest run of `text` from `i` that is a maskable piece of one of `wrapped` (of one in `whole`, only a run
    holding all of its password), and that one; (0, "") if none."""
    best = (0, "")
    for w in wrapped:
        n = 3
        while i + n < len(text) and text[i : i + n + 1] in w:
            n += 1
        piece = text[i : i + n]
        maskable = w[1:-1] in piece if w in whole else n >= FRAGMENT or piece == w[1:-1]
        if piece in w and n > best[0] and maskable:
            best = (n, w)
    return best

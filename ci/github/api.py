"""A read-only GitHub REST client for the CI tools: JSON GETs, retries, paging, typed fields.

``GitHubApi(token, base)`` is a callable ``url -> (decoded JSON, next page URL or None)`` and
``GitHubApi.pages(url, key)`` yields the objects of a paged list. ``base`` is the REST root:
``https://api.github.com``, or on GitHub Enterprise Server ``https://HOST/api/v3``;
:func:`api_base` reads it from ``GITHUB_API_URL`` as Actions sets it. Transport (the token
only to the base's origin, https unless loopback, a deadline per request, a byte cap per
answer) is :mod:`ci.github.http_client`; docs/http-client.md lists every promise and its test.

Everything that keeps the history from being read raises :class:`ApiError` (the callers'
"unreadable" exit 2) with one line: an HTTP error (401, 403 and 404 name the token permission
they usually mean), a deadline, a reset connection, an answer over the cap, a malformed answer,
a body that is not JSON, a field of the wrong type (:func:`field`), a ``Link`` header over
:data:`MAX_LINK` characters or that does not parse, a ``rel="next"`` that leaves the origin,
comes back to a page already read or goes past ``max_pages``, a run past ``max_items`` runs and
jobs, a ``retry-after``/``x-ratelimit-reset`` that is not 1 to 18 ASCII digits (``retry-after``
may also be an HTTP date). Retried, at most ``attempts`` times in all, are only: a 429, a 5xx,
a 403 that GitHub marks as a rate limit (``retry-after``, ``x-ratelimit-remaining: 0`` or "rate
limit" in the message), and a :class:`TransportError` (a connection that failed, was reset or
closed before the whole answer: a chunked body cut short, a body shorter than its
``Content-Length``). Nothing else is: not another 4xx, a request past its deadline, a malformed
answer, an answer over the cap, a body that is not JSON, a refused URL or redirect, a proxy that
refuses the tunnel. A 5xx or a transport failure pauses 1 s, doubling; a rate limit waits
``retry-after`` seconds, else until ``x-ratelimit-reset``, else a minute, doubling; a wait
beyond ``max_wait`` seconds, or beyond what is left of the run's deadline (``run_seconds``),
fails at once saying when the limit resets. The run's deadline is checked before each request
and pause, after each page is decoded and after the caller has processed it. The bounds are
one :class:`Limits`; the clock, the monotonic clock and the sleeper one :class:`Clocks`, so
tests run the backoff without sleeping. Imports the stdlib and
:mod:`ci.github.http_client` only; never torch, ``impl`` or test code.
"""
from __future__ import annotations

import datetime as dt
import email.utils
import json
import re
import reprlib
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

from ci.github.http_client import ApiError, DeadlineExceeded, OriginClient, TransportError, origin_of

__all__ = ["ApiError", "Clocks", "DeadlineExceeded", "GitHubApi", "Limits", "api_base", "field", "next_link",
           "path_id"]

DEFAULT_API_URL = "https://api.github.com"
RUN_SECONDS = 900.0
MAX_LINK = 8 * 1024             # characters of Link header; GitHub's (next, last, prev, first) are < 1 KiB
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")       # RFC 9110 token: one character class, linear
_DIGITS = re.compile(r"[0-9]{1,18}")      # a header's number: ASCII digits only
_OWS = " \t\r\n"                 # \r\n: a folded header line arrives joined by http.client
_TYPE_WORDS = {int: "an integer", float: "a number", str: "a string", bool: "a boolean", list: "a list",
               dict: "an object", type(None): "null"}


def next_link(header: str | None) -> str | None:
    """The ``rel="next"`` URL of a ``Link`` header (RFC 8288: ``<url>; rel="next"``, ``rel=next``,
    ``rel = "next"``, ``rel="next last"``; link-values separated by commas), or None.

    One pass over the header, no backtracking pattern, so the time is linear in its length; a
    header over :data:`MAX_LINK` characters, one that does not parse, or two different next URLs
    is an :class:`ApiError` (paging that stopped silently would read as a shorter history)."""
    if header is None:
        return None
    if len(header) > MAX_LINK:
        raise ApiError(f"the Link header is {len(header)} characters, over the {MAX_LINK}-character limit")
    found: str | None = None
    pos, end = 0, len(header)
    while True:
        while pos < end and header[pos] in _OWS + ",":
            pos += 1
        if pos == end:
            return found
        if header[pos] != "<":
            raise _bad_link(header, pos, "expected '<'")
        close = header.find(">", pos + 1)
        if close < 0 or "<" in header[pos + 1:close]:
            raise _bad_link(header, pos, "a '<' without its '>'")
        url, pos = header[pos + 1:close].strip(), close + 1
        rels: list[str] = []
        while True:                                  # ; name [= token | "quoted"] ...
            while pos < end and header[pos] in _OWS:
                pos += 1
            if pos == end or header[pos] == ",":
                break
            if header[pos] != ";":
                raise _bad_link(header, pos, "expected ';' or ','")
            pos += 1
            while pos < end and header[pos] in _OWS:
                pos += 1
            name = _TOKEN.match(header, pos)
            if not name:
                raise _bad_link(header, pos, "expected a parameter name")
            pos = name.end()
            while pos < end and header[pos] in _OWS:
                pos += 1
            value = ""
            if pos < end and header[pos] == "=":
                pos += 1
                while pos < end and header[pos] in _OWS:
                    pos += 1
                value, pos = _param_value(header, pos)
            if name.group().lower() == "rel":
                rels.extend(value.lower().split())
        if "next" in rels:
            if found is not None and found != url:
                raise ApiError(f"the Link header has two different rel=\"next\" URLs: {found!r} and {url!r}")
            found = url


def _param_value(header: str, pos: int) -> tuple[str, int]:
    """A token or a quoted string (backslash escapes) starting at ``pos``, and the position after it."""
    if pos < len(header) and header[pos] == '"':
        out, pos = [], pos + 1
        while pos < len(header):
            char = header[pos]
            if char == '"':
                return "".join(out), pos + 1
            if char == "\\" and pos + 1 < len(header):
                pos += 1
                char = header[pos]
            out.append(char)
            pos += 1
        raise _bad_link(header, pos, "a quoted string without its closing quote")
    token = _TOKEN.match(header, pos)
    if not token:
        raise _bad_link(header, pos, "expected a parameter value")
    return token.group(), token.end()


def _bad_link(header: str, pos: int, what: str) -> ApiError:
    return ApiError(f"the Link header cannot be read ({what} at character {pos}): {header[:80]!r}"
                    + ("..." if len(header) > 80 else ""))


def api_base(env: Mapping[str, str]) -> str:
    """The REST root from ``GITHUB_API_URL`` (unset or empty: api.github.com); a value that is not
    an https URL (http only on loopback) is an :class:`ApiError` naming the variable."""
    value = (env.get("GITHUB_API_URL") or "").strip()
    if not value:
        return DEFAULT_API_URL
    what = "GITHUB_API_URL must be the REST API root, an https URL such as " \
           f"{DEFAULT_API_URL} (GitHub Enterprise Server: https://HOST/api/v3)"
    origin_of(value, what)
    if "?" in value or "#" in value:
        raise ApiError(f"{what}: no query or fragment, got {value!r}")
    return value.rstrip("/")


# ---------------------------------------------------------------- typed fields

def _words(kinds: tuple[type, ...]) -> str:
    return " or ".join(_TYPE_WORDS.get(k, k.__name__) for k in kinds)


def _got(value: Any) -> str:
    """The type and a short, bounded repr (reprlib stops at a few items and levels, whatever the size)."""
    text = reprlib.repr(value)
    return f"{_TYPE_WORDS.get(type(value), type(value).__name__)} {text[:40]}{'...' if len(text) > 40 else ''}"


def field(obj: Any, key: str, *kinds: type, where: str, required: bool = True) -> Any:
    """``obj[key]`` when it is one of ``kinds`` (``bool`` is never an ``int``); a missing key is
    None unless ``required``; anything else is an :class:`ApiError` naming ``where``, the key and
    what was expected."""
    if not isinstance(obj, dict):
        raise ApiError(f"{where}: expected an object, got {_got(obj)}")
    if key not in obj:
        if required:
            raise ApiError(f"{where}: no '{key}' field (expected {_words(kinds)})")
        return None
    value = obj[key]
    if type(value) not in kinds:          # exact types: True is not an id, a float is not a count
        raise ApiError(f"{where}: '{key}' is {_got(value)}, expected {_words(kinds)}")
    return value


def path_id(value: Any, what: str) -> int:
    """An id that goes into a URL path: a non-negative int (not a bool, not a string)."""
    if type(value) is not int or value < 0:
        raise ApiError(f"{what}: expected a non-negative integer id, got {_got(value)}")
    return value


# ---------------------------------------------------------------- the client

@dataclass(frozen=True)
class Limits:
    """What one run may spend reading the API (docs/http-client.md)."""
    request_seconds: float = 20.0          # wall clock per request, connect to last byte (an answer takes < 1 s)
    run_seconds: float = RUN_SECONDS       # wall clock for the whole run, retry waits included
    attempts: int = 5                      # per request, counting the first
    max_wait: float = 300.0                # the longest rate-limit wait honoured
    max_body: int = 8 * 1024 * 1024        # bytes per answer; a page of 100 runs or jobs is under 1 MiB
    max_pages: int = 100                   # per listing: 10 000 runs or jobs at per_page=100
    max_items: int = 50_000                # runs and jobs of every listing of the run, together


@dataclass(frozen=True)
class Clocks:
    """Time as the client sees it; tests pass a fake whose sleep advances the other two."""
    sleep: Callable[[float], None] = time.sleep
    wall: Callable[[], float] = time.time          # for x-ratelimit-reset (epoch seconds)
    monotonic: Callable[[], float] = time.monotonic   # for the run's deadline

def _explain(status: int, message: str) -> str:
    if status == 401:
        return "the token was refused (expired or not a GitHub token)"
    if status == 403:
        return ("the token may not read Actions history: it needs `actions: read` (workflow "
                "`permissions:`) or, for a personal token, the `repo`/Actions read scope")
    if status == 404:
        return ("not found: the repository or workflow does not exist, or the token cannot see it "
                "(a private repository needs `actions: read` in the workflow's `permissions:`)")
    return message or "unexpected response"


class GitHubApi:
    """GET with the token, JSON decoded, ``Link: rel="next"`` returned for paging."""

    def __init__(self, token: str, base: str = DEFAULT_API_URL, limits: Limits = Limits(),
                 clocks: Clocks = Clocks(), proxy: str | None = None):
        if not token.isascii() or not token.isprintable() or " " in token:
            raise ApiError("GITHUB_TOKEN has characters a token never has (spaces, control or non-ASCII characters)")
        self.token, self.base, self.limits, self.clocks = token, base.rstrip("/"), limits, clocks
        self._start = clocks.monotonic()
        self.items = 0                          # listed objects read so far (``max_items``)
        self.http = OriginClient(self.base, max_body=limits.max_body, what="the API root", proxy=proxy)

    def url(self, path_or_url: str) -> str:
        if not path_or_url.startswith(("http://", "https://")):
            return self.base + path_or_url
        self.http.check(path_or_url, "a next-page link")
        return path_or_url

    def check_deadline(self, what: str) -> None:
        """Raise :class:`DeadlineExceeded` when the run's deadline has passed (``what`` names the work)."""
        if self.clocks.monotonic() - self._start >= self.limits.run_seconds:
            raise DeadlineExceeded(f"{what}: the run's {self.limits.run_seconds:g}-second deadline has passed")

    def _left(self, full: str) -> float:
        left = self.limits.run_seconds - (self.clocks.monotonic() - self._start)
        if left <= 0:
            raise DeadlineExceeded(f"GET {full}: the run's {self.limits.run_seconds:g}-second deadline has passed")
        return left

    def __call__(self, url: str) -> tuple[Any, str | None]:
        full = self.url(url)
        attempts = self.limits.attempts
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                response = self.http.get(full, self._headers(), min(self.limits.request_seconds, self._left(full)))
            except TransportError as exc:
                if last:
                    raise ApiError(f"{exc} ({attempts} attempts)") from None
                self._pause(full, 2.0 ** attempt)
                continue
            status, headers, body = response.status, response.headers, response.body
            if status == 200:
                data = _decode(full, body)
                try:
                    link = next_link(_link_header(headers))
                except ApiError as exc:
                    raise ApiError(f"GET {full}: {exc}") from None
                self._left(full)                    # decoding a large page takes time too
                return data, link
            message = _message(body)
            try:
                wait = self._rate_limit_wait(status, headers, message, attempt)
            except ApiError as exc:
                raise ApiError(f"GET {full}: {exc}") from None
            if wait is None and status < 500:
                raise ApiError(f"GET {full}: HTTP {status}: {_explain(status, message)}")
            if last:
                raise ApiError(f"GET {full}: HTTP {status} {message} ({attempts} attempts)".rstrip())
            self._pause(full, wait if wait is not None else 2.0 ** attempt)
        raise AssertionError("unreachable")

    def pages(self, url: str, key: str) -> Iterator[dict[str, Any]]:
        """The objects of ``key`` on every page, fetched lazily; a next link that was already
        read, leaves the origin, a listing over ``max_pages`` pages, or a page that takes the run
        past ``max_items`` objects (all listings together) is an :class:`ApiError`."""
        seen: set[str] = set()
        next_url: str | None = url
        while next_url:
            full = self.url(next_url)
            if full in seen:
                raise ApiError(f"GET {url}: the next-page link {full} points to a page already read")
            if len(seen) >= self.limits.max_pages:
                raise ApiError(f"GET {url}: more than {self.limits.max_pages} pages; the listing does not end")
            seen.add(full)
            data, next_url = self(full)
            items = field(data, key, list, where=f"GET {full}")
            self.items += len(items)
            if self.items > self.limits.max_items:
                raise ApiError(f"GET {full}: more than {self.limits.max_items} runs and jobs in this run; "
                               f"the history is too large to read")
            for i, item in enumerate(items):
                if not isinstance(item, dict):
                    raise ApiError(f"GET {full}: entry {i} of '{key}' is {_got(item)}, expected an object")
                yield item
            self._left(full)        # the caller's work on the page counts against the run's deadline

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28", "User-Agent": "dspark-suite-ci"}

    def _pause(self, full: str, seconds: float) -> None:
        left = self._left(full)
        if seconds >= left:
            raise DeadlineExceeded(f"GET {full}: a retry in {seconds:.0f} s would pass the run's "
                                   f"{self.limits.run_seconds:g}-second deadline ({left:.0f} s left)")
        self.clocks.sleep(seconds)

    def _rate_limit_wait(self, status: int, headers: Mapping[str, str], message: str, attempt: int) -> float | None:
        """Seconds to wait before retrying a rate-limited request; None when it is not one."""
        if status not in (403, 429):
            return None
        retry_after, remaining = headers.get("retry-after"), headers.get("x-ratelimit-remaining")
        limited = status == 429 or retry_after is not None or remaining == "0" or "rate limit" in message.lower()
        if not limited:
            return None
        reset = headers.get("x-ratelimit-reset")
        if retry_after is not None:
            wait = _retry_after(status, retry_after, self.clocks.wall())
        elif remaining == "0" and reset is not None:
            wait = max(0.0, header_number(status, "x-ratelimit-reset", reset) - self.clocks.wall()) + 1.0
        else:
            wait = 60.0 * 2 ** attempt
        if wait > self.limits.max_wait:
            resume = dt.datetime.fromtimestamp(self.clocks.wall() + wait, dt.timezone.utc).strftime(
                "%Y-%m-%dT%H:%M:%SZ")
            raise ApiError(f"rate limited (HTTP {status}); GitHub asks to wait {wait:.0f} s, until {resume}, "
                           f"longer than the {self.limits.max_wait:.0f} s this check waits")
        return wait


def header_number(status: int, name: str, value: str) -> int:
    """A header's whole number: ASCII digits only (``str.isdigit`` is true for ``²``, which no
    number parser takes), at most 18 of them; anything else is an :class:`ApiError` naming the header."""
    text = value.strip()
    if not _DIGITS.fullmatch(text):
        raise ApiError(f"HTTP {status}: the {name} header is not a whole number "
                       f"(up to 18 ASCII digits): {text[:40]!r}")
    return int(text)


def _retry_after(status: int, value: str, now: float) -> float:
    """``Retry-After``: seconds, or an HTTP date (RFC 9110); anything else is an :class:`ApiError`."""
    text = value.strip()
    if _DIGITS.fullmatch(text) or not text.isascii() or not text[:1].isalpha():
        return float(header_number(status, "retry-after", text))
    try:
        when = email.utils.parsedate_to_datetime(text)
        stamp = (when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        raise ApiError(f"HTTP {status}: the retry-after header is neither a number of seconds nor an "
                       f"HTTP date: {text[:40]!r}") from None
    return max(0.0, stamp - now)


def _link_header(headers: Mapping[str, str]) -> str | None:
    """Every ``Link`` field of an answer as one value (several fields are one comma-separated list)."""
    get_all = getattr(headers, "get_all", None)
    values = get_all("Link") if get_all else [headers.get("Link")]
    values = [v for v in values or () if v is not None]
    return ", ".join(values) if values else None


def _message(body: bytes) -> str:
    """The ``message`` of a JSON error body, on one line and short (it is the server's text)."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return ""
    message = data.get("message") if isinstance(data, dict) else None
    return " ".join(message.split())[:200] if isinstance(message, str) else ""


def _decode(full: str, body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:    # JSONDecodeError, UnicodeDecodeError, deep nesting
        head = body[:60].decode("utf-8", "replace")
        raise ApiError(f"GET {full}: the response is not JSON ({exc.__class__.__name__}; begins {head!r})") from None

"""A read-only GitHub REST client for the CI tools: GET, JSON, paging, rate limits, clear errors.

``GitHubApi(token, base)`` is a callable ``url -> (decoded JSON, next page URL or None)``.
``base`` is the REST root: ``https://api.github.com``, or on GitHub Enterprise Server
``https://HOST/api/v3``; :func:`api_base` reads it from ``GITHUB_API_URL`` as Actions sets it.
A path is appended to the base; a ``Link: rel="next"`` URL (absolute, as GitHub sends it) is
followed as given, but only on the base's own scheme and host: the token never goes elsewhere.

Everything that keeps the history from being read raises :class:`ApiError` (the callers'
"unreadable" exit 2): an HTTP error (401, 403 and 404 name the token permission they usually
mean), a timeout, a reset connection, a body that is not JSON. Rate limits are waited out
as GitHub's REST documentation asks: on 403/429, ``retry-after`` seconds if present, else
until ``x-ratelimit-reset`` when ``x-ratelimit-remaining`` is 0, else a minute, doubling on
each retry; a wait beyond ``max_wait`` seconds fails at once, saying when the limit resets.
Transient failures (5xx, timeouts, resets) are retried with a doubling pause. The clock and
the sleeper are parameters, so tests run the backoff without sleeping. urllib only.
"""
from __future__ import annotations

import datetime as dt
import http.client
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Mapping

DEFAULT_API_URL = "https://api.github.com"
_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="next"')
_TRANSIENT = (OSError, http.client.HTTPException)   # URLError, timeouts and resets are OSErrors


class ApiError(RuntimeError):
    """The API cannot be read: HTTP error, network failure, rate limit, or a body that is not JSON."""


def next_link(header: str | None) -> str | None:
    """The ``rel="next"`` URL of a GitHub ``Link`` header."""
    match = _NEXT.search(header or "")
    return match.group(1) if match else None


def api_base(env: Mapping[str, str]) -> str:
    """The REST root from ``GITHUB_API_URL`` (unset or empty: api.github.com); a value that is
    not an http(s) URL is an :class:`ApiError` naming the variable."""
    value = (env.get("GITHUB_API_URL") or "").strip()
    if not value:
        return DEFAULT_API_URL
    parts = urllib.parse.urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ApiError(f"GITHUB_API_URL must be the REST API root, an http(s) URL such as {DEFAULT_API_URL} "
                       f"(GitHub Enterprise Server: https://HOST/api/v3), got {value!r}")
    return value.rstrip("/")


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

    def __init__(self, token: str, base: str = DEFAULT_API_URL, *, timeout: float = 30.0, attempts: int = 5,
                 max_wait: float = 300.0, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.time):
        self.token, self.base, self.timeout = token, base.rstrip("/"), timeout
        self.attempts, self.max_wait, self.sleep, self.clock = attempts, max_wait, sleep, clock
        origin = urllib.parse.urlsplit(self.base)
        self._origin = (origin.scheme, origin.netloc)

    def url(self, path_or_url: str) -> str:
        if not path_or_url.startswith(("http://", "https://")):
            return self.base + path_or_url
        parts = urllib.parse.urlsplit(path_or_url)
        if (parts.scheme, parts.netloc) != self._origin:
            raise ApiError(f"refusing to send the token to {parts.scheme}://{parts.netloc} "
                           f"(a next-page link outside the API root {self.base})")
        return path_or_url

    def __call__(self, url: str) -> tuple[Any, str | None]:
        full = self.url(url)
        for attempt in range(self.attempts):
            last = attempt == self.attempts - 1
            try:
                status, headers, body = self._get(full)
            except ValueError as exc:      # a URL urllib cannot send (a malformed next link)
                raise ApiError(f"GET {full}: {exc}") from None
            except _TRANSIENT as exc:
                if last:
                    raise ApiError(f"GET {full}: {_reason(exc)} ({self.attempts} attempts)") from None
                self.sleep(2.0 ** attempt)
                continue
            if status == 200:
                return _decode(full, body), next_link(headers.get("Link"))
            message = _message(body)
            wait = self._rate_limit_wait(status, headers, message, attempt)
            if wait is None and status < 500:
                raise ApiError(f"GET {full}: HTTP {status}: {_explain(status, message)}")
            if last:
                raise ApiError(f"GET {full}: HTTP {status} {message} ({self.attempts} attempts)".rstrip())
            self.sleep(wait if wait is not None else 2.0 ** attempt)
        raise AssertionError("unreachable")

    def _get(self, full: str) -> tuple[int, Mapping[str, str], bytes]:
        request = urllib.request.Request(full, headers={
            "Authorization": f"Bearer {self.token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "dspark-suite-ci",
        })
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:   # noqa: S310 - http(s) only
                return response.status, response.headers, response.read()
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, exc.headers, exc.read()

    def _rate_limit_wait(self, status: int, headers: Mapping[str, str], message: str, attempt: int) -> float | None:
        """Seconds to wait before retrying a rate-limited request; None when it is not one."""
        if status not in (403, 429):
            return None
        retry_after, remaining = headers.get("retry-after"), headers.get("x-ratelimit-remaining")
        limited = status == 429 or retry_after is not None or remaining == "0" or "rate limit" in message.lower()
        if not limited:
            return None
        if retry_after is not None and retry_after.strip().isdigit():
            wait = float(retry_after)
        elif remaining == "0" and (headers.get("x-ratelimit-reset") or "").strip().isdigit():
            wait = max(0.0, float(headers["x-ratelimit-reset"]) - self.clock()) + 1.0
        else:
            wait = 60.0 * 2 ** attempt
        if wait > self.max_wait:
            resume = dt.datetime.fromtimestamp(self.clock() + wait, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            raise ApiError(f"rate limited (HTTP {status}); GitHub asks to wait {wait:.0f} s, until {resume}, "
                           f"longer than the {self.max_wait:.0f} s this check waits")
        return wait


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    return f"{type(exc).__name__}: {reason or exc}"


def _message(body: bytes) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return ""
    return str(data.get("message", "")) if isinstance(data, dict) else ""


def _decode(full: str, body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError as exc:    # JSONDecodeError and UnicodeDecodeError
        head = body[:60].decode("utf-8", "replace")
        raise ApiError(f"GET {full}: the response is not JSON ({exc.__class__.__name__}; begins {head!r})") from None

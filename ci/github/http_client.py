"""One HTTP GET for tools that read an API with a token: origin-bound, deadlined, size-capped.

:class:`OriginClient` sends ``GET`` to one *origin* (scheme, host, port) and nothing else; the
promises are listed in docs/http-client.md and each has a test in registered/test_ci_http_client.py:

* the headers it is given (the token among them) go only to its origin. A redirect to another
  origin is **refused** (an :class:`ApiError`), never followed: every answer the tools read is
  JSON from the API itself, so a cross-origin hop is a misconfiguration or an attack, and
  following it even without the token would send the request path to a host nobody chose and
  read that host's unauthenticated answer as if the API had sent it. Redirects inside the origin
  are followed, at most :data:`MAX_REDIRECTS` hops, never the same URL twice. A change of scheme
  (https to http) or port is another origin;
* ``https`` unless the host is loopback (``localhost``, 127.0.0.0/8, ``::1``), checked on the
  URL before any connection or name lookup;
* a wall-clock deadline per request, from connecting to the last byte: a timer shuts the
  socket down when it passes, so a server that drips one byte every few seconds is cut off
  (a socket timeout alone restarts with every byte);
* a byte cap on a body, read in chunks: a ``Content-Length`` over the cap or the cap + 1st byte
  is an :class:`ApiError`, so one answer's memory is bounded whatever the server sends;
* a whole answer or none: a ``Content-Length`` that is not 1 to 18 ASCII digits (or two different
  ones) is an :class:`ApiError`; a body shorter than its ``Content-Length`` (the connection closed
  early) is a :class:`TransportError`, like a reset or a chunked body cut short; an answer
  ``http.client`` cannot parse (a line over 64 KiB, over 100 header lines, a bad status line) is
  an :class:`ApiError`, not a :class:`TransportError`: the caller does not retry it.

Proxy variables are ignored: a proxy is one more party on the token's path, so it is used only
when the caller names one (``proxy="http://host:port"``, a tool's ``--proxy``), only for an https
origin (an http one, loopback included, is refused: the token would cross to the proxy in the clear),
and then only as a ``CONNECT`` tunnel: the proxy is told the origin's host and port and nothing else (no token, no
path, no credentials of its own), and TLS runs end to end through it to the origin, whose
certificate is checked as without a proxy. The deadline and the cap hold through the tunnel; a
proxy that refuses the tunnel is an :class:`ApiError` (not retried). Retries, rate limits and pagination
are the caller's (:mod:`ci.github.api`). Stdlib only; imports nothing from the project.
"""
from __future__ import annotations

import http.client
import ipaddress
import re
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import Mapping

MAX_REDIRECTS = 5
CHUNK = 64 * 1024
REDIRECTS = frozenset({301, 302, 303, 307, 308})
_DEFAULT_PORT = {"http": 80, "https": 443}
_DIGITS = re.compile(r"[0-9]{1,18}")      # ASCII only: str.isdigit() is true for "²", int() is not


class ApiError(RuntimeError):
    """The answer cannot be read: refused URL, network failure, deadline, size cap, HTTP error, shape."""


class DeadlineExceeded(ApiError):
    """A request (or the whole run) ran past its wall-clock deadline."""


class TransportError(ApiError):
    """The connection failed, was reset or closed before a whole answer arrived (worth one more
    try): an ``OSError``, a chunked body cut short, a body shorter than its ``Content-Length``."""


@dataclass(frozen=True)
class Origin:
    scheme: str
    host: str        # lower case, IPv6 without brackets
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]      # an http.client.HTTPMessage: names are case-insensitive
    body: bytes
    url: str                        # the URL that answered (after same-origin redirects)


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback IP literal; names are never resolved for this."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def redacted(url: str) -> str:
    """``url`` with any ``user:password@`` replaced by ``***@``: a refusal never prints a credential."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, tail = rest.partition("/")
    if "@" in authority:
        authority = "***@" + authority.rsplit("@", 1)[1]
    return f"{scheme}{sep}{authority}{slash}{tail}"


def origin_of(url: str, what: str = "URL") -> Origin:
    """The origin of an absolute http(s) URL; no user:password part; https unless loopback."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ApiError(f"{what}: not a valid URL ({exc}): {redacted(url)!r}") from None
    scheme, host = parts.scheme.lower(), (parts.hostname or "")
    if scheme not in _DEFAULT_PORT or not host:
        raise ApiError(f"{what}: expected an absolute http(s) URL, got {redacted(url)!r}")
    if parts.username is not None or parts.password is not None:
        raise ApiError(f"{what}: a URL with user:password@ is refused (the token goes in a header), "
                       f"got {redacted(url)!r}")
    if scheme != "https" and not is_loopback(host):
        raise ApiError(f"{what}: https is required unless the host is loopback "
                       f"(localhost, 127.0.0.0/8, ::1), got {redacted(url)!r}")
    return Origin(scheme, host, port or _DEFAULT_PORT[scheme])


def proxy_of(url: str) -> Origin:
    """The origin of a ``CONNECT`` proxy named by the caller: ``http://host[:port]`` (the tunnel's TLS
    is the origin's own), no credentials, no path."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ApiError(f"--proxy: not a valid URL ({exc}): {redacted(url)!r}") from None
    if parts.scheme.lower() != "http" or not parts.hostname:
        raise ApiError(f"--proxy: expected http://HOST[:PORT] (a CONNECT proxy; TLS runs through it to the API), "
                       f"got {redacted(url)!r}")
    if parts.username is not None or parts.password is not None:
        raise ApiError(f"--proxy: proxy credentials are not supported (they would travel in the clear), "
                       f"got {redacted(url)!r}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ApiError(f"--proxy: a proxy URL has no path or query, got {redacted(url)!r}")
    return Origin("http", parts.hostname.lower(), port or 3128)


class OriginClient:
    """GET on one origin with a per-request deadline and a body cap (see the module doc); with
    ``proxy``, through a ``CONNECT`` tunnel of that proxy."""

    def __init__(self, base: str, *, max_body: int, what: str = "URL", proxy: str | None = None):
        self.origin = origin_of(base, what)
        self.max_body = max_body
        self.proxy = proxy_of(proxy) if proxy else None
        if self.proxy is not None and self.origin.scheme != "https":
            # the tunnel would carry the request, token included, in the clear to the proxy, and
            # CONNECT to a loopback host reaches the proxy's own loopback, not this machine's
            raise ApiError(f"--proxy needs an https API URL (over http the proxy would read the token), "
                           f"got {self.origin}")

    def check(self, url: str, why: str) -> None:
        """Raise unless ``url`` is on this client's origin (``why`` names where the URL came from)."""
        other = origin_of(url, why)
        if other != self.origin:
            raise ApiError(f"refusing to send the token to {other} ({why} leaves the API origin {self.origin})")

    def get(self, url: str, headers: Mapping[str, str], timeout: float) -> Response:
        """One answer, following same-origin redirects; ``timeout`` is wall-clock seconds for all of it."""
        end = time.monotonic() + timeout
        self.check(url, "the URL")
        seen = {url}
        for _ in range(MAX_REDIRECTS + 1):
            response = self._once(url, headers, end, timeout)
            if response.status not in REDIRECTS:
                return response
            location = response.headers.get("Location")
            if not location:
                raise ApiError(f"GET {url}: HTTP {response.status} without a Location header")
            target = urllib.parse.urljoin(url, location)
            self.check(target, f"a redirect (HTTP {response.status}) from {url}")
            if target in seen:
                raise ApiError(f"GET {url}: the redirect to {target} loops back to a URL already requested")
            seen.add(target)
            url = target
        raise ApiError(f"GET {url}: more than {MAX_REDIRECTS} redirects")

    def _once(self, url: str, headers: Mapping[str, str], end: float, timeout: float) -> Response:
        parts = urllib.parse.urlsplit(url)
        target = urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, ""))
        remaining = end - time.monotonic()
        if remaining <= 0:
            raise DeadlineExceeded(f"GET {url}: timed out: no time left of the {timeout:g}-second deadline")
        kind = http.client.HTTPSConnection if self.origin.scheme == "https" else http.client.HTTPConnection
        if self.proxy is None:
            conn = kind(self.origin.host, self.origin.port, timeout=remaining)
        else:   # CONNECT host:port to the proxy, then the request (TLS for https) inside the tunnel
            conn = kind(self.proxy.host, self.proxy.port, timeout=remaining)
            conn.set_tunnel(self.origin.host, self.origin.port)
        fired, held = threading.Event(), []

        def cut() -> None:
            """The deadline passed: shut the socket down so a blocked read (headers, body, TLS)
            returns at once. The connection drops ``conn.sock`` once a response owns it, hence
            ``held``; the base class's shutdown acts on the descriptor, also under TLS."""
            fired.set()
            sock = held[0] if held else conn.sock
            if sock is not None:
                try:
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)
                except OSError:
                    pass

        timer = threading.Timer(remaining, cut)
        timer.daemon = True
        timer.start()
        try:
            conn.connect()
            held.append(conn.sock)
            conn.request("GET", target, headers=dict(headers))
            answer = conn.getresponse()
            lengths = {value.strip() for value in answer.headers.get_all("Content-Length") or ()}
            if len(lengths) > 1 or not all(_DIGITS.fullmatch(value) for value in lengths):
                shown = ", ".join(sorted(repr(value[:40]) for value in lengths))
                raise ApiError(f"GET {url}: the Content-Length header is not one whole number "
                               f"(up to 18 ASCII digits): {shown[:200]}")
            if lengths and int(next(iter(lengths))) > self.max_body:
                raise ApiError(f"GET {url}: the answer is {int(next(iter(lengths)))} bytes, "
                               f"over the {self.max_body}-byte cap")
            chunks, size = [], 0
            while True:
                chunk = answer.read(min(CHUNK, self.max_body + 1 - size))
                if fired.is_set() or time.monotonic() > end:
                    raise DeadlineExceeded(f"GET {url}: timed out: no complete answer within {timeout:g} s")
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
                if size > self.max_body:
                    raise ApiError(f"GET {url}: the answer is over the {self.max_body}-byte cap")
            if answer.length:       # what is left of the Content-Length: the connection closed early
                raise TransportError(f"GET {url}: the connection closed after {size} of the "
                                     f"{size + answer.length} bytes its Content-Length announces")
            return Response(answer.status, answer.headers, b"".join(chunks), url)
        except ApiError:
            raise
        except (ValueError, http.client.InvalidURL) as exc:     # a path or header http.client will not send
            # the exception's text may quote a header value, the token among them: never printed
            raise ApiError(f"GET {url!r}: cannot be sent ({type(exc).__name__}: a character the request line "
                           f"or a header may not carry)") from None
        except (OSError, http.client.HTTPException) as exc:
            if self.proxy is not None and str(exc).startswith("Tunnel connection failed"):
                # the proxy answered and said no: its configuration, not the network (not retried)
                raise ApiError(f"GET {url}: the proxy {self.proxy} refused the tunnel ({_reason(exc)})") from None
            if fired.is_set() or time.monotonic() > end:
                raise DeadlineExceeded(f"GET {url}: timed out: no complete answer within {timeout:g} s") from None
            if isinstance(exc, (OSError, http.client.IncompleteRead)):  # RemoteDisconnected is an OSError
                raise TransportError(f"GET {url}: {type(exc).__name__}: {_reason(exc)}") from None
            # an answer arrived but http.client cannot parse it (a line over 64 KiB, over 100 header
            # lines, a bad status line or transfer coding): the server's doing, not worth a retry
            raise ApiError(f"GET {url}: a malformed answer ({type(exc).__name__}: {_reason(exc)})") from None
        finally:
            timer.cancel()
            conn.close()


def _reason(exc: BaseException) -> str:
    text = " ".join(str(getattr(exc, "reason", None) or exc or "connection closed").split())
    return text[:200] or "connection closed"

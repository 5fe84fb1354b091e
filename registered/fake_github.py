"""An in-process fake of the GitHub REST endpoints liveness reads, serving one fixture case over real HTTP.

    with FakeGitHub(load_case("alive")) as gh:
        GitHubApi("token", gh.base)("/repos/dspark/dspark-suite/actions/workflows/nightly.yml/runs?...")

It answers as GitHub does and honours every query parameter it is sent; an unknown one is a
422, so a client cannot believe it filtered when it did not:
- ``GET /repos/{owner}/{repo}/actions/workflows/{file}``: the workflow (``state``), else 404;
- ``.../actions/workflows/{file}/runs``: ``branch``, ``event``, ``status`` (a status or a
  conclusion), ``created`` (``>=``, ``>``, ``<=``, ``<``, ``A..B`` or a bare date; dates or
  full timestamps), newest first, ``per_page`` (default 30, at most 100) and ``page``;
- ``.../actions/runs/{id}/jobs``: ``filter`` (``latest``, the default: each job name's newest
  attempt; ``all``: every attempt), ``per_page``, ``page``.
Paged answers carry a ``Link`` header whose ``next``/``last`` URLs are absolute and use the
``/repositories/{id}/...`` form GitHub sends, so a client must follow them as given. A request
without ``Authorization: Bearer`` is a 401. The case's scripted ``responses`` (status, headers,
body) are served, once each, before the real answer to the first request whose path contains
their ``path``; :meth:`FakeGitHub.script` adds more, including ``mode`` ``"reset"`` (close the
connection unanswered), ``"not_json"`` (a 200 HTML page) and ``"slow"`` (answer after ``delay`` s),
and the hostile ones a client must survive (docs/http-client.md): ``"drip"`` (one byte every
``delay`` s, of the body or, with ``where="headers"``, of the header block), ``"big"`` (``size``
bytes, with or without ``Content-Length``), ``"self_link"`` (a page whose ``Link: rel="next"`` is
its own URL) and ``"endless"`` (every page links to one more). ``repeat=True`` keeps a scripted
answer for every matching request. Every request's path and query are recorded in ``requests``,
its ``Authorization`` header (or None) in ``tokens``.
"""
from __future__ import annotations

import copy
import datetime as dt
import http.server
import json
import socket
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "liveness"
RUN_PARAMS = {"branch", "event", "status", "created", "per_page", "page"}
JOB_PARAMS = {"filter", "per_page", "page"}


def load_case(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def _stamp(value: str, end_of_day: bool = False) -> dt.datetime:
    if "T" not in value:
        day = dt.date.fromisoformat(value)
        return dt.datetime.combine(day, dt.time.max if end_of_day else dt.time.min, dt.timezone.utc)
    stamp = dt.datetime.fromisoformat(value)
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.timezone.utc)


def created_matches(created: str, spec: str) -> bool:
    """GitHub's date-range search syntax for ``created``."""
    when = _stamp(created)
    if ".." in spec:
        low, high = spec.split("..", 1)
        return (low in ("", "*") or when >= _stamp(low)) and (high in ("", "*") or when <= _stamp(high, True))
    for op, test in ((">=", lambda a, b: a >= b), ("<=", lambda a, b: a <= b), (">", lambda a, b: a > b),
                     ("<", lambda a, b: a < b)):
        if spec.startswith(op):
            bound = spec[len(op):]
            end = op in ("<=", ">") and "T" not in bound
            return test(when, _stamp(bound, end))
    return _stamp(spec) <= when <= _stamp(spec, True)


class _QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        pass      # a connection the test reset or the client abandoned on purpose


class FakeGitHub:
    def __init__(self, case: dict[str, Any], prefix: str = ""):
        self.case = copy.deepcopy(case)
        self.prefix = prefix.rstrip("/")
        self.requests: list[str] = []
        self.tokens: list[str | None] = []
        self.scripted: list[dict[str, Any]] = list(self.case.get("responses", []))
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                fake._handle(self)

            def log_message(self, *args):
                pass

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def base(self) -> str:
        return self.origin + self.prefix

    def script(self, path: str, **response: Any) -> None:
        self.scripted.append({"path": path, **response})

    def __enter__(self) -> "FakeGitHub":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # ------------------------------------------------------------ answering

    def _handle(self, req: http.server.BaseHTTPRequestHandler) -> None:
        parts = urllib.parse.urlsplit(req.path)
        self.requests.append(req.path)
        self.tokens.append(req.headers.get("Authorization"))
        for i, scripted in enumerate(self.scripted):
            if scripted["path"] in parts.path:
                if not scripted.get("repeat"):
                    del self.scripted[i]
                return self._scripted(req, scripted)
        if not req.headers.get("Authorization", "").startswith("Bearer "):
            return self._send(req, 401, {"message": "Requires authentication"})
        path = parts.path
        if not path.startswith(self.prefix + "/"):
            return self._send(req, 404, {"message": "Not Found"})
        path = path[len(self.prefix):]
        query = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
        segments = path.strip("/").split("/")
        repo = self.case["repository"]
        if segments[:1] == ["repos"] and "/".join(segments[1:3]) == repo["full_name"]:
            rest = segments[3:]
        elif segments[:2] == ["repositories", str(repo["id"])]:
            rest = segments[2:]
        else:
            return self._send(req, 404, {"message": "Not Found"})
        if rest[:2] == ["actions", "workflows"] and len(rest) in (3, 4):
            flow = self._workflow(rest[2])
            if flow is None:
                return self._send(req, 404, {"message": "Not Found"})
            if len(rest) == 3:
                return self._send(req, 200, flow)
            if rest[3] == "runs":
                return self._runs(req, parts, flow, query)
        if rest[:2] == ["actions", "runs"] and len(rest) == 4 and rest[3] == "jobs":
            return self._jobs(req, parts, rest[2], query)
        return self._send(req, 404, {"message": "Not Found"})

    def _workflow(self, key: str) -> dict[str, Any] | None:
        return next((w for w in self.case["workflows"]
                     if key in (w["path"].rsplit("/", 1)[-1], str(w["id"]))), None)

    def _runs(self, req, parts, flow, query) -> None:
        unknown = set(query) - RUN_PARAMS
        if unknown:
            return self._send(req, 422, {"message": f"unknown parameter(s) {sorted(unknown)}"})
        runs = [r for r in self.case["workflow_runs"] if r["path"] == flow["path"]]
        if "branch" in query:
            runs = [r for r in runs if r["head_branch"] == query["branch"]]
        if "event" in query:
            runs = [r for r in runs if r["event"] == query["event"]]
        if "status" in query:
            runs = [r for r in runs if query["status"] in (r["status"], r["conclusion"])]
        if "created" in query:
            runs = [r for r in runs if created_matches(r["created_at"], query["created"])]
        runs.sort(key=lambda r: (r["created_at"], str(r.get("id"))), reverse=True)   # crafted ids may be strings
        self._page(req, parts, query, runs, "workflow_runs", f"actions/workflows/{flow['id']}/runs")

    def _jobs(self, req, parts, run_id: str, query) -> None:
        unknown = set(query) - JOB_PARAMS
        if unknown or query.get("filter", "latest") not in ("latest", "all"):
            return self._send(req, 422, {"message": f"bad parameter(s) {sorted(unknown) or query.get('filter')}"})
        if not any(str(r["id"]) == run_id for r in self.case["workflow_runs"]):
            return self._send(req, 404, {"message": "Not Found"})
        jobs = list(self.case["jobs"].get(run_id, []))
        if query.get("filter", "latest") == "latest":
            newest: dict[str, int] = {}
            for j in jobs:
                newest[j["name"]] = max(newest.get(j["name"], 0), j["run_attempt"])
            jobs = [j for j in jobs if j["run_attempt"] == newest[j["name"]]]
        self._page(req, parts, query, jobs, "jobs", f"actions/runs/{run_id}/jobs")

    def _page(self, req, parts, query, items: list, key: str, canonical: str) -> None:
        try:
            per_page = min(100, int(query.get("per_page", "30")))
            page = int(query.get("page", "1"))
        except ValueError:
            return self._send(req, 422, {"message": "per_page and page must be integers"})
        pages = max(1, -(-len(items) // per_page))
        body = {"total_count": len(items), key: items[(page - 1) * per_page: page * per_page]}
        root = f"{self.base}/repositories/{self.case['repository']['id']}/{canonical}"

        def link(n: int) -> str:
            return f"{root}?{urllib.parse.urlencode({**query, 'page': str(n)})}"

        rels = ([f'<{link(page + 1)}>; rel="next"', f'<{link(pages)}>; rel="last"'] if page < pages else [])
        rels += [f'<{link(page - 1)}>; rel="prev"', f'<{link(1)}>; rel="first"'] if page > 1 else []
        self._send(req, 200, body, {"Link": ", ".join(rels)} if rels else {})

    def _scripted(self, req, scripted: dict[str, Any]) -> None:
        mode = scripted.get("mode")
        if mode == "reset":
            req.close_connection = True
            req.connection.shutdown(socket.SHUT_RDWR)
            return
        if mode == "slow":
            time.sleep(float(scripted["delay"]))
        if mode == "drip":
            return self._drip(req, float(scripted["delay"]), scripted.get("where", "body"))
        if mode == "big":
            return self._big(req, int(scripted["size"]), bool(scripted.get("content_length")))
        if mode in ("self_link", "endless"):
            query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(req.path).query))
            query["page"] = str(int(query.get("page", "1")) + (mode == "endless"))
            nxt = f"{self.origin}{urllib.parse.urlsplit(req.path).path}?{urllib.parse.urlencode(query)}"
            if mode == "self_link":
                nxt = self.origin + req.path
            return self._send(req, 200, scripted.get("body", {}), {"Link": f'<{nxt}>; rel="next"'})
        if mode == "not_json":
            page = b"<html><body>Unicorn! GitHub is down</body></html>"
            return self._raw(req, 200, page, {"Content-Type": "text/html"})
        self._send(req, scripted.get("status", 200), scripted.get("body", {}), scripted.get("headers", {}))

    @staticmethod
    def _drip(req, delay: float, where: str) -> None:
        body = b'{"total_count": 0, "workflow_runs": [], "jobs": []}'
        head = (b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode())
        slow, rest = (head, body) if where == "headers" else (body, b"")
        try:
            if where != "headers":
                req.wfile.write(head)
            for i in range(len(slow)):
                req.wfile.write(slow[i:i + 1])
                time.sleep(delay)
            req.wfile.write(rest)
        except OSError:
            pass       # the client hung up: what a deadline is for

    @staticmethod
    def _big(req, size: int, content_length: bool) -> None:
        chunk = b" " * 65536
        try:
            req.send_response(200)
            req.send_header("Content-Type", "application/json")
            if content_length:
                req.send_header("Content-Length", str(size))
            req.end_headers()
            sent = 0
            while sent < size:
                req.wfile.write(chunk[:size - sent])
                sent += len(chunk)
        except OSError:
            pass       # the client stopped reading at its cap

    def _send(self, req, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        self._raw(req, status, json.dumps(body).encode(), {"Content-Type": "application/json; charset=utf-8",
                                                           **(headers or {})})

    @staticmethod
    def _raw(req, status: int, data: bytes, headers: dict[str, str]) -> None:
        try:
            req.send_response(status)
            for name, value in headers.items():
                req.send_header(name, value)
            req.send_header("Content-Length", str(len(data)))
            req.end_headers()
            req.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass     # the client gave up (a timeout test)

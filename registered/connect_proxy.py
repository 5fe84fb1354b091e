"""A loopback CONNECT proxy for the client's proxy tests: it records each tunnel request's head
(what a proxy learns), then relays bytes both ways, or refuses, or never answers.

``mode``: "relay" (200, then a byte pipe to the named host:port, loopback targets only), "refuse"
(407 and close), "silent" (reads the request, answers nothing until the client gives up).
Test support, not a test: it registers nothing.
"""
from __future__ import annotations

import socket
import socketserver
import threading

HEAD_LIMIT = 16 * 1024


class ConnectProxy:
    def __init__(self, mode: str = "relay"):
        self.mode = mode
        self.heads: list[str] = []      # each CONNECT request head, as received
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                proxy._handle(self.request)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

            def handle_error(self, request, client_address) -> None:
                pass    # the client hung up: nothing to report

        self._server = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> "ConnectProxy":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handle(self, client: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head and len(head) < HEAD_LIMIT:
            got = client.recv(4096)
            if not got:
                return
            head += got
        text = head.split(b"\r\n\r\n", 1)[0].decode("latin-1")
        self.heads.append(text)
        if self.mode == "refuse":
            client.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
            return
        if self.mode == "silent":
            client.settimeout(30)
            try:
                client.recv(1)     # until the client's deadline shuts its end
            except OSError:
                pass
            return
        method, target = (text.split(" ") + ["", ""])[:2]
        host, _, port = target.rpartition(":")
        if method != "CONNECT" or host not in ("127.0.0.1", "localhost") or not port.isdigit():
            client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            return
        upstream = socket.create_connection((host, int(port)), timeout=10)
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        leftover = head.split(b"\r\n\r\n", 1)[1]
        if leftover:
            upstream.sendall(leftover)

        def pipe(src: socket.socket, dst: socket.socket) -> None:
            try:
                while True:
                    data = src.recv(65536)
                    if not data:
                        break
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        back = threading.Thread(target=pipe, args=(upstream, client), daemon=True)
        back.start()
        pipe(client, upstream)
        back.join(timeout=10)
        upstream.close()

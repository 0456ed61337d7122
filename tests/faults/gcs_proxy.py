"""A fault-injecting HTTP proxy in front of the GCS emulator: what a bucket does to a run on a bad day.

    with FaultProxy(upstream) as proxy:          # upstream: the emulator's URL (the `gcs` fixture)
        proxy.add(Rule("status", every=7))       # every 7th request answered 503, not forwarded
        proxy.add(Rule("reset", path="*/o/in%2Fnews.json*"))   # those requests reset, never answered
        albert(..., env={"STORAGE_EMULATOR_HOST": proxy.url})

Rules, tried in order for each request; the first that fires acts, the others only count it:

    status        answer `status` (503 by default) with a JSON error body; not forwarded
    reset         reset the connection (RST) before forwarding: the server never saw the request
    reset_after   forward, then reset instead of answering: the server did it, the answer is lost
    stall         wait `seconds` (None: until the proxy stops), then forward as usual
    hook          call `hook(method, path)` first (e.g. overwrite the object), then forward as usual

`every`: the Nth, 2Nth, ... request the rule matches fires it; `path`: a glob on the request's
path and query as sent (object names percent-encoded: `in%2Fnews.json`); `method`: one method or
any; `times`: how many times it fires at most (None: always).

GCS answers 404 for a generation of an object that is no longer its current one (without object
versioning); the emulator ignores `generation`, so the proxy enforces it on object reads
(`strict_generations`), which is what pinning a read to a generation relies on.

`proxy.log`: (method, path, action) of every request, for the tests to assert what happened.
"""

from __future__ import annotations

import fnmatch
import http.client
import json
import socket
import struct
import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_HOP_HEADERS = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-connection",
}


@dataclass
class Rule:
    action: str  # status | reset | reset_after | stall | hook
    every: int = 1
    path: str = "*"
    method: str | None = None
    status: int = 503
    seconds: float | None = None
    times: int | None = None
    hook: Callable[[str, str], None] | None = None
    seen: int = 0
    fired: int = 0

    def fires(self, method: str, path: str) -> bool:
        if self.method is not None and method != self.method:
            return False
        if not fnmatch.fnmatchcase(path, self.path):
            return False
        self.seen += 1
        if self.seen % self.every or (self.times is not None and self.fired >= self.times):
            return False
        self.fired += 1
        return True


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        pass  # a client that gave up on a stalled or reset request: what the tests cause


class FaultProxy:
    def __init__(self, upstream: str, strict_generations: bool = True):
        parsed = urllib.parse.urlsplit(upstream)
        self.upstream = (parsed.hostname or "127.0.0.1", parsed.port or 80)
        self.strict_generations = strict_generations
        self.rules: list[Rule] = []
        self.log: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = _QuietServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def add(self, rule: Rule) -> Rule:
        with self._lock:
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()

    def actions(self, action: str) -> list[str]:
        """Paths of the requests `action` was applied to."""
        return [path for _, path, done in self.log if done == action]

    def _decide(self, method: str, path: str) -> Rule | None:
        with self._lock:
            chosen = None
            for rule in self.rules:
                if rule.fires(method, path) and chosen is None:
                    chosen = rule
            self.log.append((method, path, chosen.action if chosen else "forward"))
            return chosen

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stopping.set()  # stalled requests end
        self._server.shutdown()
        self._server.server_close()


def _handler_for(proxy: FaultProxy):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet
            pass

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                data = b""
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass
                        return data
                    data += self.rfile.read(size)
                    self.rfile.readline()
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _reset(self) -> None:
            """Close with RST: the client sees its connection reset."""
            self.close_connection = True
            try:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.connection.close()
            except OSError:
                pass

        def _send(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
            self.send_response(status)
            for name, value in headers:
                if name.lower() not in _HOP_HEADERS and name.lower() != "content-length":
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
            conn = http.client.HTTPConnection(*proxy.upstream, timeout=120)
            try:
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_HEADERS}
                headers["Content-Length"] = str(len(body))
                conn.request(self.command, self.path, body=body, headers=headers)
                response = conn.getresponse()
                return response.status, response.getheaders(), response.read()
            finally:
                conn.close()

        def _stale_generation(self) -> bool:
            """A read of an object at a generation that is not its current one (GCS: 404)."""
            parts = urllib.parse.urlsplit(self.path)
            wanted = urllib.parse.parse_qs(parts.query).get("generation")
            if self.command != "GET" or not wanted or "/o/" not in parts.path:
                return False
            meta_path = parts.path.replace("/download/storage/v1/", "/storage/v1/", 1)
            conn = http.client.HTTPConnection(*proxy.upstream, timeout=120)
            try:
                conn.request("GET", meta_path, headers={"Host": self.headers.get("Host", "")})
                response = conn.getresponse()
                data = response.read()
            finally:
                conn.close()
            if response.status != 200:
                return True
            return str(json.loads(data).get("generation")) != wanted[0]

        def _handle(self) -> None:
            body = self._body()
            rule = proxy._decide(self.command, self.path)
            action = rule.action if rule else "forward"
            if action == "reset":
                self._reset()
                return
            if action == "status":
                error = {"error": {"code": rule.status, "message": f"injected {rule.status}"}}
                self._send(rule.status, [("Content-Type", "application/json")], json.dumps(error).encode())
                return
            if action == "hook":
                rule.hook(self.command, self.path)
            if action == "stall":
                proxy._stopping.wait(rule.seconds)
                if proxy._stopping.is_set():
                    self._reset()
                    return
            if proxy.strict_generations and self._stale_generation():
                error = {"error": {"code": 404, "message": "No such object (generation)"}}
                self._send(404, [("Content-Type", "application/json")], json.dumps(error).encode())
                return
            status, headers, data = self._forward(body)
            if action == "reset_after":
                self._reset()
                return
            self._send(status, headers, data)

        def do_GET(self) -> None:
            self._handle()

        do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_GET

    return Handler

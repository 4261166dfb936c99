"""A scripted HTTP blocklist server on 127.0.0.1 for the refresh tests.

    srv = ListServer().start()
    srv.serve("/list.txt", body=b"ads.test\\n", etag='"v1"')   # 200; 304 on If-None-Match
    srv.fail("/list.txt", 404)                                   # an HTTP error
    srv.hang("/list.txt")                                        # accept, never answer
    srv.serve("/list.txt", body=..., held=True); srv.proceed()   # answer only once let go
    url = srv.url("/list.txt")
    srv.requests("/list.txt")  -> [Request(path, headers, status)]

A hung request is released (the connection closed without a reply) by stop() or release(),
so nothing outlives the test. Threads only, every wait bounded.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, List, Optional


@dataclasses.dataclass
class Script:
    status: int = 200
    body: bytes = b""
    etag: Optional[str] = None
    last_modified: Optional[str] = None
    hang: bool = False
    held: bool = False  # answer (as scripted) only after proceed()


@dataclasses.dataclass
class Request:
    time: float
    path: str
    headers: Dict[str, str]
    status: int  # what was answered (0: hung, -1: held)


class ListServer:
    def __init__(self):
        self.scripts: Dict[str, Script] = {}
        self.log: List[Request] = []
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._proceed = threading.Event()
        srv = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt, *args):  # quiet
                pass

            def do_GET(self):
                path = self.path.split("?", 1)[0]
                with srv._lock:
                    sc = srv.scripts.get(path, Script(status=404))
                hdrs = {k.lower(): v for k, v in self.headers.items()}
                if sc.hang:
                    srv._record(path, hdrs, 0)
                    srv._release.wait(60)
                    self.close_connection = True
                    return
                if sc.held:
                    srv._record(path, hdrs, -1)  # -1: held, answered after proceed()
                    if not srv._proceed.wait(60) or srv._release.is_set():
                        self.close_connection = True
                        return
                status = sc.status
                if status == 200 and sc.etag and hdrs.get("if-none-match") == sc.etag:
                    status = 304
                elif (status == 200 and sc.last_modified and not sc.etag
                      and hdrs.get("if-modified-since") == sc.last_modified):
                    status = 304
                if not sc.held:
                    srv._record(path, hdrs, status)
                body = sc.body if status == 200 else (b"" if status == 304 else b"error\n")
                self.send_response(status)
                if sc.etag and status in (200, 304):
                    self.send_header("ETag", sc.etag)
                if sc.last_modified and status in (200, 304):
                    self.send_header("Last-Modified", sc.last_modified)
                self.send_header("Content-Type", "text/plain")
                if status != 304:
                    self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                if status != 304:
                    self.wfile.write(body)
                self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._th = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                    daemon=True, name=f"listserver-{self.port}")

    def _record(self, path, hdrs, status):
        with self._lock:
            self.log.append(Request(time.monotonic(), path, hdrs, status))

    # ---------------------------------------------------------------- control

    def start(self) -> "ListServer":
        self._th.start()
        return self

    def stop(self):
        self._release.set()
        self._proceed.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self._th.join(timeout=2)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def serve(self, path: str, body: bytes, etag: Optional[str] = None,
              last_modified: Optional[str] = None, held: bool = False):
        with self._lock:
            self.scripts[path] = Script(200, body, etag, last_modified, held=held)

    def proceed(self):
        """Let held requests be answered (and every later one at once)."""
        self._proceed.set()

    def fail(self, path: str, status: int = 404):
        with self._lock:
            self.scripts[path] = Script(status=status)

    def hang(self, path: str):
        with self._lock:
            self.scripts[path] = Script(hang=True)

    def release(self):
        """Let hung requests end (their connections close without a reply)."""
        self._release.set()

    # ---------------------------------------------------------------- inspection

    def requests(self, path: Optional[str] = None) -> List[Request]:
        with self._lock:
            return [r for r in self.log if path is None or r.path == path]

    def wait_requests(self, path: str, n: int, timeout: float = 10.0) -> List[Request]:
        end = time.monotonic() + timeout
        while True:
            rs = self.requests(path)
            if len(rs) >= n or time.monotonic() >= end:
                return rs
            time.sleep(0.02)

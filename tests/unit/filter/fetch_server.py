#!/usr/bin/python3
"""Local HTTP server for tests/unit/filter/test_fetch.c (loopback only).

Listens on 127.0.0.1, port 0, prints the port on stdout, serves until stdin closes (the test
holds the other end of a pipe, so the server also goes away when the test dies) or SIGTERM.

Routes (bodies are fixed; the C test knows them):
  /list        200, ETag "v1" + Last-Modified, LIST_BODY; 304 on a matching If-None-Match or
               If-Modified-Since
  /missing     404
  /slow        200 with Content-Length, sends 16 bytes, then stalls for 5 s
  /garbage     200, 4096 bytes of binary junk (NULs, high bytes)
  /big         200, Content-Length BIG bytes (refused by the client before the body)
  /bigchunked  200, chunked, BIG bytes (no Content-Length: the client counts)
  /redirect    302 -> /list        /loop  302 -> /loop (endless)
  /gzip        200, Content-Encoding: gzip of GZIP_TEXT
  /empty       200, empty body
  /headers     200, echoes the request's User-Agent, Accept-Encoding and Authorization, one
               per line
"""
import gzip
import http.server
import os
import sys
import threading
import time

LIST_BODY = b"ads.example\ntrack.example\n||banner.example^\n"
ETAG = '"v1"'
LAST_MODIFIED = "Wed, 01 Jan 2025 00:00:00 GMT"
GARBAGE = bytes((i * 7 + 3) % 256 for i in range(4096))
BIG = 2 * 1024 * 1024
GZIP_TEXT = b"compressed.example\n" * 200


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # keep the test output clean
        pass

    def send_body(self, code, body, headers=()):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        try:
            self.route()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def route(self):
        p = self.path
        if p == "/list":
            inm = self.headers.get("If-None-Match")
            ims = self.headers.get("If-Modified-Since")
            validators = [("ETag", ETAG), ("Last-Modified", LAST_MODIFIED)]
            if inm == ETAG or (inm is None and ims == LAST_MODIFIED):
                self.send_response(304)
                self.send_header("ETag", ETAG)
                self.end_headers()
                return
            self.send_body(200, LIST_BODY, validators)
        elif p == "/missing":
            self.send_body(404, b"not here\n")
        elif p == "/slow":
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"slow.example\nab")
            self.wfile.flush()
            time.sleep(5)
        elif p == "/garbage":
            self.send_body(200, GARBAGE)
        elif p == "/big":
            self.send_response(200)
            self.send_header("Content-Length", str(BIG))
            self.end_headers()
            chunk = b"x" * 65536
            for _ in range(BIG // len(chunk)):
                self.wfile.write(chunk)
        elif p == "/bigchunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b"y" * 65536
            for _ in range(BIG // len(chunk)):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.write(b"0\r\n\r\n")
        elif p == "/redirect":
            self.send_body(302, b"", [("Location", "/list")])
        elif p == "/loop":
            self.send_body(302, b"", [("Location", "/loop")])
        elif p == "/gzip":
            if "gzip" in (self.headers.get("Accept-Encoding") or ""):
                self.send_body(200, gzip.compress(GZIP_TEXT), [("Content-Encoding", "gzip")])
            else:
                self.send_body(406, b"gzip expected\n")
        elif p == "/empty":
            self.send_body(200, b"")
        elif p == "/headers":
            body = "ua=%s\nae=%s\nauthz=%s\n" % (self.headers.get("User-Agent"),
                                                 self.headers.get("Accept-Encoding"),
                                                 self.headers.get("Authorization"))
            self.send_body(200, body.encode())
        else:
            self.send_body(404, b"no route\n")


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # The client drops connections on purpose (caps, timeouts, cancel): not worth a trace.
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


def main():
    srv = Server(("127.0.0.1", 0), Handler)
    print(srv.server_address[1], flush=True)

    def watch_stdin():
        sys.stdin.buffer.read()  # EOF: the test closed its end or died
        os._exit(0)

    threading.Thread(target=watch_stdin, daemon=True).start()
    srv.serve_forever()


if __name__ == "__main__":
    main()

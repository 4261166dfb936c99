"""A private network namespace holding only a loopback interface, for servers that bind the
any-address (Debian's ldns-testns): inside it, the any-address is loopback and nothing else,
so a test can run them without listening on the machine's real interfaces.

    ns = NetNS()                       # root only; NetNS.why says why not (a skip reason)
    result = ns.call(fn, timeout=60)   # fn runs in a thread that has entered the namespace:
                                       # its sockets, and every process it starts
                                       # (subprocess.Popen, Nxdns.start), live in there
    ns.close()

A holder process (`unshare -n ... sleep`) keeps the namespace; a thread enters it with
setns(2) (network namespaces are per thread, and a child forked from that thread inherits it),
so the pytest process itself stays where it was. Everything is bounded: call() waits at most
`timeout` seconds, the holder is killed by close().
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import threading
from typing import Optional

CLONE_NEWNET = 0x40000000


class NetNS:
    def __init__(self):
        self.why: Optional[str] = None
        self.holder: Optional[subprocess.Popen] = None
        if os.geteuid() != 0:
            self.why = "needs root (a private network namespace)"
            return
        try:
            self.holder = subprocess.Popen(
                ["unshare", "-n", "sh", "-c", "ip link set lo up && echo up && exec sleep 3600"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        except OSError as e:
            self.why = f"unshare: {e}"
            return
        line = self.holder.stdout.readline().strip()
        if line != "up":
            self.why = f"cannot make a network namespace: {self.holder.stderr.read()}"
            self.close()
            return
        self.path = f"/proc/{self.holder.pid}/ns/net"
        self._libc = ctypes.CDLL(None, use_errno=True)

    def _enter(self):
        fd = os.open(self.path, os.O_RDONLY)
        try:
            if self._libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns(CLONE_NEWNET)")
        finally:
            os.close(fd)

    def call(self, fn, *args, timeout: float = 60.0, **kw):
        """fn(*args, **kw) in a thread inside the namespace; its result, or its exception
        raised here. TimeoutError when it has not returned within timeout."""
        box = {}

        def body():
            try:
                self._enter()
                box["result"] = fn(*args, **kw)
            except BaseException as e:  # handed to the caller
                box["error"] = e

        t = threading.Thread(target=body, name="netns", daemon=True)
        t.start()
        t.join(timeout)
        if t.is_alive():
            raise TimeoutError(f"{getattr(fn, '__name__', fn)} still running after {timeout}s")
        if "error" in box:
            raise box["error"]
        return box.get("result")

    def close(self):
        if self.holder and self.holder.poll() is None:
            self.holder.kill()
            self.holder.wait(timeout=5)

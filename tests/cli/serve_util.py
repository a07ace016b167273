"""Starting and stopping `lmc serve` for the tests: on loopback, on a free
port the server picks itself (--port 0, read back from its first line), with
its stderr collected; and small HTTP helpers over http.client and raw
sockets.

Environment (set by ctest): LMC_CLI (build/lmc), LMC_SOURCE_DIR, LMC_BINARY_DIR."""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time

LMC = os.environ.get("LMC_CLI", "build/lmc")
SOURCE = os.environ.get("LMC_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BINARY = os.environ.get("LMC_BINARY_DIR", os.path.join(SOURCE, "build"))


class Server:
    """`lmc serve ARGS` on 127.0.0.1:<free port>; use as a context manager."""

    def __init__(self, *args, env=None):
        self.args = [LMC, "serve", "--host", "127.0.0.1", "--port", "0", *args]
        self.env = dict(os.environ, **(env or {}))
        self.lines = []
        self.proc = None
        self.port = None
        self.api_key = args[args.index("--api-key") + 1] if "--api-key" in args else None

    def start(self, timeout=60):
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=self.env, text=True)
        deadline = time.time() + timeout
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError("lmc serve exited (%s): %s" % (self.proc.wait(), "".join(self.lines)))
            self.lines.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if not self.port:
            self.proc.kill()
            raise RuntimeError("lmc serve did not start: " + "".join(self.lines))
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()
        return self

    def _drain(self):
        for line in self.proc.stderr:
            self.lines.append(line)

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def stop(self, sig=signal.SIGTERM, timeout=30):
        """Sends sig (None: none, only waits) and returns the exit status
        (killing it after timeout)."""
        if sig is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("lmc serve did not stop within %ss after %s" % (timeout, sig))
        self.reader.join(5)
        self.proc.stdout.close()
        self.proc.stderr.close()
        return rc

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            rc = self.stop()
            if exc[0] is None and rc != 0:
                raise AssertionError("lmc serve exited %d: %s" % (rc, "".join(self.lines)))

    # ---- HTTP ----
    def request(self, method, path, body=None, headers=None, timeout=60):
        """(status, headers dict, body bytes); body may be bytes, str or a JSON object."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data

    def post(self, path, body, **kw):
        status, headers, data = self.request("POST", path, body, **kw)
        return status, headers, json.loads(data) if data else None

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def metrics(self):
        """The unlabelled samples of /metrics as {name: value}, labelled ones as name{labels}."""
        auth = {"Authorization": "Bearer " + self.api_key} if self.api_key else None
        status, _, data = self.get("/metrics", headers=auth)
        assert status == 200, status
        out = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def raw(self, data, timeout=10, read=True):
        """Sends raw bytes on a new connection; returns what comes back until close/timeout."""
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        s.sendall(data)
        got = b""
        if read:
            try:
                while True:
                    b = s.recv(65536)
                    if not b:
                        break
                    got += b
            except socket.timeout:
                pass
        s.close()
        return got


def sse_events(data):
    """The data: payloads of a server-sent event stream."""
    out = []
    for block in data.decode().split("\n\n"):
        for line in block.split("\n"):
            if line.startswith("data: "):
                out.append(line[6:])
    return out

"""Helpers of the server tests: start `minfer serve` on a free port and wait until it says where it
listens, stop it, raw HTTP requests with full control of what is sent."""
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time

BIN = os.environ.get("MINFER_BIN", "build/minfer")
FIX = os.environ.get("MINFER_FIXTURES", os.path.join(os.path.dirname(__file__), "../../../shared/fixtures"))
MODELS = os.path.join(FIX, "models")
# Sanitizer builds are several times slower: the tests wait longer there.
SLOW = 4.0 if os.environ.get("MINFER_SANITIZED") else 1.0


class Server:
    """A running `minfer serve`; stderr is collected so a test can show (or check) it."""

    def __init__(self, model, *args, env=None, ready_timeout=60):
        e = dict(os.environ)
        if env:
            e.update(env)
        cmd = [BIN, "serve", model, "--port", "0", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)
        self.stderr_lines = []
        self._err = threading.Thread(target=self._drain, daemon=True)
        self._err.start()
        self.url = None
        deadline = time.time() + ready_timeout * SLOW
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            m = re.search(r"listening on (http://\S+) ", line)
            if m:
                self.url = m.group(1)
                break
        if not self.url:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("minfer serve did not start: " + "".join(self.stderr_lines[-20:]))
        m = re.match(r"http://([^/]+):(\d+)$", self.url)
        self.host = m.group(1).strip("[]")
        self.port = int(m.group(2))
        threading.Thread(target=self._drain_out, daemon=True).start()

    def _drain(self):
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    def _drain_out(self):
        for _ in self.proc.stdout:
            pass

    @property
    def stderr(self):
        return "".join(self.stderr_lines)

    def stop(self, sig=signal.SIGTERM, timeout=30):
        """Signal the server and wait; returns its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout * SLOW)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("minfer serve did not exit after the signal: " + self.stderr[-2000:])
        self._err.join(timeout=5)
        return self.proc.returncode

    def stop_clean(self):
        """Stop it; it must exit 0 with no sanitizer report (a module fixture's teardown)."""
        code = self.stop()
        assert code == 0, self.stderr
        assert "AddressSanitizer" not in self.stderr and "LeakSanitizer" not in self.stderr, self.stderr


def raw(port, data, timeout=30, host="127.0.0.1", shut_write=False):
    """Send bytes as they are; return (status, headers dict (lower-case names), body bytes) of the
    answer, or (None, {}, b"") when the server closed without one."""
    s = socket.create_connection((host, port), timeout=timeout * SLOW)
    try:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered early (413) and closed: its answer may still be readable
        if shut_write:
            s.shutdown(socket.SHUT_WR)
        buf = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            buf += chunk
            if _complete(buf):
                break
    finally:
        s.close()
    return parse_response(buf)


def _complete(buf):
    head, sep, body = buf.partition(b"\r\n\r\n")
    if not sep:
        return False
    m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    if m:
        return len(body) >= int(m.group(1))
    if re.search(rb"(?im)^transfer-encoding:\s*chunked", head):
        return body.endswith(b"0\r\n\r\n")
    return False


def parse_response(buf):
    head, sep, body = buf.partition(b"\r\n\r\n")
    if not sep:
        return None, {}, b""
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        headers[k.strip().lower()] = v.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        out, rest = b"", body
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            n = int(size_line.split(b";")[0], 16)
            if n == 0:
                break
            out += rest[:n]
            rest = rest[n + 2:]
        body = out
    return status, headers, body


def request(port, method, path, body=None, headers=None, timeout=60):
    """One request with a JSON (or bytes) body; returns (status, headers, parsed JSON or bytes)."""
    h = {"Host": "127.0.0.1", "Connection": "close"}
    if body is not None and not isinstance(body, (bytes, str)):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode()
    if body is not None:
        h["Content-Type"] = "application/json"
        h["Content-Length"] = str(len(body))
    h.update(headers or {})
    data = f"{method} {path} HTTP/1.1\r\n".encode() + b"".join(
        f"{k}: {v}\r\n".encode() for k, v in h.items() if v is not None) + b"\r\n" + (body or b"")
    status, hd, b = raw(port, data, timeout=timeout)
    try:
        return status, hd, json.loads(b) if b else None
    except ValueError:
        return status, hd, b


def sse_events(body):
    """The data payloads of a server-sent-event body, in order."""
    out = []
    for block in body.decode().split("\n\n"):
        data = [l[5:].lstrip() for l in block.split("\n") if l.startswith("data:")]
        if data:
            out.append("\n".join(data))
    return out


def wait_until(pred, timeout, step=0.05):
    deadline = time.time() + timeout * SLOW
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()

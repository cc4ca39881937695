"""Two `minfer serve` processes behind a real nginx (started here on loopback with its own config):
requests are balanced over both; a server that is loading, full or stopping answers 503, which
nginx takes as "try the other one"; when one server is killed mid-run, only the streams that were
on it fail, and new requests go to the other."""
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import pytest

from serve_util import SLOW, Server, wait_until

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

CONF = """
worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 512; }}
http {{
    access_log off;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    upstream minfer {{
        server 127.0.0.1:{a} max_fails=1 fail_timeout=30s;
        server 127.0.0.1:{b} max_fails=1 fail_timeout=30s;
        keepalive 16;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://minfer;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 300s;
            # A refused connection or a 503 (loading, queue full, stopping: nothing was run) goes to
            # the other server, POST included.
            proxy_next_upstream error timeout http_503 non_idempotent;
        }}
    }}
}}
"""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


@pytest.fixture
def cluster():
    if not os.path.exists(NGINX):
        pytest.skip("nginx is not installed (scripts/deps.sh installs nginx-light)")
    # A real model (SmolLM2-135M, ~100 tokens/s here): streams last seconds, long enough to kill a
    # server under them; the fixture models generate thousands of tokens a second.
    from test_smollm import fetch_model
    model = fetch_model()
    # a grace long enough for the running stream of test_a_stopping_server_hands_over (the default
    # 3 s is too short for 150 tokens on a loaded machine or under the sanitizers)
    a = Server(model, "-np", "2", "-c", "2048", "-t", "1", "--alias", "a", "--shutdown-grace", "30")
    b = Server(model, "-np", "2", "-c", "2048", "-t", "1", "--alias", "b", "--shutdown-grace", "30")
    d = tempfile.mkdtemp(prefix="minfer-nginx-")
    port = free_port()
    with open(os.path.join(d, "nginx.conf"), "w") as f:
        f.write(CONF.format(d=d, a=a.port, b=b.port, port=port))
    ng = subprocess.Popen([NGINX, "-p", d, "-c", os.path.join(d, "nginx.conf")], stderr=subprocess.PIPE, text=True)

    def up():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False

    if not wait_until(up, 10):
        ng.kill()
        pytest.fail("nginx did not start: " + ng.stderr.read())
    yield port, a, b
    ng.send_signal(signal.SIGQUIT)
    try:
        ng.wait(timeout=10)
    except subprocess.TimeoutExpired:
        ng.kill()
    for s in (a, b):
        if s.proc.poll() is None:
            s.stop()
    shutil.rmtree(d, ignore_errors=True)


def chat(port, body, timeout=120):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout * SLOW)
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, json.loads(data) if data else None


class Stream(threading.Thread):
    """A streamed chat through nginx, read line by line: which server answered (the model field),
    whether it ended with [DONE], and whether it broke."""

    def __init__(self, port, i, n_tokens=None):
        super().__init__(daemon=True)
        self.port, self.i = port, i
        self.n_tokens = n_tokens or (400 if i % 2 else 300)
        self.model, self.done, self.error, self.n = None, False, None, 0
        self.started = threading.Event()

    def run(self):
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120 * SLOW)
            body = {"messages": [{"role": "user", "content": f"stream {self.i}"}], "stream": True,
                    "max_tokens": self.n_tokens, "ignore_eos": True}
            c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
            r = c.getresponse()
            if r.status != 200:
                self.error = f"status {r.status}"
                return
            while True:
                line = r.readline()
                if not line:
                    break
                line = line.decode().strip()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    self.done = True
                    break
                ev = json.loads(data)
                if "error" in ev:
                    self.error = ev["error"]["message"]
                    break
                self.model = ev["model"]
                self.n += 1
                if self.n == 2:
                    self.started.set()
            if not self.done:  # the answer was cut: what an SSE client sees when its server dies
                self.error = f"the stream ended after {self.n} events without [DONE]"
        except Exception as e:  # a cut connection: what the clients of the killed server see
            self.error = repr(e)
        finally:
            self.started.set()


def test_balancing_and_failover(cluster):
    port, a, b = cluster
    served = [chat(port, {"messages": [{"role": "user", "content": f"q{i}"}], "max_tokens": 2})[1]["model"]
              for i in range(6)]
    assert set(served) == {"a", "b"}, served  # round robin over both

    streams = [Stream(port, i) for i in range(4)]  # two slots on each server
    for s in streams:
        s.start()
    for s in streams:
        assert s.started.wait(60 * SLOW)
    on_a = [s for s in streams if s.model == "a"]
    on_b = [s for s in streams if s.model == "b"]
    assert on_a and on_b, [s.model for s in streams]
    a.proc.kill()  # mid-run, no goodbye
    a.proc.wait()
    for s in streams:
        s.join(120 * SLOW)
    assert all(not s.done and s.error for s in on_a), [(s.done, s.error) for s in on_a]
    assert all(s.done and not s.error for s in on_b), [(s.done, s.error) for s in on_b]
    # New requests all go to the server that is left, and none fails.
    for i in range(6):
        st, body = chat(port, {"messages": [{"role": "user", "content": f"after {i}"}], "max_tokens": 3})
        assert st == 200 and body["model"] == "b" and body["usage"]["completion_tokens"] == 3


def test_a_stopping_server_hands_over(cluster):
    """SIGTERM to one server: its /health and new requests answer 503 at once, which nginx passes
    to the other server; the running request on it finishes."""
    port, a, b = cluster
    long = Stream(port, 1, n_tokens=150)  # well inside the 30 s grace, even on a loaded machine
    long.start()
    assert long.started.wait(60 * SLOW)
    victim = a if long.model == "a" else b
    other = "b" if victim is a else "a"
    victim.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)  # the server notices within 50 ms
    t0 = time.time()
    models = []
    while long.is_alive() and time.time() - t0 < 60 * SLOW:
        st, body = chat(port, {"messages": [{"role": "user", "content": "x"}], "max_tokens": 1})
        assert st == 200, body
        models.append(body["model"])
    long.join(60 * SLOW)
    assert long.done and not long.error, long.error
    assert models and set(models) == {other}
    assert victim.proc.wait(timeout=30 * SLOW) == 0

"""`minfer serve` against clients that misbehave, over raw sockets: malformed and hostile requests,
oversized bodies, slow and idle clients, 16 streaming clients on 4 slots, clients that leave
mid-stream (their slot is free again at once), overload (503 with Retry-After; every accepted
request completes), and shutdown with a stream running. After each, the server still answers."""
import concurrent.futures as cf
import json
import os
import socket
import time

import pytest

from serve_util import MODELS, SLOW, Server, raw, request, sse_events, wait_until

MODEL = os.path.join(MODELS, "mini-qwen2.Q8_0.gguf")
HELLO = [{"role": "user", "content": "Hello, who are you?"}]


@pytest.fixture(scope="module")
def server():
    s = Server(MODEL, "-np", "4", "-c", "4096", "-t", "2", "--timeout", "5")
    yield s
    s.stop_clean()


def alive(port):
    st, _, body = request(port, "POST", "/v1/chat/completions", {"messages": HELLO, "max_tokens": 2})
    return st == 200 and body["usage"]["completion_tokens"] == 2


def post_raw(port, body, ctype="application/json", path="/v1/chat/completions"):
    if isinstance(body, str):
        body = body.encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: {ctype}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    return raw(port, head + body)


def error_of(body):
    e = json.loads(body)["error"]
    assert isinstance(e["message"], str) and e["message"] and "type" in e
    return e


@pytest.mark.parametrize("body,field", [
    ('{"messages": [{"role": "user", "content": "hi"}', None),                # truncated
    ('[' * 100000 + ']' * 100000, None),                                        # deep nesting
    ('{"messages": ' + '[' * 70 + ']' * 70 + '}', None),
    ('{"messages": [{"role":"user","content":"hi"}], "max_tokens": 1e400}', None),
    ('{"messages": [{"role":"user","content":"hi"}], "max_tokens": 99999999999999999999999}', None),
    ('{"messages": [{"role":"user","content":"hi"}], "temperature": 1e308}', "temperature"),
    ('{"messages": [{"role":"user","content":"hi"}], "max_tokens": "10"}', "max_tokens"),
    ('{"messages": [{"role":"user","content":"hi"}], "stop": 5}', "stop"),
    ('{"messages": [{"role":"user","content":"hi"}], "stop": ["a", 5]}', "stop"),
    ('{"messages": [{"role":"user","content":"hi"}], "seed": -5.5}', "seed"),
    ('{"messages": [{"role":"user","content":"hi"}], "logit_bias": {"12": "high"}}', "logit"),
    ('{"messages": [{"role":"user","content":"hi"}], "logit_bias": {"99999999": 1}}', "logit"),
    ('{"messages": [{"role":"user","content":"hi"}], "top_k": 1.5}', "top_k"),
    ('{"messages": [{"role":"user","content":"hi"}], "top_logprobs": 5}', "top_logprobs"),
    ('{"messages": [{"role":"user"}], "a": 1, "a": 2}', None),                 # duplicate key
    ('{"messages": "hi"}', "messages"),
    ('{"messages": [1, 2]}', "messages"),
    ('{"messages": [{"role": "user", "content": {"x": 1}}]}', "messages"),
    ('{"messages": [{"role": "user", "content": "hi"}], "stream": "yes"}', "stream"),
    ('{"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema"}}', "response_format"),
    ('"just a string"', None),
    ('null', None),
    ('', None),
    (b'{"messages": [{"role": "user", "content": "\xff\xfe bad utf-8"}]}', None),
    ('{"messages": [{"role": "user", "content": "nul \\u0000 inside"}], "max_tokens": 1}', "u0000"),
    ('{"messages": [{"role": "user", "content": "fine"}], "max_tokens": 1, "unknown_field": [1]}', "ok"),
])
def test_malformed_json_is_400(server, body, field):
    st, _, b = post_raw(server.port, body)
    if field == "ok":  # valid, if odd: answered
        assert st == 200, b
        return
    assert st == 400, (st, b[:300])
    e = error_of(b)
    if field:
        assert field in e["message"] or e.get("param") == field, e


def test_wrong_content_type_and_methods(server):
    st, _, b = post_raw(server.port, '{"messages": []}', ctype="text/plain")
    assert st == 415 and error_of(b)
    st, _, b = post_raw(server.port, "messages=hi", ctype="application/x-www-form-urlencoded")
    assert st == 415
    st, hd, _ = request(server.port, "GET", "/v1/chat/completions")
    assert st == 405 and "POST" in hd.get("allow", "")
    st, _, _ = request(server.port, "DELETE", "/v1/models")
    assert st == 405
    assert alive(server.port)


def test_oversized_body_is_413(server):
    body = b'{"messages": [{"role": "user", "content": "' + b"x" * (9 << 20) + b'"}]}'
    st, _, b = post_raw(server.port, body)
    assert st == 413 and error_of(b)
    # A Content-Length far past the limit is refused before any of it is read.
    st, _, _ = raw(server.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                b"Content-Length: 99999999999\r\n\r\n{")
    assert st == 413
    assert alive(server.port)


def test_garbage_bytes_and_bad_request_lines(server):
    for data in [b"\x00\x01\x02garbage\r\n\r\n", b"GET\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n",
                 b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
                 b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                 b"GET /" + b"a" * 100000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
                 b"GET /health HTTP/1.1\r\n" + b"X-Big: " + b"y" * 200000 + b"\r\n\r\n"]:
        st, _, _ = raw(server.port, data, timeout=10)
        assert st is None or 400 <= st < 500 or st == 505, (data[:40], st)
    assert alive(server.port)


def test_slow_and_idle_clients_do_not_block_others(server):
    idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(20)]
    slow = socket.create_connection(("127.0.0.1", server.port))
    body = json.dumps({"messages": HELLO, "max_tokens": 2}).encode()
    slow.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 + f"Content-Length: {len(body)}\r\n\r\n".encode())
    t0 = time.time()
    for i in range(3):  # a byte at a time, while others are served
        slow.sendall(body[i:i + 1])
        assert alive(server.port)
    assert time.time() - t0 < 30 * SLOW
    slow.sendall(body[3:])
    slow.settimeout(30 * SLOW)
    assert slow.recv(12).startswith(b"HTTP/1.1 200")
    slow.close()
    # The idle connections are closed by the server's timeout (5 s here) and take nothing with them.
    time.sleep(6)
    for s in idle:
        s.settimeout(5)
        try:
            assert s.recv(1) == b""
        except (ConnectionResetError, socket.timeout):
            pass
        s.close()
    assert alive(server.port)


def stream_chat(port, body, timeout=120):
    st, hd, b = request(port, "POST", "/v1/chat/completions", dict(body, stream=True), timeout=timeout)
    assert st == 200, b
    ev = sse_events(b)
    assert ev[-1] == "[DONE]", ev[-3:]
    chunks = [json.loads(e) for e in ev[:-1]]
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]), chunks


def test_16_streams_on_4_slots(server):
    reqs = [{"messages": [{"role": "user", "content": f"client {i} " * (1 + i % 5)}], "max_tokens": 16,
             "temperature": 0.8, "seed": i} for i in range(16)]
    with cf.ThreadPoolExecutor(16) as ex:
        together = list(ex.map(lambda r: stream_chat(server.port, r)[0], reqs))
    alone = [stream_chat(server.port, r)[0] for r in reqs[:4]]
    assert together[:4] == alone
    assert all(t for t in together)


def slots_idle(port):
    st, _, slots = request(port, "GET", "/slots")
    return st == 200 and all(not s["is_processing"] for s in slots)


def test_disconnect_mid_stream_frees_the_slot(server):
    st, _, m0 = request(server.port, "GET", "/metrics")
    before = int([l for l in m0.decode().splitlines() if l.startswith("minfer:requests_cancelled_total")][0].split()[1])
    for half_close in (False, True):
        s = socket.create_connection(("127.0.0.1", server.port))
        body = json.dumps({"messages": HELLO, "max_tokens": 1000, "stream": True, "ignore_eos": True}).encode()
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        got = b""
        s.settimeout(30 * SLOW)
        while got.count(b"data:") < 3:
            got += s.recv(4096)
        assert not slots_idle(server.port)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        else:
            s.close()
        assert wait_until(lambda: slots_idle(server.port), 2.0), "the slot stayed busy after the client left"
        if half_close:
            s.close()
    st, _, m1 = request(server.port, "GET", "/metrics")
    after = int([l for l in m1.decode().splitlines() if l.startswith("minfer:requests_cancelled_total")][0].split()[1])
    assert after >= before + 2
    # A non-streamed request whose client leaves is cancelled too.
    s = socket.create_connection(("127.0.0.1", server.port))
    body = json.dumps({"messages": HELLO, "max_tokens": 1000, "ignore_eos": True}).encode()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    assert wait_until(lambda: not slots_idle(server.port), 5.0)
    s.close()
    assert wait_until(lambda: slots_idle(server.port), 2.0)
    assert alive(server.port)


def test_a_client_that_stops_reading_stalls_nobody():
    """A streaming client that stops reading: its stream's queue fills and the server drops it
    (the slot is free again, the request counted as cancelled, a warning logged), while another
    stream beside it runs at its own pace and the server keeps answering."""
    s = Server(MODEL, "-np", "2", "-c", "32768", "-t", "2", "--timeout", "60")
    try:
        stuck = socket.socket()
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
        stuck.connect(("127.0.0.1", s.port))
        body = json.dumps({"messages": HELLO, "max_tokens": 16000, "stream": True, "ignore_eos": True}).encode()
        stuck.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        stuck.settimeout(30 * SLOW)
        assert stuck.recv(12).startswith(b"HTTP/1.1 200")  # then it reads nothing more
        t0 = time.time()
        text, chunks = stream_chat(s.port, {"messages": [{"role": "user", "content": "beside"}], "max_tokens": 64,
                                            "ignore_eos": True})
        assert chunks[-1]["choices"][0]["finish_reason"] == "length" and text
        assert time.time() - t0 < 20 * SLOW
        # 16,000 tokens of events are several MiB: far more than the stream's queue and the sockets hold
        assert wait_until(lambda: slots_idle(s.port), 60.0), "the stuck stream still holds its slot"
        st, _, m = request(s.port, "GET", "/metrics")
        cancelled = [l for l in m.decode().splitlines() if l.startswith("minfer:requests_cancelled_total")]
        assert int(cancelled[0].split()[1]) == 1, cancelled
        assert "stopped reading" in s.stderr, s.stderr[-2000:]
        # what reached the socket before the drop is whole events, and no [DONE]: the answer was cut
        stuck.settimeout(5)
        got = b""
        try:
            while True:
                c = stuck.recv(1 << 20)
                if not c:
                    break
                got += c
        except (ConnectionResetError, socket.timeout):
            pass
        stuck.close()
        assert b"data: {" in got and b"data: [DONE]" not in got
        assert alive(s.port)
    finally:
        assert s.stop() == 0, s.stderr


def test_overload_503_and_nothing_lost():
    s = Server(MODEL, "-np", "1", "-c", "1024", "-t", "2", "--max-queue", "2")
    try:
        def one(i):
            return request(s.port, "POST", "/v1/chat/completions",
                           {"messages": [{"role": "user", "content": f"n{i}"}], "max_tokens": 24, "ignore_eos": True},
                           timeout=300)
        with cf.ThreadPoolExecutor(12) as ex:
            res = list(ex.map(one, range(12)))
        ok = [r for r in res if r[0] == 200]
        busy = [r for r in res if r[0] == 503]
        assert len(ok) + len(busy) == 12, [r[0] for r in res]
        assert busy and len(ok) >= 3
        for st, hd, b in busy:
            assert int(hd["retry-after"]) >= 1 and b["error"]["message"]
        for st, hd, b in ok:
            assert b["usage"]["completion_tokens"] == 24 and b["choices"][0]["finish_reason"] == "length"
    finally:
        assert s.stop() == 0, s.stderr


def test_sigterm_lets_a_running_stream_finish():
    s = Server(MODEL, "-np", "2", "-c", "1024", "-t", "2", "--shutdown-grace", "30")
    sock = socket.create_connection(("127.0.0.1", s.port))
    body = json.dumps({"messages": HELLO, "max_tokens": 60, "stream": True, "ignore_eos": True}).encode()
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    sock.settimeout(60 * SLOW)
    got = sock.recv(4096)
    assert got.startswith(b"HTTP/1.1 200")
    code = s.stop()  # SIGTERM while the stream runs: it finishes, then the server exits 0
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        got += chunk
    sock.close()
    assert code == 0, s.stderr
    assert b"data: [DONE]" in got and b'"finish_reason":"length"' in got

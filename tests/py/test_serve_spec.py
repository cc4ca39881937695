"""Speculative decoding in `minfer serve` (--lookup, -md): with three slots busy at once, greedy answers
byte for byte those of a server without speculation, for n-gram lookup, a Q4_0 draft of a Q8_0
target and the target as its own draft, on a fixture model and on SmolLM2-135M-Instruct; a stop
string and max_tokens that land inside a drafted run; the prompt cache after rollbacks; seeded
sampling giving the same bytes alone and beside other requests; the draft counters in /metrics and
/slots; a draft that does not load or has another vocabulary refused at startup."""
import concurrent.futures as cf
import os
import re
import subprocess

import pytest

from serve_util import BIN, MODELS, Server, request

TARGET = os.path.join(MODELS, "mini-qwen2.Q8_0.gguf")
Q4 = os.path.join(MODELS, "mini-qwen2.Q4_0.gguf")
PROMPTS = ["The dog sat on the mat, and the dog was happy because the dog",
           "one two three four, one two three four, one two",
           "Hello there, who are you and what do you"]
# a fixed depth makes every round draft (adaptive depth would back off on a draft as costly as the target)
SOURCES = {"lookup": ["--lookup", "--draft-min", "1", "--draft-max", "8"],
           "q4": ["-md", Q4, "--draft-p-min", "0", "--draft-min", "4", "--draft-max", "4"],
           "self": ["-md", TARGET, "--draft-p-min", "0", "--draft-min", "6", "--draft-max", "6"]}


def complete(port, prompt, **kw):
    body = {"prompt": prompt, "max_tokens": 32, "temperature": 0, **kw}
    st, _, r = request(port, "POST", "/v1/completions", body, timeout=120)
    assert st == 200, r
    return r


def together(port, bodies):
    """The requests at once (the slots decode them in the same steps)."""
    with cf.ThreadPoolExecutor(len(bodies)) as ex:
        return list(ex.map(lambda kw: complete(port, **kw), bodies))


def draft_metrics(port):
    _, _, text = request(port, "GET", "/metrics")
    text = text.decode() if isinstance(text, bytes) else text
    get = lambda name: int(re.search(r"^%s (\d+)$" % re.escape(name), text, re.M).group(1))
    return get("minfer:draft_tokens_total"), get("minfer:draft_tokens_accepted_total")


def answers(port):
    """What every check compares: three greedy requests at once, a stop string and max_tokens that end
    a drafted run, a prompt that extends an earlier answer (a prompt-cache hit), two seeded sampled
    requests (beside others and alone)."""
    out = {}
    rs = together(port, [{"prompt": p} for p in PROMPTS])
    out["greedy"] = [(r["choices"][0]["text"], r["choices"][0]["finish_reason"]) for r in rs]
    first = rs[0]["choices"][0]["text"]
    stop = first[len(first) // 2:len(first) // 2 + 3]
    r = complete(port, PROMPTS[0], stop=[stop])
    out["stop"] = (r["choices"][0]["text"], r["choices"][0]["finish_reason"])
    r = complete(port, PROMPTS[1], max_tokens=5)
    out["max5"] = (r["choices"][0]["text"], r["choices"][0]["finish_reason"], r["usage"]["completion_tokens"])
    r = complete(port, PROMPTS[0] + first, max_tokens=16)
    out["cached"] = r["choices"][0]["text"]
    out["cached_tokens"] = r["usage"]["prompt_tokens_details"]["cached_tokens"]
    seeded = {"prompt": PROMPTS[2], "temperature": 0.9, "seed": 11, "max_tokens": 24}
    rs = together(port, [seeded, {"prompt": PROMPTS[0]}, {"prompt": PROMPTS[1], "temperature": 0.7, "seed": 3}])
    out["seeded_beside"] = rs[0]["choices"][0]["text"]
    out["seeded_alone"] = complete(port, **seeded)["choices"][0]["text"]
    return out


@pytest.fixture(scope="module")
def plain():
    s = Server(TARGET, "-np", "3", "-t", "2")
    try:
        yield answers(s.port)
    finally:
        assert s.stop() == 0, s.stderr


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_identical_to_plain(plain, source):
    s = Server(TARGET, "-np", "3", "-t", "2", *SOURCES[source])
    try:
        got = answers(s.port)
        drafted, accepted = draft_metrics(s.port)
        _, _, slots = request(s.port, "GET", "/slots")
    finally:
        assert s.stop() == 0, s.stderr
    for key in ("greedy", "stop", "max5", "cached", "cached_tokens"):
        assert got[key] == plain[key], (source, key)
    assert got["stop"][1] == "stop" and got["max5"][1:] == ("length", 5)
    assert got["cached_tokens"] > 0
    # seeded sampling: the same bytes beside other requests as alone (not plain sampling's bytes)
    assert got["seeded_beside"] == got["seeded_alone"] and got["seeded_alone"]
    # the fixture's random weights seldom repeat themselves: lookup drafts little there, and may lose
    # all it drafts (SmolLM2 below keeps some)
    assert 0 < drafted and 0 <= accepted <= drafted and (accepted > 0 or source == "lookup"), (drafted, accepted)
    assert sum(x["n_draft_total"] for x in slots) > 0 or source == "lookup"  # the slots' last requests
    assert all(0 <= x["n_draft_accepted"] <= x["n_draft_total"] for x in slots)
    if source == "self":  # the target drafting for itself: only the ends of answers are rejected
        assert accepted >= drafted * 0.8, (drafted, accepted)


def test_seeded_same_run_after_run():
    texts = []
    for _ in range(2):
        s = Server(TARGET, "-np", "2", "-t", "2", *SOURCES["q4"])
        try:
            texts.append(complete(s.port, PROMPTS[2], temperature=0.9, seed=5)["choices"][0]["text"])
        finally:
            assert s.stop() == 0, s.stderr
    assert texts[0] == texts[1] and texts[0]


def startup_error(*args):
    r = subprocess.run([BIN, "serve", TARGET, "--port", "0", "-t", "1", *args], capture_output=True, text=True,
                       timeout=60)
    return r.returncode, r.stderr


def test_startup_errors(tmp_path):
    rc, err = startup_error("-md", str(tmp_path / "absent.gguf"))
    assert rc != 0 and "absent.gguf" in err, err
    data = bytearray(open(Q4, "rb").read())  # the same tokenizer but for one token's text
    at = data.find(b"\x04\x00\x00\x00\x00\x00\x00\x00ment")
    assert at > 0
    data[at + 8:at + 12] = b"mZnt"
    other = tmp_path / "other-vocab.gguf"
    other.write_bytes(bytes(data))
    rc, err = startup_error("-md", str(other))
    assert rc != 0 and "draft model" in err and "vocabulary" in err and "mZnt" in err, err
    rc, err = startup_error("-md", Q4, "--lookup")
    assert rc != 0 and "choose one" in err, err
    rc, err = startup_error("--lookup", "--draft-min", "9", "--draft-max", "4")
    assert rc != 0 and "--draft-min" in err, err


def test_smollm_identical():
    from test_smollm import fetch_model

    model = fetch_model()
    prompts = ["Rewrite this sentence with 'cat' in place of 'dog': The dog sat on the mat, and the dog was happy "
               "because the dog liked the mat.",
               "Repeat after me: red green blue, red green blue, red green blue.",
               "Write the numbers from one to ten in words."]
    def chat(port, text):
        body = {"messages": [{"role": "user", "content": text}], "max_tokens": 32, "temperature": 0}
        st, _, r = request(port, "POST", "/v1/chat/completions", body, timeout=120)
        assert st == 200, r
        return r["choices"][0]["message"]["content"]

    outs = {}
    for name, extra in (("plain", []), ("lookup", ["--lookup"]),
                        ("self", ["-md", model, "--draft-p-min", "0", "--draft-min", "3", "--draft-max", "3"])):
        s = Server(model, "-np", "3", "-t", "2", *extra)
        try:
            with cf.ThreadPoolExecutor(3) as ex:
                outs[name] = list(ex.map(lambda p: chat(s.port, p), prompts))
            if name != "plain":
                drafted, accepted = draft_metrics(s.port)
                assert 0 < accepted <= drafted, (name, drafted, accepted)
        finally:
            assert s.stop() == 0, s.stderr
    assert "cat" in outs["plain"][0]
    assert outs["lookup"] == outs["plain"] and outs["self"] == outs["plain"]

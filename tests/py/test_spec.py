"""Speculative decoding end to end (`minfer run` and `minfer chat` with -md / --lookup): greedy output
byte for byte the output without speculation, on the fixture models and on SmolLM2-135M-Instruct;
the same seed giving the same sampled text; a draft model that does not load or has another
vocabulary refused with an error naming it."""
import os
import subprocess

import pytest

from test_smollm import fetch_model

BIN = os.environ.get("MINFER_BIN", "build/minfer")
FIX = os.environ.get("MINFER_FIXTURES", "../shared/fixtures")
TARGET = os.path.join(FIX, "models", "mini-qwen2.Q8_0.gguf")
Q4 = os.path.join(FIX, "models", "mini-qwen2.Q4_0.gguf")
REWRITE = ("Rewrite this sentence with 'cat' in place of 'dog': The dog sat on the mat, and the dog was happy "
           "because the dog liked the mat.")


def run(*args, stdin=None):
    r = subprocess.run([BIN, "run", *args], capture_output=True, timeout=600, input=stdin)
    return r.returncode, r.stdout, r.stderr.decode(errors="replace")


def test_fixture_greedy_identical():
    rc, plain, _ = run(TARGET, "Hello there", "--temp", "0", "-n", "40")
    assert rc == 0 and plain.strip()
    for extra in (["--lookup"], ["-md", Q4, "--draft-p-min", "0"], ["-md", TARGET, "--draft-p-min", "0"]):
        for k in ("1", "5", "16"):
            rc, out, err = run(TARGET, "Hello there", "--temp", "0", "-n", "40", *extra, "--draft-min", k,
                               "--draft-max", k)
            assert rc == 0, err
            assert out == plain, (extra, k)
            assert "drafted" in err and "accepted" in err


def test_same_seed_same_text():
    outs = [run(TARGET, "Hello there", "--temp", "0.9", "--seed", "7", "-n", "40", "-md", Q4, "--draft-p-min", "0")
            for _ in range(2)]
    assert outs[0][0] == 0 and outs[0][1] == outs[1][1]


def test_chat_identical():
    msgs = b"Hello there\nTell me more\n"
    base = [BIN, "chat", TARGET, "--temp", "0", "-n", "24", "--no-history"]
    plain = subprocess.run(base, input=msgs, capture_output=True, timeout=300)
    spec = subprocess.run(base + ["--lookup", "--draft-min", "2", "--draft-max", "2"], input=msgs,
                          capture_output=True, timeout=300)
    assert plain.returncode == 0 and spec.returncode == 0
    assert plain.stdout == spec.stdout and b"lookup:" in spec.stderr
    # each turn's line counts that turn's drafts: at most what its passes can hold
    draft = subprocess.run(base + ["-md", Q4, "--draft-min", "3", "--draft-max", "3", "--ignore-eos"],
                           input=b"a b c a b c\nhello\nworld\n", capture_output=True, timeout=300)
    turns = [l for l in draft.stderr.decode().splitlines() if "turn" in l and "drafted" in l]
    assert draft.returncode == 0 and len(turns) == 3, draft.stderr
    for l in turns:
        drafted = int(l.split("draft: ")[1].split(" drafted")[0])
        assert drafted <= 3 * 24, l


def test_draft_errors(tmp_path):
    rc, _, err = run(TARGET, "hi", "-n", "2", "--draft-max", "4")  # no draft source: said, not silently dropped
    assert rc == 0 and "--draft-max has no effect" in err, err
    rc, _, err = run(TARGET, "hi", "-n", "4", "-md", str(tmp_path / "absent.gguf"))
    assert rc != 0 and "absent.gguf" in err
    rc, _, err = run(TARGET, "hi", "-n", "4", "-md", Q4, "--lookup")
    assert rc != 0 and "choose one" in err
    rc, _, err = run(TARGET, "hi", "-n", "4", "--lookup", "--mirostat", "2")
    assert rc != 0 and "Mirostat" in err
    # the same tokenizer but for one token's text
    data = bytearray(open(Q4, "rb").read())
    old = b"\x04\x00\x00\x00\x00\x00\x00\x00ment"
    at = data.find(old)
    assert at > 0
    data[at + 8:at + 12] = b"mZnt"
    bad = tmp_path / "other-vocab.gguf"
    bad.write_bytes(bytes(data))
    rc, _, err = run(TARGET, "hi", "-n", "4", "-md", str(bad))
    assert rc != 0 and "vocabulary" in err and "mZnt" in err, err


@pytest.fixture(scope="module")
def smollm():
    return fetch_model()


def test_smollm_greedy_identical(smollm):
    rc, plain, err = run(smollm, REWRITE, "--temp", "0", "-n", "48")
    assert rc == 0 and b"cat" in plain, err
    for extra in (["--lookup"], ["--lookup", "--draft-min", "8", "--draft-max", "8"],
                  ["-md", smollm, "--draft-min", "3", "--draft-max", "3", "--draft-p-min", "0"]):
        rc, out, err = run(smollm, REWRITE, "--temp", "0", "-n", "48", *extra)
        assert rc == 0, err
        assert out == plain, extra
    # a draft of another vocabulary (4,096 tokens against 49,152)
    rc, _, err = run(smollm, "hi", "-n", "4", "-md", TARGET)
    assert rc != 0 and "vocabulary" in err

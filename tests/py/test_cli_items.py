"""The command line as people expect it (issue 14): llama-cli's flag names beside minfer's, `--` and
`-` for standard input, tokenize --ids feeding logits --ids, unknown commands named as such,
output that never loses data or lies (symlinks, devices, write errors, a full standard output),
and the warnings and errors a user should get (invalid UTF-8, -t above the CPUs, --system with
--raw, an unknown MINFER_LOG). On the fixture models: fast."""
import os
import resource
import signal
import subprocess

import pytest

BIN = os.environ.get("MINFER_BIN", "build/minfer")
FIX = os.environ.get("MINFER_FIXTURES", os.path.join(os.path.dirname(__file__), "../../../shared/fixtures"))
MODELS = os.path.join(FIX, "models")
QWEN2 = os.path.join(MODELS, "mini-qwen2.Q8_0.gguf")
F32 = os.path.join(MODELS, "mini-qwen2.F32.gguf")


def run(*args, stdin=None, env=None, stdout=subprocess.PIPE, preexec=None):
    e = dict(os.environ)
    if env:
        e.update(env)
    return subprocess.run([BIN, *args], stdout=stdout, stderr=subprocess.PIPE, input=stdin, env=e, timeout=120,
                          preexec_fn=preexec)


def prompt_tokens(r):
    line = [l for l in r.stderr.decode().splitlines() if "generated" in l][-1]
    return int(line.split("prompt ")[1].split(" tokens")[0])


GREEDY = ["--temp", "0", "-n", "6", "-t", "2"]


def test_llama_cli_names_match_minfer_names(tmp_path):
    ours = run("run", QWEN2, "Hello there", "--system", "Be brief.", "--ctx", "256", "--ubatch", "64",
               "--kv-type", "f32", *GREEDY)
    theirs = run("-m", QWEN2, "-p", "Hello there", "-sys", "Be brief.", "-c", "256", "-ub", "64", "-ctk", "f32",
                 "-ctv", "f32", *GREEDY)
    also = run("run", "-m", QWEN2, "--prompt", "Hello there", "--system-prompt", "Be brief.", "--ctx-size", "256",
               "-b", "64", "--cache-type-k", "f32", "-ngl", "99", "--color", *GREEDY)
    for r in (ours, theirs, also):
        assert r.returncode == 0, r.stderr
    assert ours.stdout == theirs.stdout == also.stdout and ours.stdout.strip()
    assert b"-ngl 99 is accepted and ignored" in also.stderr and b"CPU" in also.stderr
    # K and V share one type; other cache types are named as unsupported
    r = run(QWEN2, "hi", "-ctk", "f16", "-ctv", "f32", *GREEDY)
    assert r.returncode == 2 and b"one type" in r.stderr
    r = run(QWEN2, "hi", "-ctk", "q8_0", *GREEDY)
    assert r.returncode == 2 and b"f16 or f32" in r.stderr
    # -f FILE, "-" and -f - read the prompt; "--" ends the options (a prompt that starts with a dash)
    p = tmp_path / "prompt.txt"
    p.write_text("Hello there")
    for r in (run(QWEN2, "-f", str(p), *GREEDY), run(QWEN2, "-", *GREEDY, stdin=b"Hello there"),
              run(QWEN2, "-f", "-", *GREEDY, stdin=b"Hello there"), run(*GREEDY, "--", QWEN2, "Hello there")):
        assert r.returncode == 0, r.stderr
        assert r.stdout == run(QWEN2, "Hello there", *GREEDY).stdout
    dash = run(*GREEDY, "--", QWEN2, "-n is not a flag here")
    assert dash.returncode == 0 and prompt_tokens(dash) > prompt_tokens(run(QWEN2, "x", *GREEDY))
    r = run(QWEN2, "a", "-f", str(p), *GREEDY)
    assert r.returncode == 2 and b"not both" in r.stderr


def test_tokenize_ids_feed_logits_ids(tmp_path):
    ids = run("tokenize", QWEN2, "Hello world, this is a test", "--ids")
    assert ids.returncode == 0 and ids.stdout.startswith(b"[")
    f = tmp_path / "ids.txt"
    f.write_bytes(ids.stdout)
    a, b = tmp_path / "a.f32", tmp_path / "b.f32"
    r1 = run("logits", QWEN2, "--ids", str(f), "-o", str(a))
    r2 = run("logits", QWEN2, "--ids", "-", "-o", str(b), stdin=ids.stdout)
    assert r1.returncode == 0 and r2.returncode == 0, r1.stderr + r2.stderr
    assert a.read_bytes() == b.read_bytes() and len(a.read_bytes()) == 4096 * 4


@pytest.mark.parametrize("word", ["srve", "pul", "lst", "speculate"])
def test_unknown_command_is_named(word):
    r = run(word, "x")
    assert r.returncode == 2
    assert f"unknown command '{word}'".encode() in r.stderr and b"cannot open" not in r.stderr
    # a path still runs a model (and a missing file says so)
    r = run("./no-such-model.gguf", "hi")
    assert r.returncode == 1 and b"cannot open" in r.stderr


def test_quantize_follows_links_and_refuses_devices(tmp_path):
    target = tmp_path / "target.gguf"
    target.write_bytes(b"old")
    link = tmp_path / "link.gguf"
    link.symlink_to(target)
    r = run("quantize", F32, str(link), "Q8_0")
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and os.readlink(link) == str(target) and target.stat().st_size > 1000
    r = run("quantize", F32, "/dev/full", "Q8_0")
    assert r.returncode != 0 and b"device" in r.stderr
    assert os.path.exists("/dev/full") and not os.path.isfile("/dev/full")


def limit_file_size():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (16384, resource.RLIM_INFINITY))


def test_dump_write_error_keeps_the_old_file(tmp_path):
    out = tmp_path / "t.f32"
    out.write_bytes(b"precious")
    r = run("dump", F32, "token_embd.weight", "-o", str(out), preexec=limit_file_size)
    assert r.returncode == 1 and b"t.f32" in r.stderr
    assert out.read_bytes() == b"precious"
    assert [p.name for p in tmp_path.iterdir()] == ["t.f32"]  # no temporary file left
    r = run("dump", F32, "token_embd.weight", "-o", str(out))
    assert r.returncode == 0 and out.stat().st_size == 4096 * 256 * 4


@pytest.mark.parametrize("args", [["info", QWEN2], ["tokenize", QWEN2, "hello"], [QWEN2, "hi", *GREEDY],
                                  ["chat", QWEN2, *GREEDY]])
def test_full_stdout_is_an_error(args):
    with open("/dev/full", "wb") as full:
        r = run(*args, stdout=full, stdin=b"hello\n")
    assert r.returncode != 0
    assert r.stderr.count(b"cannot write") == 1, r.stderr


def test_invalid_utf8_is_refused(tmp_path):
    bad = b"caf\xe9 au lait"
    for args in ([QWEN2, bad], [QWEN2, bad, "--raw"], [QWEN2, "hi", "-sys", bad], ["chat", QWEN2, bad]):
        r = run(*args, *GREEDY)
        assert r.returncode == 2, (args, r.stderr)
        assert b"not valid UTF-8" in r.stderr and b"byte 4" in r.stderr
    f = tmp_path / "latin1.txt"
    f.write_bytes(bad)
    r = run(QWEN2, "-f", str(f), *GREEDY)
    assert r.returncode == 2 and b"not valid UTF-8" in r.stderr
    r = run(QWEN2, *GREEDY, stdin=bad)
    assert r.returncode == 1 and b"not valid UTF-8" in r.stderr
    # a piped conversation refuses the line and goes on with the next
    r = run("chat", QWEN2, *GREEDY, stdin=bad + b"\nhello\n")
    assert r.returncode == 0 and b"not valid UTF-8" in r.stderr and b"turn 1:" in r.stderr


def test_warnings_threads_raw_system_log():
    r = run(QWEN2, "hi", "--temp", "0", "-n", "2", "-t", "1000")
    cpus = os.cpu_count()
    assert r.returncode == 0
    assert f"-t 1000: this machine has {cpus} CPUs online; using {cpus}".encode() in r.stderr
    assert f"| {cpus} threads".encode() in r.stderr
    r = run(QWEN2, "hi", "--raw", "--system", "x", "--temp", "0", "-n", "2")
    assert r.returncode == 0 and b"warning: --system is ignored with --raw" in r.stderr
    r = run("info", QWEN2, env={"MINFER_LOG": "loud"})
    assert r.returncode == 0 and b"warning: MINFER_LOG" in r.stderr and b"'loud'" in r.stderr

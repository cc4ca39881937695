"""`minfer pull`, `list`, `rm` and model references against local mocks of the Hugging Face Hub and
an Ollama registry (hub_mock.py: the hub on 127.0.0.1, its storage host on 127.0.0.2). Every test
has its own HOME, caches and environment; nothing reaches the internet."""
import glob
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from hub_mock import TOKEN, HubMock, sha256_file  # noqa: E402

BIN = os.path.abspath(os.environ.get("MINFER_BIN", "build/minfer"))
FIX = os.environ.get("MINFER_FIXTURES", os.path.join(os.path.dirname(__file__), "../../../shared/fixtures"))
M = os.path.join(FIX, "models")
Q8 = os.path.join(M, "mini-qwen2.Q8_0.gguf")
Q4 = os.path.join(M, "mini-qwen2.Q4_0.gguf")
LLAMA = os.path.join(M, "mini-llama.Q8_0.gguf")
SPLIT = [os.path.join(M, "mini-qwen2.Q8_0-split-%05d-of-00003.gguf" % i) for i in (1, 2, 3)]
COMMIT = "c0ffee" + "0" * 34


@pytest.fixture(scope="module")
def mock():
    m = HubMock()
    m.add_repo("test/mini", {"mini-qwen2.Q8_0.gguf": Q8}, small={"README.md": b"# mini\n"}, commit=COMMIT)
    m.add_repo("test/multi", {"mini-qwen2.Q8_0.gguf": Q8, "mini-qwen2.Q4_0.gguf": Q4, "mmproj-mini-f16.gguf": Q4})
    m.add_repo("test/split", {"Q8_0/mini-qwen2-Q8_0-%05d-of-00003.gguf" % i: SPLIT[i - 1] for i in (1, 2, 3)})
    m.add_repo("test/private", {"mini-llama.Q8_0.gguf": LLAMA}, private=True)
    m.add_repo("test/gated", {"mini-llama.Q8_0.gguf": LLAMA}, gated=True)
    m.add_ollama("mini", "latest", Q4)
    m.add_ollama("mini", "q8", Q8)
    m.start()
    yield m
    m.stop()


@pytest.fixture
def env(mock, tmp_path):
    mock.faults.clear()
    mock.params.update(truncate_at=300_000, status=500, status_times=1 << 30, page_size=1000)
    mock.rate = None
    mock.log.clear()
    mock.leaked.clear()
    mock.served.clear()
    e = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy") and not k.startswith(("HF_", "OLLAMA"))}
    e.update(HOME=str(tmp_path / "home"), HF_ENDPOINT=mock.url, MINFER_OLLAMA_REGISTRY=mock.url, MINFER_HUB_RETRY_S="0.05",
             XDG_CACHE_HOME=str(tmp_path / "home/.cache"), MINFER_OLLAMA_SYSTEM_MODELS=str(tmp_path / "system-ollama"))
    os.makedirs(e["HOME"])
    return e


def hf_cache(env):
    return os.path.join(env["HOME"], ".cache/huggingface/hub")


def minfer(env, *args, timeout=60, **kw):
    return subprocess.run([BIN, *args], env=env, capture_output=True, text=True, timeout=timeout, **kw)


def pull(env, ref, *flags):
    r = minfer(env, "pull", ref, *flags)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def cache_files(env):
    return sorted(os.path.relpath(p, env["HOME"]) for p in glob.glob(env["HOME"] + "/**", recursive=True)
                  if os.path.isfile(p) and not p.endswith(".lock"))


# ---- Hugging Face ----

def test_pull_hf_layout_and_token(mock, env):
    env["HF_TOKEN"] = TOKEN
    path = pull(env, "hf:test/mini:q8_0")
    repo = os.path.join(hf_cache(env), "models--test--mini")
    digest = sha256_file(Q8)
    assert path == os.path.join(repo, "snapshots", COMMIT, "mini-qwen2.Q8_0.gguf")
    assert os.readlink(path) == "../../blobs/" + digest  # huggingface_hub's relative link
    assert sha256_file(os.path.join(repo, "blobs", digest)) == digest
    assert open(os.path.join(repo, "refs/main")).read() == COMMIT
    assert not glob.glob(repo + "/blobs/*.minfer-*")
    hub = [l for l in mock.log if l[0] == "127.0.0.1"]
    cdn = [l for l in mock.log if l[0] == "127.0.0.2"]
    assert cdn and all(l[4] == "Bearer " + TOKEN for l in hub)
    assert mock.leaked == [], "the token went to the storage host"


def test_reference_downloads_once_then_cached(mock, env):
    r = minfer(env, "info", "hf:test/mini")  # the repository's one model
    assert r.returncode == 0, r.stderr
    assert "is not cached; downloading" in r.stderr and "mini-qwen2" in r.stdout
    mock.log.clear()
    r = minfer(env, "info", "hf:test/mini:Q8_0")
    assert r.returncode == 0 and "downloading" not in r.stderr
    assert mock.log == []  # a cached reference asks no server
    r = minfer(env, "run", "hf:test/mini", "Hi", "-n", "4", "--seed", "1")
    assert r.returncode == 0, r.stderr


def test_choices_and_selection(mock, env):
    r = minfer(env, "pull", "hf:test/multi")
    assert r.returncode == 1
    assert "2 GGUF models" in r.stderr and "hf:test/multi:Q4_0" in r.stderr and "hf:test/multi:Q8_0" in r.stderr
    assert "mmproj" not in r.stderr.split("name one")[1]
    r = minfer(env, "pull", "hf:test/multi:Q2_K")
    assert r.returncode == 1 and "no file or quantization 'Q2_K'" in r.stderr
    assert os.path.basename(pull(env, "hf:test/multi:mini-qwen2.Q4_0.gguf")) == "mini-qwen2.Q4_0.gguf"
    assert sha256_file(pull(env, "hf:test/multi:q8_0")) == sha256_file(Q8)


def test_split_model(mock, env):
    path = pull(env, "hf:test/split:Q8_0", "-c", "2")
    assert path.endswith("snapshots/%s/Q8_0/mini-qwen2-Q8_0-00001-of-00003.gguf" % mock.repos["test/split"]["commit"])
    for i in (1, 2, 3):
        p = path.replace("00001-of", "%05d-of" % i)
        assert os.readlink(p).startswith("../../../blobs/") and sha256_file(p) == sha256_file(SPLIT[i - 1])
    info = json.loads(minfer(env, "info", "hf:test/split:Q8_0", "--json").stdout)
    assert len(info["parts"]) == 3
    lst = json.loads(minfer(env, "list", "--json").stdout)
    assert [(m["name"], m["parts"], m["size"]) for m in lst] == [
        ("mini-qwen2-Q8_0-00001-of-00003.gguf", 3, sum(os.path.getsize(p) for p in SPLIT))]


def test_offline(mock, env):
    env["HF_HUB_OFFLINE"] = "1"
    r = minfer(env, "info", "hf:test/mini")
    assert r.returncode == 1 and "HF_HUB_OFFLINE" in r.stderr
    assert mock.log == []
    del env["HF_HUB_OFFLINE"]
    pull(env, "hf:test/mini")
    mock.log.clear()
    env["HF_HUB_OFFLINE"] = "1"
    assert minfer(env, "pull", "hf:test/mini").returncode == 0  # pull too: the cache only
    assert minfer(env, "info", "hf:test/mini:Q8_0").returncode == 0
    assert mock.log == []


def test_tree_pages_and_plain_files(mock, env):
    mock.params["page_size"] = 1  # one entry per page: the Link rel="next" chain is followed
    assert pull(env, "hf:test/multi:Q4_0").endswith("mini-qwen2.Q4_0.gguf")
    assert sum("/tree/" in l[2] for l in mock.log) >= 4


@pytest.mark.parametrize("status,times,expect", [
    (429, 1, None), (503, 2, None), (429, 99, "rate-limited"), (500, 99, "try again later")])
def test_retries_and_server_errors(mock, env, status, times, expect):
    mock.faults.add("status")
    mock.params.update(status=status, status_times=times)
    r = minfer(env, "pull", "hf:test/mini")
    if expect is None:
        assert r.returncode == 0, r.stderr
        assert "trying again" in r.stderr
    else:
        assert r.returncode == 1 and expect in r.stderr, r.stderr


def test_auth_messages(mock, env):
    r = minfer(env, "pull", "hf:test/private")
    assert r.returncode == 1 and "401" in r.stderr and "HF_TOKEN" in r.stderr
    r = minfer(env, "pull", "hf:test/nosuch")
    assert r.returncode == 1 and "404" in r.stderr and "no such repository" in r.stderr
    env["HF_TOKEN"] = "hf_wrong_token_000000000000000000000000"
    r = minfer(env, "pull", "hf:test/gated")
    assert r.returncode == 1 and "gated" in r.stderr
    r = minfer(env, "pull", "hf:test/private")
    assert r.returncode == 1 and "was refused" in r.stderr
    # the token file huggingface_hub writes
    tok = os.path.join(env["HOME"], ".cache/huggingface/token")
    os.makedirs(os.path.dirname(tok), exist_ok=True)
    open(tok, "w").write(TOKEN + "\n")
    del env["HF_TOKEN"]
    assert sha256_file(pull(env, "hf:test/private")) == sha256_file(LLAMA)
    assert mock.leaked == []


# ---- robustness ----

def test_truncated_answers_resume(mock, env):
    mock.faults.add("truncate")
    mock.params["truncate_at"] = 400_000
    path = pull(env, "hf:test/mini", "-c", "1")
    assert sha256_file(path) == sha256_file(Q8)
    assert sum(l[0] == "127.0.0.2" for l in mock.log) >= 9  # ~3.6 MB in pieces of 400 kB


def test_range_answered_with_200(mock, env):
    mock.faults.update({"truncate", "range_200"})  # every answer is the whole file, cut at 1 MB
    mock.params["truncate_at"] = 1_000_000
    r = minfer(env, "pull", "hf:test/mini", "-c", "1")
    assert r.returncode == 1 and "5 times in a row" in r.stderr and "ignored the range request" in r.stderr
    mock.faults.discard("truncate")  # now whole answers: start over from byte 0 and finish
    r = minfer(env, "pull", "hf:test/mini")
    assert r.returncode == 0, r.stderr
    assert "resuming" in r.stderr and "ignored the range request; starting over" in r.stderr
    assert sha256_file(r.stdout.strip()) == sha256_file(Q8)


def test_wrong_digest_keeps_nothing(mock, env):
    mock.faults.add("corrupt")
    r = minfer(env, "pull", "hf:test/mini")
    assert r.returncode == 1 and "SHA-256" in r.stderr and "removed" in r.stderr
    assert cache_files(env) == []  # no blob, no partial file, no snapshot, no ref
    r = minfer(env, "pull", "ollama:mini")
    assert r.returncode == 1 and "SHA-256" in r.stderr
    assert not [f for f in cache_files(env) if "manifests" in f or "sha256-" in f]


def test_etag_disagreeing_with_listing(mock, env):
    mock.faults.add("bad_etag")
    r = minfer(env, "pull", "hf:test/mini")
    assert r.returncode == 1 and "ETag" in r.stderr


def test_redirect_loop(mock, env):
    mock.faults.add("redirect_loop")
    for ref in ("hf:test/mini", "ollama:mini"):
        r = minfer(env, "pull", ref)
        assert r.returncode == 1 and "redirects in a loop" in r.stderr, r.stderr


@pytest.mark.parametrize("name", ["../evil.gguf", "/abs/evil.gguf", "sub/../../evil.gguf", "a//b.gguf"])
def test_hostile_file_names(mock, env, name):
    mock.faults.add("evil_name")
    mock.params["evil_name"] = name
    r = minfer(env, "pull", "hf:test/mini")
    assert r.returncode == 1 and "refused" in r.stderr
    assert cache_files(env) == []


def full_disk_cmd(env, tmp):
    """A cache on a file system that is too small: a 1 MiB tmpfs where mounting works (root with
    CAP_SYS_ADMIN, as CI is), else a file-size limit (RLIMIT_FSIZE) that makes writes fail the same
    way (EFBIG instead of ENOSPC)."""
    mnt = os.path.join(tmp, "small")
    os.makedirs(mnt)
    if os.geteuid() == 0 and shutil.which("mount") and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt], capture_output=True).returncode == 0:
        return mnt, None, lambda: subprocess.run(["umount", mnt])

    def limit():
        import resource
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
    return mnt, limit, lambda: None


def test_full_disk(mock, env, tmp_path):
    mnt, pre, cleanup = full_disk_cmd(env, str(tmp_path))
    try:
        env["HF_HUB_CACHE"] = mnt + "/hub"
        env["OLLAMA_MODELS"] = mnt + "/ollama"
        for ref in ("hf:test/mini", "ollama:mini"):
            r = subprocess.run([BIN, "pull", ref], env=env, capture_output=True, text=True, timeout=60, preexec_fn=pre)
            assert r.returncode == 1 and "cannot reserve" in r.stderr, r.stderr
        left = [os.path.relpath(p, mnt) for p in glob.glob(mnt + "/**", recursive=True) if os.path.isfile(p)]
        assert not [f for f in left if not f.endswith(".lock") and "blobs/sha256-" not in f or f.endswith(".gguf")], left
        assert not [f for f in left if f.startswith("hub/") and "/blobs/" in f], left
        assert not [f for f in left if "manifests" in f], left
    finally:
        cleanup()


def test_kill_at_random_moments_then_resume(mock, env):
    seed = int(os.environ.get("MINFER_TEST_SEED", time.time()))
    rnd = random.Random(seed)
    mock.rate = 1_500_000  # bytes/s per connection: 3.6 MB takes ~1.2 s over 2 connections
    kills, errs = 0, []
    for i in range(6):
        p = subprocess.Popen([BIN, "pull", "hf:test/mini", "-c", "2"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        time.sleep(rnd.uniform(0.05, 0.5))
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            kills += 1
        errs.append(p.communicate()[1])
    mock.rate = None
    r = minfer(env, "pull", "hf:test/mini")
    assert r.returncode == 0, r.stderr
    path = r.stdout.strip()
    assert kills >= 1 and any("resuming a partial download" in e for e in errs + [r.stderr]), (seed, errs, r.stderr)
    assert sha256_file(path) == sha256_file(Q8), "seed %d" % seed
    served = mock.served[sha256_file(Q8)]
    assert served < 2.2 * os.path.getsize(Q8), "resumed downloads fetched %d bytes (seed %d, %d kills)" % (served, seed, kills)
    assert not glob.glob(hf_cache(env) + "/models--test--mini/blobs/*.minfer-*")


def test_two_pulls_at_once(mock, env):
    mock.rate = 2_000_000
    ps = [subprocess.Popen([BIN, "pull", "hf:test/mini"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True) for _ in range(2)]
    outs = [p.communicate(timeout=60) for p in ps]
    assert all(p.returncode == 0 for p in ps), outs
    assert outs[0][0] == outs[1][0]
    assert any("waiting for another download" in e for _, e in outs), outs
    assert sha256_file(outs[0][0].strip()) == sha256_file(Q8)
    assert mock.served[sha256_file(Q8)] <= 1.3 * os.path.getsize(Q8)  # one of them downloaded it


def test_parallel_ranges(mock, env):
    path = pull(env, "hf:test/mini", "-c", "4")
    ranges = sorted({l[3] for l in mock.log if l[0] == "127.0.0.2"})
    assert len(ranges) == 4 and ranges[0] == "bytes=0-1048575"
    assert sha256_file(path) == sha256_file(Q8)


# ---- Ollama ----

def test_pull_ollama_layout(mock, env):
    path = pull(env, "ollama:mini")
    store = os.path.join(env["HOME"], ".ollama/models")
    d = sha256_file(Q4)
    assert path == os.path.join(store, "blobs", "sha256-" + d)
    man = os.path.join(store, "manifests/registry.ollama.ai/library/mini/latest")
    assert open(man, "rb").read() == mock.ollama["library/mini:latest"]  # as the registry sent it
    for layer in json.loads(open(man).read())["layers"]:
        assert os.path.exists(os.path.join(store, "blobs", layer["digest"].replace(":", "-")))
    assert mock.leaked == []
    r = minfer(env, "info", "ollama:mini:q8")
    assert r.returncode == 0 and "downloading" in r.stderr
    r = minfer(env, "pull", "ollama:mini:nosuch")
    assert r.returncode == 1 and "404" in r.stderr


def test_ollama_models_used_in_place(mock, env, tmp_path):
    """A store laid out as `ollama pull` leaves it: used where it is, no copy, no network."""
    store = tmp_path / "ollama"
    d = sha256_file(Q8)
    (store / "blobs").mkdir(parents=True)
    os.symlink(Q8, store / "blobs" / ("sha256-" + d))
    man = store / "manifests/registry.ollama.ai/library/llama3.2/latest"
    man.parent.mkdir(parents=True)
    man.write_text(json.dumps({"schemaVersion": 2, "config": {"digest": "sha256:" + "0" * 64, "size": 2},
                               "layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:" + d,
                                           "size": os.path.getsize(Q8)}]}))
    env["OLLAMA_MODELS"] = str(store)
    env["MINFER_OLLAMA_REGISTRY"] = "http://127.0.0.1:9"  # nothing listens: any request would fail
    r = minfer(env, "info", "ollama:llama3.2", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["path"] == str(store / "blobs" / ("sha256-" + d))
    assert minfer(env, "run", "llama3.2", "Hi", "-n", "2").returncode == 0  # by its cached name
    assert mock.log == []


def test_ollama_service_store_used_in_place(mock, env, tmp_path):
    """What the Linux service of Ollama pulled (/usr/share/ollama/.ollama/models; here a stand-in)
    is found after ~/.ollama/models, in place, when OLLAMA_MODELS is unset."""
    store = tmp_path / "system-ollama"
    d = sha256_file(Q4)
    (store / "blobs").mkdir(parents=True)
    os.symlink(Q4, store / "blobs" / ("sha256-" + d))
    man = store / "manifests/registry.ollama.ai/library/sysmodel/latest"
    man.parent.mkdir(parents=True)
    man.write_text(json.dumps({"schemaVersion": 2, "config": {"digest": "sha256:" + "0" * 64, "size": 2},
                               "layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:" + d,
                                           "size": os.path.getsize(Q4)}]}))
    env["MINFER_OLLAMA_REGISTRY"] = "http://127.0.0.1:9"  # nothing listens
    r = minfer(env, "info", "ollama:sysmodel", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["path"] == str(store / "blobs" / ("sha256-" + d)), r.stderr
    env["OLLAMA_MODELS"] = str(tmp_path / "mine")  # a store named outright is the only one
    r = minfer(env, "info", "ollama:sysmodel")
    assert r.returncode == 1 and "cannot reach" in r.stderr, r.stderr


# ---- list, names, rm ----

def test_list_names_and_rm(mock, env):
    pull(env, "hf:test/multi:Q8_0")
    pull(env, "hf:test/multi:Q4_0")
    pull(env, "ollama:mini")
    lst = json.loads(minfer(env, "list", "--json").stdout)
    assert {(m["name"], m["source"], m["type"]) for m in lst} == {
        ("mini-qwen2.Q8_0.gguf", "hf", "Q8_0"), ("mini-qwen2.Q4_0.gguf", "hf", "Q4_0"), ("mini:latest", "ollama", "Q4_0")}
    text = minfer(env, "list").stdout
    assert "hf:test/multi" in text and "mini:latest" in text
    # exact name, then unique prefix; an ambiguous prefix lists the candidates
    assert minfer(env, "info", "mini-qwen2.Q8_0.gguf").returncode == 0
    assert minfer(env, "tokenize", "mini-qwen2.Q4", "hello").returncode == 0
    r = minfer(env, "info", "mini-qwen2")
    assert r.returncode == 1 and "names 2 cached models" in r.stderr
    assert minfer(env, "info", "mini").returncode == 0  # exactly mini:latest
    mock.log.clear()
    r = minfer(env, "rm", "mini-qwen2.Q8_0.gguf")
    assert r.returncode == 0 and "3.6 MB freed" in r.stderr, r.stderr
    repo = os.path.join(hf_cache(env), "models--test--multi")
    assert not os.path.exists(os.path.join(repo, "blobs", sha256_file(Q8)))
    assert os.path.exists(os.path.join(repo, "blobs", sha256_file(Q4)))
    assert minfer(env, "rm", "hf:test/multi:Q4_0").returncode == 0
    assert not os.path.exists(repo)  # nothing of the repository left
    assert minfer(env, "rm", "ollama:mini").returncode == 0
    assert json.loads(minfer(env, "list", "--json").stdout) == []
    assert not glob.glob(env["HOME"] + "/.ollama/models/blobs/sha256-*")
    r = minfer(env, "rm", Q8)
    assert r.returncode == 1 and "not a cached model" in r.stderr
    assert mock.log == []


def test_ollama_errors(mock, env):
    mock.faults.add("status")
    mock.params.update(status=401, status_times=99)
    r = minfer(env, "pull", "ollama:mini")
    assert r.returncode == 1 and "401" in r.stderr and "ollama pull" in r.stderr
    mock.faults.clear()
    env["HF_TOKEN"] = TOKEN  # a Hugging Face token is never sent to a registry
    pull(env, "ollama:mini")
    assert not [l for l in mock.log if l[4]]


def test_progress_bar_on_a_terminal(mock, env):
    import pty
    mock.rate = 4_000_000
    master, slave = pty.openpty()
    p = subprocess.Popen([BIN, "pull", "hf:test/split:Q8_0"], env=env, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    out = b""
    while True:
        try:
            k = os.read(master, 4096)
        except OSError:
            break
        if not k:
            break
        out += k
    p.wait(timeout=60)
    os.close(master)
    text = out.decode(errors="replace")
    assert p.returncode == 0
    for i in (1, 2, 3):  # the parts shown together, redrawn in place
        assert "mini-qwen2-Q8_0-%05d-of-00003.gguf" % i in text
    assert "\x1b[" in text and "100%" in text and "/s  ETA" in text


def test_rm_keeps_shared_ollama_blobs(mock, env):
    pull(env, "ollama:mini")
    pull(env, "ollama:mini:q8")  # shares the template, params and config blobs
    assert minfer(env, "rm", "ollama:mini:q8").returncode == 0
    assert sha256_file(minfer(env, "pull", "ollama:mini", "-q").stdout.strip()) == sha256_file(Q4)
    store = os.path.join(env["HOME"], ".ollama/models/blobs")
    assert len(os.listdir(store)) == 4


def test_every_command_takes_references(mock, env, tmp_path):
    pull(env, "hf:test/mini")
    ids = tmp_path / "ids"
    ids.write_text("1 2 3")
    msgs = tmp_path / "m.json"
    msgs.write_text('[{"role":"user","content":"hi"}]')
    for args in (["info", "hf:test/mini"], ["tokenize", "hf:test/mini", "hi"], ["template", "hf:test/mini", "--messages", str(msgs)],
                 ["logits", "hf:test/mini", "--ids", str(ids), "-o", str(tmp_path / "l.f32")],
                 ["dump", "hf:test/mini", "output_norm.weight"], ["bench", "hf:test/mini", "-p", "8", "-n", "2", "-r", "1"],
                 ["quantize", "hf:test/mini", str(tmp_path / "q.gguf"), "Q8_0", "--dry-run"],
                 ["run", "mini-qwen2.Q8_0", "hi", "-n", "2"]):
        r = minfer(env, *args)
        assert r.returncode == 0, (args, r.stderr)


# ---- the same cache as huggingface_hub's ----

HFH = """
import sys
from huggingface_hub import hf_hub_download
print(hf_hub_download(sys.argv[1], sys.argv[2], local_files_only=sys.argv[3] == "offline"))
"""


def test_huggingface_hub_shares_the_cache(mock, env):
    pytest.importorskip("huggingface_hub")
    e = dict(env, HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_XET="1")
    r = subprocess.run([sys.executable, "-c", HFH, "test/multi", "mini-qwen2.Q4_0.gguf", "online"], env=e,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    theirs = r.stdout.strip().splitlines()[-1]
    mock.log.clear()
    env["HF_HUB_OFFLINE"] = "1"
    r = minfer(env, "info", "hf:test/multi:Q4_0", "--json")  # found in their download, no network
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["path"] == theirs and mock.log == []
    del env["HF_HUB_OFFLINE"]
    ours = pull(env, "hf:test/multi:Q8_0")  # and the reverse
    r = subprocess.run([sys.executable, "-c", HFH, "test/multi", "mini-qwen2.Q8_0.gguf", "offline"],
                       env=dict(e, HF_HUB_OFFLINE="1"), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == ours


# ---- a second, independently written server (hub_mock_alt.py): what other correct servers do ----

from hub_mock_alt import TOKEN as ALT_TOKEN, AltMock, _git_sha1  # noqa: E402


def _read(p):
    return open(p, "rb").read()


@pytest.fixture(scope="module")
def alt():
    m = AltMock()
    q8, q4 = _read(Q8), _read(Q4)
    m.commits = {
        "mixed": m.repo("alt/mixed", {"main": {"Model-Q8_0.gguf": (q8, True), "plain.Q4_0.gguf": (q4, False),
                                               "README.md": (b"# alt\n", False)}}),
        "revs": m.repo("alt/revs", {"main": {"m-Q8_0.gguf": (q8, True)}, "v2": {"m-Q4_0.gguf": (q4, True)}}),
        "split": m.repo("alt/split.dots_repo", {"main": {"sub/dir/Model_q4_k_m-%05d-of-00003.gguf" % i: (_read(SPLIT[i - 1]), True)
                                                         for i in (1, 2, 3)}}),
        "private": m.repo("alt/private", {"main": {"m-Q8_0.gguf": (q8, True)}}, private=True),
        "renamed": m.repo("new/name", {"main": {"m-Q4_0.gguf": (q4, True)}}),
    }
    m.ollama("user/model", "tag1", q4, extra=[("template", b"{{ .Prompt }}"), ("params", b'{"stop":["x"]}')])
    m.ollama("library/mini", "latest", q8, oci=False)
    m.start()
    yield m
    m.stop()


@pytest.fixture
def aenv(alt, env):
    alt.reset()
    env.update(HF_ENDPOINT=alt.url, MINFER_OLLAMA_REGISTRY=alt.url)
    return env


def _check_hf_file(env, path, data, lfs, commit):
    repo = os.path.dirname(os.path.dirname(path))
    while os.path.basename(repo) != "snapshots":
        repo = os.path.dirname(repo)
    repo = os.path.dirname(repo)
    blob = hashlib.sha256(data).hexdigest() if lfs else _git_sha1(data)
    assert os.path.basename(os.readlink(path)) == blob  # LFS files by SHA-256, plain ones by git SHA-1, as huggingface_hub
    assert _read(path) == data
    assert open(os.path.join(repo, "refs/main")).read() == commit


ALT_VARIANTS = {
    "302-absolute": {},
    "307-chunked": {"redirect": 307, "chunked": True},
    "no-ranges-relative-storage": {"ignore_range": True, "relative_storage": True},
    "no-refs-one-folder-pages": {"routes": {"revision", "tree"}, "tree_recursive": False, "page_size": 1},
    "siblings-only": {"routes": {"revision", "model"}},
    "bare-siblings": {"routes": {"revision"}, "sibling_blobs": False},
    "tree-without-oids": {"tree_oids": False},
    "model-info-only": {"routes": {"model"}},
}


@pytest.mark.parametrize("variant", sorted(ALT_VARIANTS))
def test_alt_servers(alt, aenv, variant):
    alt.opts.update(ALT_VARIANTS[variant])
    aenv["HF_TOKEN"] = ALT_TOKEN
    commit = alt.commits["mixed"]["main"]
    _check_hf_file(aenv, pull(aenv, "hf:alt/mixed:q8_0"), _read(Q8), True, commit)
    _check_hf_file(aenv, pull(aenv, "hf:alt/mixed:plain.Q4_0.gguf", "-c", "2"), _read(Q4), False, commit)
    assert not [l for l in alt.log if l[0] == "127.0.0.2" and l[4]], "the token went to the storage host"
    assert all(l[4] == "Bearer " + ALT_TOKEN for l in alt.log if l[0] == "127.0.0.1")


def test_alt_resolve_only(alt, aenv):
    """A server with only /resolve (all hf_hub_download needs): a file by name works, split parts too."""
    alt.opts.update(routes=set())
    commit = alt.commits["mixed"]["main"]
    _check_hf_file(aenv, pull(aenv, "hf:alt/mixed:Model-Q8_0.gguf"), _read(Q8), True, commit)
    p = pull(aenv, "hf:alt/split.dots_repo:sub/dir/Model_q4_k_m-00001-of-00003.gguf")
    assert [_read(p.replace("00001-of", "%05d-of" % i)) for i in (1, 2, 3)] == [_read(s) for s in SPLIT]
    r = minfer(aenv, "pull", "hf:alt/mixed:Q8_0")
    assert r.returncode == 1 and "name the file" in r.stderr, r.stderr


def test_alt_split_in_folders(alt, aenv):
    alt.opts.update(tree_recursive=False, page_size=2)
    p = pull(aenv, "hf:alt/split.dots_repo:Q4_K_M")
    assert p.endswith("sub/dir/Model_q4_k_m-00001-of-00003.gguf")
    assert os.readlink(p).startswith("../../../../blobs/")
    assert [_read(p.replace("00001-of", "%05d-of" % i)) for i in (1, 2, 3)] == [_read(s) for s in SPLIT]


def test_alt_revisions(alt, aenv):
    c = alt.commits["revs"]
    p2 = pull(aenv, "hf:alt/revs@v2")  # the branch's one model
    assert "/snapshots/%s/" % c["v2"] in p2 and _read(p2) == _read(Q4)
    repo = os.path.join(hf_cache(aenv), "models--alt--revs")
    assert open(os.path.join(repo, "refs/v2")).read() == c["v2"]
    pm = pull(aenv, "hf:alt/revs")
    assert "/snapshots/%s/" % c["main"] in pm and _read(pm) == _read(Q8)
    alt.log.clear()
    aenv["HF_HUB_OFFLINE"] = "1"
    for ref, want in (("hf:alt/revs@v2", p2), ("hf:alt/revs@" + c["main"], pm), ("hf:alt/revs@main:Q8_0", pm)):
        r = minfer(aenv, "info", ref, "--json")
        assert r.returncode == 0 and json.loads(r.stdout)["path"] == want, (ref, r.stderr)
    r = minfer(aenv, "info", "hf:alt/revs@v2:Q8_0")  # not in that revision
    assert r.returncode == 1
    assert alt.log == []
    del aenv["HF_HUB_OFFLINE"]
    r = minfer(aenv, "pull", "hf:alt/revs@nosuch")
    assert r.returncode == 1 and "no such revision" in r.stderr, r.stderr
    assert _read(pull(aenv, "hf:alt/revs@%s:Q4_0" % c["v2"])) == _read(Q4)  # a commit: no API call for it
    assert not [l for l in alt.log if "/revision/" + c["v2"] in l[2]]
    assert minfer(aenv, "rm", "hf:alt/revs@v2").returncode == 0
    assert minfer(aenv, "rm", "hf:alt/revs:Q8_0").returncode == 0
    assert not os.path.exists(repo)  # refs/main and refs/v2 went with the last model


def test_alt_renamed_repo(alt, aenv):
    alt.opts["renamed"] = {"old/name": "new/name"}  # every URL of the old name: 307 to the new one, relative
    aenv["HF_TOKEN"] = ALT_TOKEN
    p = pull(aenv, "hf:old/name:Q4_0")
    assert "models--old--name" in p and _read(p) == _read(Q4)
    assert any(l[2].startswith("/new/name/resolve/") for l in alt.log)


def test_alt_private_and_tokens(alt, aenv):
    r = minfer(aenv, "pull", "hf:alt/private")
    assert r.returncode == 1 and "401" in r.stderr and "no such repository, or a private one" in r.stderr, r.stderr
    aenv["HUGGING_FACE_HUB_TOKEN"] = ALT_TOKEN  # the older variable huggingface_hub still reads
    assert _read(pull(aenv, "hf:alt/private")) == _read(Q8)
    assert not [l for l in alt.log if l[0] == "127.0.0.2" and l[4]]


def test_alt_ollama(alt, aenv):
    alt.opts["chunked"] = True
    p = pull(aenv, "ollama:user/model:tag1")  # an OCI manifest (sent only when asked for), blobs by 302
    store = os.path.join(aenv["HOME"], ".ollama/models")
    man = os.path.join(store, "manifests/registry.ollama.ai/user/model/tag1")
    assert _read(man) == alt.registry["user/model:tag1"][0]
    assert p == os.path.join(store, "blobs", "sha256-" + hashlib.sha256(_read(Q4)).hexdigest()) and _read(p) == _read(Q4)
    for layer in json.loads(_read(man))["layers"] + [json.loads(_read(man))["config"]]:
        assert os.path.exists(os.path.join(store, "blobs", layer["digest"].replace(":", "-")))
    lst = json.loads(minfer(aenv, "list", "--json").stdout)
    assert [m["name"] for m in lst] == ["user/model:tag1"]
    # a registry named in the reference itself (no MINFER_OLLAMA_REGISTRY): scheme, host and port
    del aenv["MINFER_OLLAMA_REGISTRY"]
    host = alt.url[len("http://"):]
    p = pull(aenv, "ollama:http://%s/mini" % host)
    assert _read(p) == _read(Q8)
    assert os.path.exists(os.path.join(store, "manifests", host, "library/mini/latest"))


def test_alt_ollama_token_flow(alt, aenv):
    alt.opts["ollama_auth"] = True
    p = pull(aenv, "ollama:user/model:tag1")
    assert _read(p) == _read(Q4)
    assert any(l[2].startswith("/token?") for l in alt.log)
    assert not [l for l in alt.log if l[0] == "127.0.0.2" and l[4]], "the registry's token went to the storage host"
    assert not [l for l in alt.log if l[2].startswith("/token") and l[4]]


def test_alt_storage_shorter_than_listed(alt, aenv):
    alt.opts["short"] = 2_500_000  # 3.6 MB listed, 1.1 MB there
    r = minfer(aenv, "pull", "hf:alt/mixed:Q8_0")
    assert r.returncode == 1 and "the server sent the range" in r.stderr, r.stderr
    assert not glob.glob(hf_cache(aenv) + "/models--alt--mixed/blobs/" + "?" * 64)
    assert not glob.glob(hf_cache(aenv) + "/models--alt--mixed/snapshots/*/*")


def test_alt_complete_partial_is_not_asked_again(alt, aenv):
    """A run killed after the last byte but before the rename: the next one asks for nothing (so a
    server's 416 for a range past the end never comes), verifies, and renames."""
    data = _read(Q8)
    d = hashlib.sha256(data).hexdigest()
    blob = os.path.join(hf_cache(aenv), "models--alt--mixed/blobs", d)
    os.makedirs(os.path.dirname(blob))
    open(blob + ".minfer-part", "wb").write(data)
    open(blob + ".minfer-state", "w").write("minfer-partial 1\nsize %d\ndigest %s\nchunk %d\ndone %d\n" % (
        len(data), d, len(data), len(data)))
    p = pull(aenv, "hf:alt/mixed:Q8_0")
    assert _read(p) == data and not os.path.exists(blob + ".minfer-part") and not os.path.exists(blob + ".minfer-state")
    assert not [l for l in alt.log if l[0] == "127.0.0.2" or "/resolve/" in l[2]]


HFH_ALT = """
from huggingface_hub import hf_hub_download, snapshot_download
print(hf_hub_download("alt/mixed", "plain.Q4_0.gguf"))
print(snapshot_download("alt/revs", revision="v2"))
"""


def test_alt_is_what_huggingface_hub_expects(alt, aenv):
    """huggingface_hub itself downloads from the alt server (so it speaks the protocol), and minfer
    finds those downloads offline, a revision's through refs/REV."""
    pytest.importorskip("huggingface_hub")
    alt.opts.update(chunked=True, redirect=307, tree_recursive=False, page_size=1)
    e = dict(aenv, HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_XET="1")
    r = subprocess.run([sys.executable, "-c", HFH_ALT], env=e, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    plain, snap = r.stdout.strip().splitlines()[-2:]
    alt.log.clear()
    aenv["HF_HUB_OFFLINE"] = "1"
    r = minfer(aenv, "info", "hf:alt/mixed:plain.Q4_0.gguf", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["path"] == plain, r.stderr
    r = minfer(aenv, "info", "hf:alt/revs@v2", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["path"] == os.path.join(snap, "m-Q4_0.gguf"), r.stderr
    assert alt.log == []


def test_alt_killed_pulls_resume(alt, aenv):
    """Killed at random moments while chunked answers come through 307 redirects: the next run
    resumes and the file is whole."""
    seed = int(os.environ.get("MINFER_TEST_SEED", time.time()))
    rnd = random.Random(seed)
    alt.opts.update(chunked=True, redirect=307, rate=3_000_000)
    errs = []
    for _ in range(4):
        p = subprocess.Popen([BIN, "pull", "hf:alt/mixed:Q8_0", "-c", "2"], env=aenv, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        time.sleep(rnd.uniform(0.1, 0.5))
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
        errs.append(p.communicate()[1])
    alt.opts["rate"] = 0
    r = minfer(aenv, "pull", "hf:alt/mixed:Q8_0")
    assert r.returncode == 0, r.stderr
    assert any("resuming a partial download" in e for e in errs + [r.stderr]), (seed, errs, r.stderr)
    assert _read(r.stdout.strip()) == _read(Q8), "seed %d" % seed

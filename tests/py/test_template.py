"""minfer template end to end: the rendered text on stdout is byte-identical to Hugging Face
transformers' rendering (tests/data/templates/renders.json, from render_templates.py) for the
vocabulary GGUFs' own templates and for --chat-template-file; request shapes and error exits."""
import json, os, subprocess
from pathlib import Path

import pytest

BIN = os.environ.get("MINFER_BIN", "build/minfer")
FIX = Path(os.environ.get("MINFER_FIXTURES", "../shared/fixtures"))
SRC = Path(__file__).resolve().parents[2]
REF = json.loads((SRC / "tests/data/templates/renders.json").read_text())
NOW = "1795953600"  # 2026-11-29 12:00 UTC, render_templates.py's strftime_now clock


def run(args, stdin=None):
    return subprocess.run([BIN, "template", *args], input=stdin, capture_output=True, timeout=60)


def write(tmp_path, obj, name="req.json"):
    p = tmp_path / name
    p.write_text(json.dumps(obj, ensure_ascii=False))
    return str(p)


@pytest.mark.parametrize("model,ref", [("vocab-qwen2.5.gguf", "Qwen-Qwen2.5-7B-Instruct"), ("vocab-qwen3.gguf", "Qwen-Qwen3-0.6B")])
@pytest.mark.parametrize("conv", sorted(REF["conversations"]))
def test_model_template(tmp_path, model, ref, conv):
    r = run([str(FIX / "models" / model), "--messages", write(tmp_path, REF["conversations"][conv])])
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode() == REF["renders"][ref][conv]["text"]


@pytest.mark.parametrize("name", sorted(REF["renders"]))
def test_template_file(tmp_path, name):
    """Every fixture template through --chat-template-file, with the Qwen vocabulary's BOS/EOS."""
    for conv, want in REF["renders"][name].items():
        r = run([str(FIX / "models/vocab-qwen2.5.gguf"), "--chat-template-file", str(FIX / "templates" / f"{name}.jinja"),
                 "--now", NOW, "--messages", write(tmp_path, REF["conversations"][conv])])
        if want["ok"]:
            assert r.returncode == 0, (conv, r.stderr.decode())
            assert r.stdout.decode() == want["text"], conv
        else:
            assert r.returncode == 1 and r.stdout == b"", conv
            err = r.stderr.decode()
            assert want["error"] in err and err.count("\n") == 1, err


def test_bare_array_and_default_generation_prompt(tmp_path):
    conv = REF["conversations"]["single"]  # add_generation_prompt true, like the default
    r = run([str(FIX / "models/vocab-qwen3.gguf"), "--messages", write(tmp_path, conv["messages"])])
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode() == REF["renders"]["Qwen-Qwen3-0.6B"]["single"]["text"]
    r2 = run([str(FIX / "models/vocab-qwen3.gguf"), "--messages", "-"], stdin=json.dumps({"messages": conv["messages"]}).encode())
    assert r2.returncode == 0 and r2.stdout == r.stdout


def test_chat_template_kwargs(tmp_path):
    conv = REF["conversations"]["thinking_off"]
    req = {"messages": conv["messages"], "chat_template_kwargs": {"enable_thinking": False}, "model": "x", "temperature": 0}
    r = run([str(FIX / "models/vocab-qwen3.gguf"), "--messages", write(tmp_path, req)])
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode() == REF["renders"]["Qwen-Qwen3-0.6B"]["thinking_off"]["text"]


def test_template_file_without_model(tmp_path):
    tpl = tmp_path / "t.jinja"
    tpl.write_text("{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}{{ bos_token }}{{ add_generation_prompt }}")
    r = run(["--chat-template-file", str(tpl), "--messages", write(tmp_path, [{"role": "user", "content": "ü"}])])
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode() == "[user:ü]True"


def test_errors(tmp_path):
    model = str(FIX / "models/vocab-qwen2.5.gguf")
    assert run([model]).returncode == 2
    assert run(["--messages", write(tmp_path, [])]).returncode == 2
    assert run([model, "--messages", "x.json", "--bogus"]).returncode == 2
    r = run([model, "--messages", str(tmp_path / "missing.json")])
    assert r.returncode == 1 and "missing.json" in r.stderr.decode()
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    r = run([model, "--messages", str(bad)])
    assert r.returncode == 1 and "bad.json" in r.stderr.decode()
    r = run([model, "--messages", write(tmp_path, "a string")])
    assert r.returncode == 1
    tpl = tmp_path / "broken.jinja"
    tpl.write_text("line one\n{% for x in messages %}\n{{ x | nosuchfilter }}\n{% endfor %}")
    r = run([model, "--chat-template-file", str(tpl), "--messages", write(tmp_path, [])])
    err = r.stderr.decode()
    assert r.returncode == 1 and "line 3" in err and "nosuchfilter" in err and err.count("\n") == 1, err
    r = run([str(tmp_path / "nomodel.gguf"), "--messages", write(tmp_path, [])])
    assert r.returncode == 1 and r.stdout == b""

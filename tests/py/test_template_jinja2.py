"""minfer template against live jinja2 in Hugging Face's chat-template environment (the same setup as
render_templates.py) on harder conversations than the fixed reference renders: parallel tool calls
with string arguments, reasoning_content, content parts, thinking on, an empty conversation. Every
fixture template must render byte-identically, or fail where jinja2 fails."""
import datetime, json, os, subprocess
from pathlib import Path

import pytest

jinja2 = pytest.importorskip("jinja2")
from jinja2.ext import loopcontrols  # noqa: E402
from jinja2.sandbox import ImmutableSandboxedEnvironment  # noqa: E402

BIN = os.environ.get("MINFER_BIN", "build/minfer")
FIX = Path(os.environ.get("MINFER_FIXTURES", "../shared/fixtures"))
NOW = datetime.datetime(2026, 11, 29, 12, 0)


def _raise(msg):
    raise Exception(msg)


ENV = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
ENV.filters["tojson"] = lambda x, ensure_ascii=False, indent=None, separators=None, sort_keys=False: json.dumps(
    x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
ENV.globals["raise_exception"] = _raise
ENV.globals["strftime_now"] = lambda fmt: NOW.strftime(fmt)

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "default": 1}},
                         "required": ["city"]}}},
         {"type": "function", "function": {"name": "search", "description": "Search — ünïcode \"quoted\"",
          "parameters": {"type": "object", "properties": {"q": {"type": "string"}, "filters": {"type": "array", "items": {"type": "string"}}}}}}]
CONVS = {
    "parallel_tools": dict(messages=[
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"type": "function", "id": "call12345", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
            {"type": "function", "id": "call67890", "function": {"name": "get_weather", "arguments": {"city": "Rome", "days": 2}}}]},
        {"role": "tool", "tool_call_id": "call12345", "content": "{\"temp\": 21}"},
        {"role": "tool", "tool_call_id": "call67890", "content": "{\"temp\": 25.5}"},
        {"role": "assistant", "content": "Paris 21, Rome 25.5."},
        {"role": "user", "content": "Thanks!\n"}], tools=TOOLS, add_generation_prompt=True),
    "reasoning": dict(messages=[
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "<think>\nadd\n</think>\n\n4", "reasoning_content": "add"},
        {"role": "user", "content": "3+3?"},
        {"role": "assistant", "content": "<think>\nagain\n</think>\n\n6"}], add_generation_prompt=False, enable_thinking=True),
    "parts": dict(messages=[{"role": "user", "content": [{"type": "text", "text": "Describe "}, {"type": "text", "text": "this."}]}],
                  add_generation_prompt=True),
    "thinking_on": dict(messages=[{"role": "user", "content": "  spaces \t and\n\nnewlines  "}], add_generation_prompt=True,
                        enable_thinking=True),
    "empty": dict(messages=[], add_generation_prompt=True),
}
TEMPLATES = sorted(p.stem for p in (FIX / "templates").glob("*.jinja"))


@pytest.mark.parametrize("name", TEMPLATES)
def test_against_jinja2(tmp_path, name):
    src = (FIX / "templates" / f"{name}.jinja").read_text()
    tmpl = ENV.from_string(src)
    for cname, conv in CONVS.items():
        try:
            want = tmpl.render(**conv, bos_token="<|endoftext|>", eos_token="<|im_end|>")
        except Exception:
            want = None
        req = tmp_path / f"{cname}.json"
        req.write_text(json.dumps(conv, ensure_ascii=False))
        r = subprocess.run([BIN, "template", str(FIX / "models/vocab-qwen2.5.gguf"), "--chat-template-file",
                            str(FIX / "templates" / f"{name}.jinja"), "--now", "1795953600", "--messages", str(req)],
                           capture_output=True, timeout=60)
        if want is None:
            assert r.returncode == 1 and r.stdout == b"" and r.stderr.count(b"\n") == 1, (cname, r.stderr)
        else:
            assert r.returncode == 0, (cname, r.stderr.decode())
            assert r.stdout.decode() == want, cname

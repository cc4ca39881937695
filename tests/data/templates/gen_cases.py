#!/usr/bin/env python3
"""Writes cases.json: small Jinja snippets and what Hugging Face's chat-template environment
(jinja2 sandbox, trim_blocks, lstrip_blocks, loopcontrols, json.dumps-based tojson) renders for them,
or that it fails. test_jinja.c checks minfer's interpreter against every case.
  python3 tests/data/templates/gen_cases.py tests/data/templates/cases.json"""
import json, sys, datetime
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.ext import loopcontrols

def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

def raise_exception(msg): raise Exception(msg)

env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = lambda fmt: datetime.datetime(2026, 11, 29, 12, 0).strftime(fmt)

CTX = {
    "s": "Hello, World", "u": "héllo wörld ÄÖ", "e": "", "n": 7, "neg": -7, "f": 2.5, "t": True, "no": None,
    "l": [3, 1, 2], "sl": ["b", "A", "c", "a"], "d": {"b": 2, "a": 1, "c": [1, 2.5, None, True, "x"]},
    "msgs": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"},
             {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]},
             {"role": "tool", "content": "{\"ok\": true}"}],
    "nested": {"a": {"b": {"c": "deep"}}}, "ws": "  padded\t\n", "multi": "line1\nline2\n\nline4",
    "quote": "it's \"quoted\"\\ \n\t\x01 é", "big": 12345678901, "fl": [0.1, 1e20, 1e-7, 100.0, 1.5e16, -0.0, 3.0],
}

CASES = [
    # printing values
    "{{ s }}|{{ n }}|{{ f }}|{{ t }}|{{ no }}|{{ l }}|{{ d }}|{{ undefined_var }}|{{ e }}",
    "{{ fl }}{% for x in fl %} {{ x }}{% endfor %}",
    "{{ quote }}|{{ [quote] }}|{{ {'k': quote} }}|{{ ('a',) }}|{{ (1, 'b') }}|{{ () }}",
    "{{ 1.0 }} {{ 10/4 }} {{ 10/5 }} {{ 7//2 }} {{ -7//2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2**10 }} {{ 2**-1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}",
    "{{ 1 + 2 * 3 - 4 }} {{ (1 + 2) * 3 }} {{ -n }} {{ +n }} {{ - -n }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }}",
    "{{ 'a' ~ 1 ~ none ~ true ~ [1] }} {{ 'ab' * 3 }} {{ 3 * 'x' }} {{ [1, 2] * 2 }} {{ [1] + [2, 3] }} {{ 'a' + 'b' }}",
    "{{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' == 'a' }} {{ [1, 2] == [1, 2] }} {{ {'a': 1} == {'a': 1} }} {{ 1 != 2 }} {{ none == none }}",
    "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'abc' < 'abd' }} {{ [1, 2] < [1, 3] }} {{ 2 >= 2.0 }} {{ 'b' <= 'a' }}",
    "{{ 'ell' in s }} {{ 'x' not in s }} {{ 1 in l }} {{ 'a' in d }} {{ 'z' in d }} {{ 'x' in undefined_var }}",
    "{{ true and 'yes' }} {{ false or 'fallback' }} {{ 0 or none }} {{ not 0 }} {{ not [] }} {{ 'a' and 0 }}",
    "{{ 'yes' if t else 'no' }} {{ 'yes' if no else 'no' }} [{{ 'only' if false }}] {{ 1 if 0 else 2 if 0 else 3 }}",
    # attribute / item access
    "{{ d.a }} {{ d['b'] }} {{ d.c[1] }} {{ d.c[-1] }} {{ l[0] }} {{ l[-1] }} [{{ l[10] }}] [{{ d.zz }}] {{ nested.a.b.c }} {{ msgs.1.role }}",
    "{{ s[0] }} {{ s[-1] }} {{ u[1] }} {{ s[1:4] }} {{ s[::-1] }} {{ u[::-1] }} {{ l[::-1] }} {{ l[1:] }} {{ l[:-1] }} {{ s[::2] }} {{ l[5:] }} {{ s[-3:] }}",
    "{{ u[2:6] }} {{ u[-2:] }} {{ l[::-2] }} {{ s[10:2:-3] }}",
    # statements
    "{% if n > 5 %}big{% elif n > 2 %}mid{% else %}small{% endif %}",
    "{% for x in l %}{{ loop.index }}:{{ loop.index0 }}:{{ loop.revindex }}:{{ loop.revindex0 }}:{{ loop.first }}:{{ loop.last }}:{{ loop.length }}:{{ x }} {% endfor %}",
    "{% for x in l %}{{ loop.previtem }}>{{ x }}<{{ loop.nextitem }} {{ loop.cycle('odd', 'even') }} {% endfor %}",
    "{% for i in l %}{% break %}{% else %}E1{% endfor %}{% for i in l %}{% continue %}{% else %}E2{% endfor %}{% for i in l %}{% if i == 1 %}{% continue %}{% endif %}{% else %}E3{% endfor %}|{% set x = 1 %}{% filter upper %}{% set x = 2 %}{% endfilter %}{% set y %}{% set x = 3 %}{% endset %}{{ x }}",
    "{% for i in range(3) %}{{ i }}{% for j in el %}{% else %}{% if i == 1 %}{% break %}{% endif %}{% endfor %}{% endfor %}|{% for i in l %}{% filter upper %}a{% if i == 1 %}{% break %}{% endif %}{% endfilter %}{% set z %}{{ i }}{% continue %}{% endset %}{% endfor %}",
    "{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in l if x > 1 %}{{ x }}{{ loop.length }}{% else %}none{% endfor %}",
    "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{% for k in d %}{{ k }}{% endfor %}|{% for c in 'héj' %}[{{ c }}]{% endfor %}",
    "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}",
    "{% for i in range(3) %}{% for j in range(2) %}{{ i }}{{ j }}{{ loop.depth }} {% endfor %}{{ loop.index }}|{% endfor %}",
    "{{ range(5) | list }} {{ range(2, 8, 3) | list }} {{ range(5, 0, -2) | list }}",
    "{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = x + 10 %}{{ x }},{% endfor %}{{ x }}",
    "{% set ns = namespace(total=0, items=[]) %}{% for i in l %}{% set ns.total = ns.total + i %}{% endfor %}{{ ns.total }}",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = (3, 4) %}{% set c, e2 = t %}{{ c }}{{ e2 }}",
    "{% set block_var %}inside {{ n }}{% endset %}[{{ block_var }}]{% set up | upper %}shout{% endset %}{{ up }}",
    "{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet('Ann') }} {{ greet('Bob', greeting='Hi') }} {{ greet('Cy', 'Yo') }}",
    "{% macro outer() %}[{{ caller() }}]{% endmacro %}{% call outer() %}called {{ n }}{% endcall %}",
    "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }}",
    "{% filter upper %}make {{ s }} loud{% endfilter %}",
    "{% macro m(a, b, c='C') %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ m(*[1, 2]) }} {{ m(1, **{'b': 'B', 'c': 3}) }} {{ m(*l[:2], c=0) }} {{ '{}{}'.format(*sl) }}",
    "{% with a = 5, b = n %}{{ a + b }}{% endwith %}[{{ a }}]",
    "{% raw %}{{ not rendered }}{% endraw %}",
    "{# a comment #}text{# another -#}   after",
    # whitespace control
    "a\n  {% if t %}\n    yes\n  {% endif %}\nb",
    "a  {%- if t -%}  yes  {%- endif -%}  b",
    "line\n    {{ s }}\n    {%+ if t %}kept indent{% endif %}\n",
    "{% for x in l %}\n  item {{ x }}\n{% endfor %}\ndone\n",
    "x {{- ' y ' -}} z\n{# c #}\n  {# c2 #}  w",
    "a\r\nb\r\n{% if t %}\r\nc\r\n{% endif %}\r\n",
    "  {% if t %}x{% endif %}  {% if t %}y{% endif %}\n   {%- if t %}z{% endif %}",
    "{% if t %}A{% endif +%}\nB",
    "  {%- if t +%} a\n  {%+ endif -%}\n {{- s }} {#- c -#}\n\n {% raw -%} {{ x }} {%- endraw %} \t\n{#",
    # filters
    "{{ s | upper }} {{ s | lower }} {{ 'hello world' | capitalize }} {{ 'hello wORLD-foo (bar' | title }} {{ ws | trim }}|{{ 'xxaxx' | trim('x') }}",
    "{{ u | upper }} {{ u | length }} {{ l | length }} {{ d | length }} {{ undefined_var | length }} {{ s | count }}",
    "{{ l | join(', ') }} {{ sl | join }} {{ msgs | map(attribute='role') | join('/') }} {{ msgs | map(attribute='nope', default='?') | list }}",
    "{{ l | first }} {{ l | last }} {{ s | first }} {{ l | sort }} {{ sl | sort }} {{ sl | sort(case_sensitive=true) }} {{ l | sort(reverse=true) }}",
    "{{ msgs | selectattr('role', 'equalto', 'user') | list | length }} {{ msgs | rejectattr('content') | map(attribute='role') | list }}",
    "{{ l | select('odd') | list }} {{ l | reject('odd') | list }} {{ [0, 1, '', 'a', none] | select | list }} {{ l | map('string') | list }}",
    "{{ no | selectattr('type') | list }} {{ no | map('upper') | list }} {{ '' | select | list }} {{ 0 | reject | list }} {{ no | rejectattr('x') | list }}",
    "{{ msgs | selectattr('tool_calls', 'defined') | list | length }} {{ msgs | selectattr('role', 'in', ['user', 'tool']) | map(attribute='role') | join(',') }}",
    "{{ d | tojson }} {{ msgs[2] | tojson }} {{ quote | tojson }} {{ u | tojson }} {{ u | tojson(ensure_ascii=true) }} {{ fl | tojson }}",
    "{{ d | tojson(indent=2) }}\n{{ d | tojson(indent=4, sort_keys=true) }}\n{{ [] | tojson(indent=2) }} {{ {} | tojson }} {{ d | tojson(separators=(',', ':')) }}",
    "{{ d | items | list }} {{ d | dictsort }} {{ d | dictsort(reverse=true) }} {{ {'b': 1, 'a': 3} | dictsort(by='value') }}",
    "{{ undefined_var | default('dflt') }} {{ e | default('empty') }} {{ e | default('empty', true) }} {{ no | d('x') }} {{ s | d('x') }}",
    "{{ 'a-b-c' | replace('-', '+') }} {{ 'aaa' | replace('a', 'b', 2) }} {{ n | string }} {{ '42' | int + 1 }} {{ '3.7' | int }} {{ 'x' | int(5) }} {{ 3.9 | int }} {{ '2.5' | float }} {{ n | float }}",
    "{{ -3 | abs }} {{ neg | abs }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.675 | round(2) }} {{ 2.1 | round(0, 'ceil') }} {{ 2.9 | round(method='floor') }} {{ 7 | round }}",
    "{{ ['a', 'B', 'A', 'b', 'a'] | unique | list }} {{ [3, 1, 3, 2, 1] | unique | list }} {{ l | sum }} {{ l | min }} {{ l | max }} {{ sl | max }}",
    "{{ '<a href=\"x\">&</a>' | escape }} {{ '<b>' | safe }} {{ 'one two  three' | wordcount }} {{ 'mid' | center(9) }}|{{ 'ab' | center(7) }}|",
    "{{ multi | indent }}|{{ multi | indent(2, true) }}|{{ multi | indent(3, blank=true) }}|{{ 'a\nb\n' | indent(2) }}|",
    "{{ l | batch(2) | list }} {{ l | batch(2, 0) | list }} {{ s | reverse }} {{ l | reverse | list }} {{ 'hello' | list }}",
    "{{ '%s and %d and %05.2f' | format('x', 42, 3.14159) }} {{ '%s' % 'pct' }} {{ '%d%%' % 50 }} {{ '%r' % 'q' }}",
    "[{{ '%5s|%-5s|%.2s|%x|%X|%o|%x|%+d|% d|%05d|%.3d|%e|%g|%10.3f|%-8.1f|' % ('ab', 'cd', u, 255, 255, 8, -255, 5, 5, -42, 7, 12345.678, 0.0001, 3.14159, 2.5) }}]",
    "[{{ '%.3d|%05.3d|%#x|%#o|%-6x|%06.2f|%+.1e|%5.1s|' % (-7, 7, 255, 8, 10, -3.14159, 1234.5, u) }}]",
    "{{ 'a very long sentence that goes on' | truncate(15) }} {{ 'a very long sentence that goes on' | truncate(15, true) }} {{ 'short' | truncate(10) }}",
    "{% for role, ms in msgs | groupby('role') %}{{ role }}={{ ms | length }};{% endfor %} {{ [{'k': 'B'}, {'k': 'a'}, {'k': 'b'}] | groupby('k') | list }} {{ range(7) | slice(3) | list }} {{ range(7) | slice(3, 'x') | list }} {{ '<p>Hi  <b>there</b><!-- c --></p>\n x' | striptags }}",
    "{% if el | select %}T{% endif %}|{% if l | map('string') %}M{% endif %}|{{ (l | select) is sequence }} {{ [undefined_var, 1] }} {{ n[0] is undefined }} {{ 2.5 is even }} {{ 3.0 is odd }} {{ -3 is odd }} {{ l | truncate(5) }} {{ l | select | list }} {{ l | reverse | list }}",
    "{{ d | pprint }} {{ [{'z': 1, 'a': [d]}] | pprint }} {% if el | unique %}U{% endif %}{% if el | batch(2) %}B{% endif %} {{ zz is callable }} {{ 3.0 % -3 }} {{ -0.0 % 2 }} {{ 'xyz' % l }} {{ 'u' is lower }} {{ [s] is upper }}",
    "{{ [1] in d }}",
    "{{ 'xyz' % 5 }}",
    "{{ d | attr('a') }} {{ [1, [2, 'x']] | pprint }} {{ msgs | map(attribute='role') | map('upper') | join }}",
    # tests
    "{{ n is defined }} {{ zz is defined }} {{ zz is undefined }} {{ no is none }} {{ s is string }} {{ n is string }} {{ d is mapping }} {{ l is mapping }}",
    "{{ l is iterable }} {{ s is iterable }} {{ n is iterable }} {{ l is sequence }} {{ n is number }} {{ f is number }} {{ t is number }} {{ n is integer }} {{ f is integer }} {{ t is integer }} {{ f is float }}",
    "{{ t is boolean }} {{ n is boolean }} {{ t is true }} {{ 1 is true }} {{ false is false }} {{ n is odd }} {{ n is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }}",
    "{{ n is eq 7 }} {{ n is equalto 8 }} {{ n is ne 8 }} {{ n is gt 3 }} {{ n is lt 3 }} {{ n is ge 7 }} {{ n is le 6 }} {{ 2 is in l }} {{ 'x' is in 'xyz' }} {{ s is lower }} {{ 'abc' is lower }} {{ 'ABC' is upper }}",
    "{{ no is sameas none }} {{ t is sameas true }} {{ greet is defined }} {{ 'upper' is filter }} {{ 'odd' is test }} {{ n is not none }} {{ s is not string }}",
    "{{ 'straße ǆ ﬀ İ' | upper }}|{{ 'ΣΑΣ ΌΣΟΣ Σ. AΣ.' | lower }}|{{ 'ǆemal ﬀi straße 3rd ΣΑΣ'.title() }}|{{ 'ǆa'.capitalize() }}|{{ 'İaB'.swapcase() }}|{{ 'ﬀ straße' | title }}|{{ 'шрифт ABC' | upper }}|{{ '漢字 x١٢' | wordcount }}|{{ '١٢'.isdigit() }}{{ 'é'.isalpha() }}",
    # methods
    "{{ s.startswith('Hell') }} {{ s.endswith('x') }} {{ s.startswith(('a', 'H')) }} {{ ws.strip() }}|{{ ws.lstrip() }}|{{ ws.rstrip() }}|{{ 'xxhixx'.strip('x') }} {{ '\n\nabc'.lstrip('\n') }}",
    "{{ 'a,b,,c'.split(',') }} {{ '  a  b c '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ 'x</think>y</think>z'.split('</think>')[-1] }} {{ multi.splitlines() }}",
    "{{ s.replace('l', 'L') }} {{ s.upper() }} {{ s.lower() }} {{ 'hello world'.title() }} {{ \"they're bill's\".title() }} {{ 'hELLO'.capitalize() }} {{ 'AbC'.swapcase() }}",
    "{{ s.find('o') }} {{ s.rfind('o') }} {{ s.find('z') }} {{ u.find('w') }} {{ s.count('l') }} {{ s.index('W') }} {{ '{} and {}'.format('a', 1) }} {{ '{0}{1}{0}'.format('x', 'y') }} {{ '{name}!'.format(name='N') }}",
    "{{ ', '.join(['a', 'b']) }} {{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ 'a1'.isalnum() }} {{ '  '.isspace() }} {{ 'ABC'.isupper() }} {{ 'abc'.islower() }} {{ '42'.zfill(5) }} {{ 'ab'.ljust(4) }}| {{ 'ab'.rjust(4, '*') }}",
    "{{ 'a=b=c'.partition('=') }} {{ 'a=b=c'.rpartition('=') }} {{ 'prefix_x'.removeprefix('prefix_') }} {{ 'x.txt'.removesuffix('.txt') }}",
    "{{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 'dflt') }} {{ d.keys() | list }} {{ d.values() | list }} {{ d.items() | list }} {{ l.index(2) }} {{ l.count(3) }}",
    # literals
    "{{ [1, 'two', 3.0, none, true, [4], {'five': 5}] }} {{ {'a': [1, 2], 'b': {'c': none}} }} {{ 'con' 'cat' }} {{ \"dq\" }} {{ 0x1F }} {{ 0b101 }} {{ 0o17 }} {{ 1_000 }} {{ 1e3 }} {{ 2.5e-3 }}",
    "{{ '' \"\" '' }}[{{ ['' ''] }}]{{ 'a' '' \"b\" }}",
    "{{ 'esc\\t\\n\\\\\\'\\\"\\x41\\u00e9\\U0001F600\\101' }} {{ 'keep \\d' }}",
    "{{ strftime_now('%Y-%m-%d %B %d, %A') }} {{ big }} {{ big * 1000 }}",
    # scoping and namespaces
    "{% set ns = namespace(found=false) %}{% for m in msgs %}{% if m.role == 'tool' %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.found }}",
    "{% set ns = namespace(d) %}{{ ns.a }}{{ ns.b }}",
    "{% macro rec(k) %}{% if k > 0 %}{{ k }}{{ rec(k - 1) }}{% endif %}{% endmacro %}{{ rec(5) }}",
    "{% set x = 'outer' %}{% macro show() %}{{ x }}{% endmacro %}{{ show() }}{% set x = 'changed' %}{{ show() }}",
    "{% if true %}{% set leaked = 'yes' %}{% endif %}{{ leaked }}|{% for i in [1] %}{% set notleaked = 'no' %}{% endfor %}[{{ notleaked }}]",
    "{% for m in msgs %}{{ m.role }}:{{ m.content if m.content is string else (m.content | tojson) }};{% endfor %}",
    "{% for m in msgs %}{% if m.tool_calls %}{% for tc in m.tool_calls %}{{ tc.function.name }}({{ tc.function.arguments | tojson }}){% endfor %}{% endif %}{% endfor %}",
    # errors (the test only checks that rendering fails)
    "{{ raise_exception('custom failure') }}",
    "{{ undefined_var.attr }}",
    "{{ 'a' + 1 }}",
    "{{ 1 / 0 }}",
    "{{ l.append(4) }}",
    "{{ 'abc' < 1 }}",
    "{% for x in 5 %}{% endfor %}",
    "{{ range(1000000) | length }}",
    "{{ n() }}",
]

def main():
    out = []
    for src in CASES:
        try:
            out.append({"template": src, "ok": True, "text": env.from_string(src).render(**CTX)})
        except Exception as e:
            out.append({"template": src, "ok": False, "error": f"{type(e).__name__}: {e}"})
    json.dump({"context": CTX, "cases": out}, open(sys.argv[1], "w"), ensure_ascii=False, indent=1)

main()

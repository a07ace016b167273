#!/usr/bin/env python3
"""Renders the chat templates in tests/fixtures/templates/*.json the way transformers does and writes
  tests/fixtures/templates/expected.json  (real templates x conversations defined here)
  tests/fixtures/templates/language.json  (small templates exercising one construct each)
which tests/test_template.c compares with lmc byte for byte.

  python3 tests/reference/make_template_reference.py

Renderer: transformers' own render_jinja_template when transformers is importable (the "renderer"
field then says "transformers X.Y.Z"); otherwise a replica of transformers'
chat_template_utils._compile_jinja_template on the local jinja2: ImmutableSandboxedEnvironment(
trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, loopcontrols]) with its tojson
(json.dumps(ensure_ascii=False, ...)), raise_exception and strftime_now globals, and
render(messages=, tools=, documents=, add_generation_prompt=, **special_tokens, **extra_vars)
as render_jinja_template calls it. strftime_now is fixed to FIXED_DATE in both cases (lmc reads
the same date from LMC_FIXED_DATE).
"""
import datetime
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures", "templates")
FIXED_DATE = datetime.datetime(2025, 2, 10, 12, 0, 0)


class FixedDatetime(datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return FIXED_DATE


def make_renderer():
    """Returns (name, render(template, messages, tools, add_generation_prompt, **kwargs))."""
    try:
        import transformers
        from transformers.utils import chat_template_utils as ctu

        ctu.datetime = FixedDatetime  # strftime_now calls datetime.now()
        if hasattr(ctu, "_compile_jinja_template") and hasattr(ctu._compile_jinja_template, "cache_clear"):
            ctu._compile_jinja_template.cache_clear()

        def render(template, messages, tools, add_generation_prompt, **kwargs):
            out, _ = ctu.render_jinja_template(
                conversations=[messages], tools=tools, chat_template=template,
                add_generation_prompt=add_generation_prompt, **kwargs)
            return out[0]

        return "transformers " + transformers.__version__, render
    except ImportError:
        pass

    import jinja2
    from jinja2.ext import Extension
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class AssistantTracker(Extension):
        # transformers' {% generation %} tag; without an active tracker it renders its body.
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

        def _generation_support(self, caller):
            return caller()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return FixedDatetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now

    def render(template, messages, tools, add_generation_prompt, **kwargs):
        return env.from_string(template).render(messages=messages, tools=tools, documents=None,
                                                add_generation_prompt=add_generation_prompt, **kwargs)

    return "jinja2 %s replica of transformers' _compile_jinja_template" % jinja2.__version__, render


SYSTEM = {"role": "system", "content": "You are a concise assistant."}
USER1 = {"role": "user", "content": "Name a color of the sky."}
ASSIST1 = {"role": "assistant", "content": "Blue."}
USER2 = {"role": "user", "content": "  And at night?  \n"}
UNICODE = {"role": "user", "content": "Ünïcödé “quotes” 'single' \"double\" \\ back\tslash 😀 — ok"}
TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "description": "Forecast days", "default": 1},
            },
            "required": ["city"],
        },
    },
}]
TOOL_CALL = {"role": "assistant", "content": "",
             "tool_calls": [{"type": "function", "id": "abc123xyz",
                             "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]}
TOOL_RESULT = {"role": "tool", "tool_call_id": "abc123xyz", "name": "get_weather", "content": "22 degrees, sunny"}


def conversations(t):
    """(name, messages, add_generation_prompt, extra_vars) for template fixture t."""
    name = t["name"]
    no_system = name in ("gemma-2",)
    cases = []
    if not no_system:
        cases += [
            ("system_user_assistant", [SYSTEM, USER1, ASSIST1], False, {}),
            ("system_user_assistant_gen", [SYSTEM, USER1, ASSIST1], True, {}),
            ("multi_turn_gen", [SYSTEM, USER1, ASSIST1, USER2], True, {}),
        ]
    cases += [
        ("user_only_gen", [USER1], True, {}),
        ("user_assistant_user", [USER1, ASSIST1, USER2], True, {}),
        ("user_assistant", [USER1, ASSIST1], False, {}),
        ("unicode_gen", [UNICODE], True, {}),
    ]
    if name == "gemma-2":
        cases.append(("system_rejected", [SYSTEM, USER1], True, {}))
    if name in ("mistral-v0.3", "gemma-2", "gemma-3"):
        cases.append(("roles_not_alternating", [USER1, USER2], True, {}))
    if name == "gemma-3":
        parts = {"role": "user", "content": [{"type": "text", "text": "Describe this."}, {"type": "image"},
                                              {"type": "text", "text": "Briefly."}]}
        sys_parts = {"role": "system", "content": [{"type": "text", "text": "Be brief."}]}
        cases.append(("content_parts_gen", [sys_parts, parts], True, {}))
    if t.get("supports_tools"):
        cases.append(("tools_gen", [SYSTEM, USER1], True, {"tools": TOOLS}))
        cases.append(("tool_call_round_trip", [USER1, TOOL_CALL, TOOL_RESULT], True, {"tools": TOOLS}))
    if name == "llama-3.1":
        cases.append(("date_string", [SYSTEM, USER1], True, {"date_string": "01 Jan 2030"}))
        cases.append(("builtin_tools", [SYSTEM, USER1], True,
                      {"builtin_tools": ["brave_search", "wolfram_alpha", "code_interpreter"], "tools": TOOLS,
                       "tools_in_user_message": False}))
    if name == "qwen3":
        think = {"role": "assistant", "content": "<think>\nThe sky is blue by day.\n</think>\n\nBlue."}
        cases.append(("thinking_history", [USER1, think, USER2], True, {}))
        cases.append(("enable_thinking_false", [USER1], True, {"enable_thinking": False}))
    return cases


# One construct each; vars are JSON. Rendered by the same environment as the real templates.
LANGUAGE = [
    ("text_only", "Hello, world!\n", {}),
    ("output_expr", "{{ 1 + 2 }}|{{ 'a' ~ 1 ~ none }}|{{ x }}|{{ none }}|{{ true }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % -3 }}|{{ 2 ** 10 }}|{{ 7 / 2 }}|{{ 4 / 2 }}", {"x": "v"}),
    ("floats", "{{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1.5e-5 }} {{ 3.0 }} {{ 100.0 * 3 }} {{ 1/3 }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 1.23456|round(2, 'floor') }}", {}),
    ("comments_ws", "a {# comment #} b\n  {#- c -#}  d\n{# line #}\ne", {}),
    ("ws_control", "x  {{- ' y ' -}}  z\n  {%- if true %} t {% endif -%}  \nw", {}),
    ("trim_lstrip", "<ul>\n  {% for i in [1, 2] %}\n    <li>{{ i }}</li>\n  {% endfor %}\n</ul>\n", {}),
    ("plus_modifiers", "a\n  {%+ if true %}b{% endif +%}\nc\n  {% if true +%}\nd{% endif %}", {}),
    ("if_elif_else", "{% for n in [1, 2, 3, 4] %}{% if n == 1 %}one{% elif n == 2 %}two{% elif n is even %}even{% else %}other{% endif %},{% endfor %}", {}),
    ("for_loop_vars", "{% for x in 'abc' %}{{ loop.index0 }}{{ loop.index }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.cycle('o', 'e') }};{% endfor %}", {}),
    ("for_else_filter", "{% for x in xs if x > 1 %}{{ x }}:{{ loop.index }}/{{ loop.length }} {% else %}none{% endfor %}|{% for x in [] %}x{% else %}empty{% endfor %}", {"xs": [1, 2, 3]}),
    ("for_unpack_items", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in d|items %}{{ k }}{% endfor %}{% for k in d %}{{ k }}{% endfor %}", {"d": {"b": 1, "a": [1, 2]}}),
    ("break_continue", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i > 4 %}{% break %}{% endif %}{{ i }}{% endfor %}", {}),
    ("loop_scope", "{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}|{{ x }}", {}),
    ("namespace", "{% set ns = namespace(n=0, s='') %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s }}", {}),
    ("set_block", "{% set body %}  Hi {{ name }}!  {% endset %}[{{ body }}]{% set up | upper %}abc{% endset %}{{ up }}", {"name": "Bo"}),
    ("set_tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c, d = [3, 4] %}{{ c }}{{ d }}", {}),
    ("macro", "{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet('Ann') }} {{ greet('Bob', greeting='Hi') }} {{ greet(name='Cy') }}", {}),
    ("macro_caller", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold {{ x }}{% endcall %}", {"x": 1}),
    ("macro_recursion", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(5) }}", {}),
    ("filter_block", "{% filter upper %}hello {{ 'x' }}{% endfilter %}", {}),
    ("string_filters", "{{ '  hi  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ 'Hello World'|lower }}|{{ 'hello'|upper }}|{{ 'hello wORLD-foo(bar)'|title }}|{{ 'hELLO world'|capitalize }}|{{ 'aaa'|replace('a', 'b', 2) }}|{{ 'abc'|replace('', '-') }}|{{ 'one two  three'|wordcount }}|{{ 'abc'|reverse }}|{{ 'abc'|first }}{{ 'abc'|last }}|{{ 'héllo'|length }}", {}),
    ("list_filters", "{{ [3, 1, 2]|sort }}|{{ [3, 1, 2]|sort(reverse=true) }}|{{ ['b', 'A', 'a', 'B']|unique|list }}|{{ ['b', 'A', 'c']|sort }}|{{ [1, 2, 3]|reverse|list }}|{{ [1, 2]|first }}{{ [1, 2]|last }}|{{ [1, 2, 3]|length }}{{ {'a': 1}|count }}|{{ [1, 2, 3]|join('-') }}|{{ [1, 2, 3]|sum }}|{{ [4, 2, 8]|min }}{{ [4, 2, 8]|max }}|{{ 'ab'|list }}", {}),
    ("attr_filters", "{{ users|selectattr('active')|map(attribute='name')|join(',') }}|{{ users|rejectattr('active')|map(attribute='name')|list }}|{{ users|selectattr('role', 'equalto', 'admin')|list|length }}|{{ users|map(attribute='missing', default='?')|join }}|{{ users|sort(attribute='name')|map(attribute='name')|join }}|{{ [1, 2, 3, 4]|select('odd')|list }}|{{ [1, 2, 3, 4]|reject('even')|list }}|{{ ['a', 'b']|map('upper')|list }}|{{ users|join(', ', attribute='name') }}|{{ users|unique(attribute='role')|map(attribute='name')|list }}",
     {"users": [{"name": "zed", "active": True, "role": "admin"}, {"name": "amy", "active": False, "role": "user"}, {"name": "bob", "active": True, "role": "user"}]}),
    ("tojson", "{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ 'é\"\\n\\u0001'|tojson }}|{{ [1, 2.5, none, true, 'x']|tojson }}|{{ {}|tojson }}{{ []|tojson(indent=4) }}|{{ d|tojson(separators=(',', ':')) }}|{{ d|tojson(sort_keys=true) }}|{{ 'é😀'|tojson(ensure_ascii=true) }}|{{ 1e20|tojson }}",
     {"d": {"z": 1, "a": {"b": [1, {"c": None}], "e": []}, "s": "x y"}}),
    ("default_filter", "{{ missing|default('dflt') }}|{{ ''|default('e') }}|{{ ''|default('e', true) }}|{{ none|d('n') }}|{{ missing|d }}|{{ 0|default(5, boolean=true) }}", {}),
    ("conversions", "{{ '42'|int + 1 }}|{{ '3.9'|int }}|{{ 'x'|int(7) }}|{{ 3.7|int }}|{{ '2.5'|float }}|{{ 2|float }}|{{ 42|string ~ '!' }}|{{ [1, 'a']|string }}|{{ -3|abs }}|{{ true|int }}", {}),
    ("indent_filter", "{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb\\n\\nc'|indent(2, true) }}|{{ 'a\\nb\\n\\nc'|indent(2, blank=true) }}|{{ 'x\\n'|indent(3) }}|{{ 'x'|indent('> ', first=true) }}", {}),
    ("tests", "{{ x is defined }}{{ y is undefined }}{{ none is none }}{{ 's' is string }}{{ {} is mapping }}{{ [] is iterable }}{{ 's' is sequence }}{{ 1 is number }}{{ 1 is integer }}{{ 1.0 is integer }}{{ true is boolean }}{{ true is true }}{{ 0 is false }}{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}{{ 'a' is in 'abc' }}{{ 1 is equalto 1 }}{{ x is sameas none }}{{ 2 is not even }}{{ 'A' is upper }}{{ 1.5 is float }}{{ 2 is gt 1 }}", {"x": None}),
    ("string_methods", "{{ ' a b '.strip() }}|{{ 'xxa'.lstrip('x') }}|{{ 'a  '.rstrip() }}|{{ 'hello'.startswith('he') }}{{ 'hello'.endswith(('x', 'lo')) }}|{{ 'a,b,,c'.split(',') }}|{{ '  a b  c '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'ab'.upper() }}{{ 'AB'.lower() }}|{{ 'aXa'.replace('a', 'o') }}|{{ \"they're bill's\".title() }}|{{ '{} and {}'.format(1, 'b') }}|{{ '{0}{name}'.format('x', name='y') }}|{{ '-'.join(['a', 'b']) }}|{{ 'abcabc'.find('c') }}{{ 'abcabc'.count('bc') }}|{{ '12'.isdigit() }}", {}),
    ("dict_methods", "{{ d.get('a') }}|{{ d.get('zz') }}|{{ d.get('zz', 5) }}|{{ d.keys()|list }}|{{ d.values()|list }}|{{ d.items()|list }}|{{ d['a'] }}|{{ d.a }}|{{ d.missing }}|{{ 'a' in d }}{{ 'zz' not in d }}", {"d": {"a": 1, "b": "two"}}),
    ("slicing", "{{ xs[1:] }}|{{ xs[:-1] }}|{{ xs[::-1] }}|{{ xs[::2] }}|{{ xs[-2:] }}|{{ xs[1:3] }}|{{ 'hello'[1:3] }}|{{ 'héllo'[::-1] }}|{{ xs[-1] }}|{{ xs[10] }}|{{ xs[5:1:-2] }}|{{ 'abc'[-1] }}", {"xs": [0, 1, 2, 3, 4, 5]}),
    ("operators", "{{ 1 in [1, 2] }}{{ 3 not in [1, 2] }}{{ 'b' in 'abc' }}|{{ 1 < 2 < 3 }}{{ 1 < 3 < 2 }}|{{ 'a' < 'b' }}|{{ [1, 2] == [1, 2] }}{{ 1 == 1.0 }}{{ true == 1 }}|{{ not 1 }}{{ not none }}|{{ 1 and 2 }}|{{ 0 or 'x' }}|{{ none or [] }}|{{ [1] + [2] }}|{{ 'ab' * 2 }}{{ 3 * '-' }}|{{ (1, 2) }}|{{ 1 if false }}|{{ 'y' if true else 'n' }}|{{ - 3 + + 2 }}|{{ 2 * 3 ** 2 }}|{{ 10 - 2 - 3 }}", {}),
    ("literals", "{{ [1, 'two', [3]] }}|{{ {'k': 'v', 'n': 1} }}|{{ \"it's\" }}|{{ 'say \"hi\"' }}|{{ 'tab\\there' }}|{{ 'a' 'b' }}|{{ 1_000 }}|{{ (1,) }}|{{ {'a': none, 'b': true} }}|{{ ['x\\ny'] }}", {}),
    ("undefined_semantics", "[{{ missing }}]{% if missing %}t{% else %}f{% endif %}{{ missing|length }}{% for x in missing %}x{% endfor %}{{ missing is defined }}{{ obj.nope }}{{ obj.nope is defined }}{{ none.attr }}|{{ missing == missing }}", {"obj": {}}),
    ("raise_exception", "{% if x %}{{ raise_exception('Bad thing: ' ~ x) }}{% endif %}ok", {"x": 3}),
    ("strftime", "{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%Y-%m-%d %H:%M') }}", {}),
    ("range_global", "{{ range(3)|list }}|{{ range(1, 7, 2)|list }}|{{ range(5, 0, -2)|list }}|{{ dict(a=1, b=2) }}", {}),
    ("messages_like", "{%- for m in messages %}\n    {%- if m.role == 'user' %}\n        {{- '<u>' + m['content']|trim + '</u>' }}\n    {%- elif m.role == 'assistant' %}\n        {{- '<a>' + m.content + '</a>\\n' }}\n    {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}<a>{% endif %}\n",
     {"messages": [{"role": "user", "content": " hi "}, {"role": "assistant", "content": "yo"}], "add_generation_prompt": True}),
    ("raw_block", "{% raw %}{{ not evaluated }}{% endraw %}|{%- raw -%}  {% x %}  {%- endraw %}|", {}),
    ("generation_tag", "{% for m in ms %}{% generation %}[{{ m }}]{% endgeneration %}{% endfor %}", {"ms": [1, 2]}),
    ("crlf_trailing_newline", "a\r\nb\rc{% if true %}\r\nd{% endif %}\n", {}),
    ("nested_data", "{% for m in messages %}{% for p in m.content %}{{ p.type }}:{{ p.text|default('-') }};{% endfor %}{% endfor %}{{ messages[0].content[1]['type'] }}",
     {"messages": [{"content": [{"type": "text", "text": "hi"}, {"type": "image"}]}]}),
    ("append_pattern", "{% set xs = [] %}{% for i in range(3) %}{% set _ = xs.append(i * 2) %}{% endfor %}{{ xs }}", {}),
    ("error_unknown_filter", "line1\n{{ x|nosuchfilter }}", {"x": 1}),
    ("error_undefined_attr", "{{ missing.attr }}", {}),
    ("error_syntax", "{% if x %}unclosed", {}),
    ("error_add_types", "{{ 'a' + 1 }}", {}),
]


def render_all():
    renderer, render = make_renderer()
    templates = {}
    for path in sorted(glob.glob(os.path.join(FIXTURES, "*.json"))):
        base = os.path.basename(path)
        if base in ("expected.json", "language.json"):
            continue
        t = json.load(open(path, encoding="utf-8"))
        templates[t["name"]] = t
    cases = []
    for name, t in templates.items():
        tokens = {k: t[k] for k in ("bos_token", "eos_token", "unk_token", "pad_token") if t.get(k) is not None}
        for cname, messages, agp, extra in conversations(t):
            kwargs = dict(tokens)
            kwargs.update({k: v for k, v in extra.items() if k != "tools"})
            case = {"template": name, "name": cname, "messages": messages, "add_generation_prompt": agp,
                    "extra_vars": extra}
            try:
                case["rendered"] = render(t["template"], messages, extra.get("tools"), agp, **kwargs)
            except Exception as e:  # the template raised (raise_exception) or failed
                case["error"] = str(e)
            cases.append(case)
    lang = []
    for cname, src, variables in LANGUAGE:
        case = {"name": cname, "template": src, "vars": variables}
        try:
            import jinja2  # noqa: F401  (the replica is always used for language cases)
            case["rendered"] = render_language(src, variables)
        except Exception as e:
            case["error"] = "%s: %s" % (type(e).__name__, e)
        lang.append(case)
    return renderer, cases, lang


_LANG_ENV = None


def render_language(src, variables):
    """Language cases use the replica environment (these are not chat templates, so there is no
    transformers entry point; the environment is the same)."""
    global _LANG_ENV
    if _LANG_ENV is None:
        import jinja2
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        class AssistantTracker(jinja2.ext.Extension):
            tags = {"generation"}

            def parse(self, parser):
                lineno = next(parser.stream).lineno
                body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
                return jinja2.nodes.CallBlock(self.call_method("_gen"), [], [], body).set_lineno(lineno)

            def _gen(self, caller):
                return caller()

        def raise_exception(message):
            raise jinja2.exceptions.TemplateError(message)

        def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
            return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                            extensions=[AssistantTracker, jinja2.ext.loopcontrols])
        env.filters["tojson"] = tojson
        env.globals["raise_exception"] = raise_exception
        env.globals["strftime_now"] = lambda fmt: FIXED_DATE.strftime(fmt)
        _LANG_ENV = env
    return _LANG_ENV.from_string(src).render(**variables)


def main():
    renderer, cases, lang = render_all()
    meta = {"renderer": renderer, "fixed_date": FIXED_DATE.strftime("%Y-%m-%dT%H:%M:%S"),
            "generator": "tests/reference/make_template_reference.py"}
    with open(os.path.join(FIXTURES, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(dict(meta, cases=cases), f, ensure_ascii=False, indent=1)
        f.write("\n")
    import jinja2
    lang_meta = dict(meta, renderer="jinja2 %s replica of transformers' _compile_jinja_template" % jinja2.__version__)
    with open(os.path.join(FIXTURES, "language.json"), "w", encoding="utf-8") as f:
        json.dump(dict(lang_meta, cases=lang), f, ensure_ascii=False, indent=1)
        f.write("\n")
    n_err = sum(1 for c in cases if "error" in c)
    print("%s: %d cases (%d expected errors), %d language cases" % (renderer, len(cases), n_err, len(lang)))


if __name__ == "__main__":
    sys.exit(main())

"""Jinja semantics goldens for tandem's data/chat_template: macros, call blocks, recursive
loops and the scoping of `set` in loops, rendered by Python Jinja2 configured as transformers
configures it for chat templates (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
loopcontrols). Pure Python: runs wherever jinja2 is installed (3.1.x).

Usage: python3 make_jinja_golden.py OUT.jsonl
Writes one JSON object per line:
  line 1: {"format": "tandem-jinja-golden", "version": "1", "jinja2": ...}
  {"name": str, "template": str, "context": {...}, "output": str}     rendered
  {"name": str, "template": str, "context": {...}, "error": str}      Jinja2 raised
@huggingface/jinja (the JavaScript port) differs from Jinja2 in some of these (a `set` in a
loop body persists across its iterations there; macros see the caller's names there):
tandem follows Jinja2, which is what transformers runs.
"""
import json
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

TREE = [{"name": "a", "children": [{"name": "b", "children": []},
                                   {"name": "c", "children": [{"name": "d"}]}]},
        {"name": "e"}]
MSGS = [{"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}]}]
WRAP = "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}"

CASES = [
    # macros
    ("macro_defaults_and_keywords",
     "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
     "{{ greet('a') }} {{ greet('b', '?') }} {{ greet(punct='.', name='c') }}", {}),
    ("macro_sees_top_level_not_loop_locals",
     "{% set g = 'G' %}{% macro m() %}[{{ g }}|{{ x is defined }}|{{ top }}]{% endmacro %}"
     "{% for x in [1] %}{{ m() }}{% endfor %}", {"top": "T"}),
    ("macro_default_names_earlier_parameter",
     "{% macro m(a, b=a * 2) %}{{ a }},{{ b }}{% endmacro %}{{ m(3) }} {{ m(3, 1) }}", {}),
    ("macro_varargs_kwargs",
     "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }}", {}),
    ("macro_too_many_arguments", "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}", {}),
    ("macro_unknown_keyword", "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, b=2) }}", {}),
    ("macro_missing_argument_is_undefined",
     "{% macro m(a, b) %}[{{ a }}][{{ b }}][{{ b is defined }}]{% endmacro %}{{ m(1) }}", {}),
    ("macro_whitespace_control_content_parts",
     "{%- macro render(content) -%}\n"
     "{%- if content is string -%}{{ content }}{%- else -%}"
     "{%- for c in content -%}{{ c.text }}{%- endfor -%}{%- endif -%}\n"
     "{%- endmacro -%}\n"
     "{%- for m in messages -%}\n<{{ m.role }}>{{ render(m.content) }}\n{% endfor -%}\n",
     {"messages": MSGS}),
    ("macro_recursion",
     "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n }}*{{ fact(n - 1) }}{% endif %}{% endmacro %}"
     "{{ fact(4) }}", {}),
    ("macro_set_stays_inside",
     "{% macro m() %}{% set y = 5 %}{{ y }}{% endmacro %}{{ m() }}{{ y is defined }}", {}),
    ("macro_output_is_a_string",
     "{% macro m() %}  ab  {% endmacro %}[{{ m() | trim }}][{{ m() | length }}]", {}),
    # call blocks
    ("call_block", WRAP + "{% call wrap('b') %}bold{% endcall %}", {}),
    ("call_block_with_caller_arguments",
     "{% macro each(xs) %}{% for x in xs %}{{ caller(x) }};{% endfor %}{% endmacro %}"
     "{% call(item) each([1, 2]) %}<{{ item }}>{% endcall %}", {}),
    ("call_block_sees_call_site_locals",
     WRAP + "{% for n in ['x', 'y'] %}{% call wrap('i') %}{{ n }}{{ loop.index }}{% endcall %}{% endfor %}", {}),
    ("call_block_twice", WRAP.replace("{{ caller() }}", "{{ caller() }}{{ caller() }}")
     + "{% call wrap('p') %}z{% endcall %}", {}),
    # recursive loops
    ("recursive_loop",
     "{% for item in tree recursive %}{{ item.name }}"
     "{% if item.children %}[{{ loop(item.children) }}]{% endif %}{% endfor %}", {"tree": TREE}),
    ("recursive_loop_depth",
     "{% for item in tree recursive %}{{ loop.depth }}{{ loop.depth0 }}{{ item.name }}"
     "{% if item.children %}({{ loop(item.children) }}){% endif %}{% endfor %}", {"tree": TREE}),
    ("recursive_loop_index_and_outer_names",
     "{% set p = '>' %}{% for i in tree recursive %}{{ p }}{{ loop.index }}/{{ loop.length }}{{ i.name }}"
     "{% if i.children %}{{ loop(i.children) }}{% endif %}{% endfor %}", {"tree": TREE}),
    ("recursive_loop_with_filter",
     "{% for i in tree if i.name != 'b' recursive %}{{ i.name }}"
     "{% if i.children %}{{ loop(i.children) }}{% endif %}{% endfor %}", {"tree": TREE}),
    # set scoping
    ("set_in_loop_is_per_iteration",
     "{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = x + 1 %}{{ x }}{% endfor %}|{{ x }}", {}),
    ("set_in_loop_does_not_leak",
     "{% for i in [1, 2] %}{% set y = i %}{% endfor %}{{ y is defined }}", {}),
    ("namespace_carries_across_iterations",
     "{% set ns = namespace(n=0) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", {}),
    ("set_in_if_in_loop", "{% for i in [1, 2] %}{% if true %}{% set z = i %}{% endif %}{{ z }}{% endfor %}"
     "{{ z is defined }}", {}),
    ("set_in_top_level_if", "{% if true %}{% set w = 3 %}{% endif %}{{ w }}", {}),
    ("nested_loops_namespace_and_local",
     "{% set ns = namespace(found=false) %}{% for a in [1, 2] %}{% for b in [3, 4] %}"
     "{% if a * b == 6 %}{% set ns.found = true %}{% set hit = a ~ b %}{% endif %}{% endfor %}"
     "{{ hit is defined }}{% endfor %}{{ ns.found }}", {}),
    ("loop_variable_shadows_and_restores",
     "{% set i = 'outer' %}{% for i in [1] %}{{ i }}{% endfor %}{{ i }}", {}),
    ("block_set_in_loop",
     "{% for i in [1, 2] %}{% set s %}<{{ i }}>{% endset %}{{ s }}{% endfor %}{{ s is defined }}", {}),
    ("set_in_loop_else", "{% for i in [] %}{% else %}{% set e = 1 %}{{ e }}{% endfor %}{{ e is defined }}", {}),
]


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    out = open(sys.argv[1], "w", encoding="utf-8")
    out.write(json.dumps({"format": "tandem-jinja-golden", "version": "1", "jinja2": jinja2.__version__}) + "\n")
    for name, template, context in CASES:
        rec = {"name": name, "template": template, "context": context}
        try:
            rec["output"] = env.from_string(template).render(**context)
        except Exception as e:  # noqa: BLE001 - what Jinja2 raised is the golden
            rec["error"] = f"{type(e).__name__}: {e}"
        out.write(json.dumps(rec, ensure_ascii=False) + "\n")
    out.close()


if __name__ == "__main__":
    main()

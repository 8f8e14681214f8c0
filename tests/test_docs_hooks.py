"""The documentation site's build-time pieces, without a browser: the equations to MathML (``docs/hooks/math.py``)
and the Sphinx docstrings made readable by mkdocstrings (``docs/hooks/sphinx_docstrings.py``).

The whole site in Chromium, offline, is ``tests/test_docs_browser.py``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("mkdocs", reason="MkDocs is not installed (pip install -e '.[docs]')")
pytest.importorskip("latex2mathml", reason="latex2mathml is not installed (pip install -e '.[docs]')")
griffe = pytest.importorskip("griffe", reason="griffe is not installed (pip install -e '.[docs]')")

from mkdocs.exceptions import PluginError  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _hook(name: str):
    spec = importlib.util.spec_from_file_location(f"docs_hooks_{name}", ROOT / "docs" / "hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


math = _hook("math")
sphinx = _hook("sphinx_docstrings")


def test_display_equation_becomes_mathml_with_its_number():
    tex = "s_0 = \\tanh\\Big(\\frac{1}{m} \\sum_{i=1}^{m} c_i\\Big) \\tag{A.3a}"
    html = f'<p>x</p>\n<div class="arithmatex">\\[\n{tex}\n\\]</div>'
    out = math.render(html, "models.md")
    assert "\\" not in out and "<mfrac>" in out and "<munderover>" in out
    assert '<math xmlns="http://www.w3.org/1998/Math/MathML" display="block">' in out
    assert out.endswith('<span class="math-tag">(A.3a)</span></div>')


def test_inline_equation_becomes_inline_mathml_and_html_entities_are_read_as_tex():
    out = math.render('a <span class="arithmatex">\\(x &lt; \\bar{E}\\)</span> b', "models.md")
    assert 'display="inline"' in out and "&#x0003C;" in out and "\\" not in out


@pytest.mark.parametrize("tex", ["\\frac{1}{", "\\unknowncommand{x}"])
def test_equation_that_cannot_be_rendered_fails_the_build_naming_page_and_tex(tex):
    with pytest.raises(PluginError, match=r"models\.md: .*" + tex[:6].replace("\\", "\\\\")):
        math.render(f'<div class="arithmatex">\\[{tex}\\]</div>', "models.md")


def test_inline_fields_start_their_own_line_and_parse_as_parameters():
    text = "Validate a setting.  :param key: its name (``batch_size``).  :param why: what the maximum protects.\n"
    split = sphinx.split_fields(text)
    assert split.splitlines() == [
        "Validate a setting.",
        ":param key: its name (``batch_size``).",
        ":param why: what the maximum protects.",
    ]
    function = griffe.Function("check", parameters=griffe.Parameters(griffe.Parameter("key"), griffe.Parameter("why")))
    sections = griffe.Docstring(split, parent=function).parse("sphinx")
    params = [s for s in sections if s.kind is griffe.DocstringSectionKind.parameters]
    assert [p.name for p in params[0].value] == ["key", "why"]
    assert sections[0].value == "Validate a setting."


@pytest.fixture(scope="module")
def task():
    package = griffe.load("sarnmt.human.task", search_paths=[str(ROOT)], docstring_parser="sphinx")
    return package


def test_roles_become_code_linking_to_the_resolved_object(task):
    create = task["create_task"]
    out = sphinx.rewrite_roles("see :func:`check_spec` and :class:`~sarnmt.human.task.TaskSpec`", create)
    assert ":func:" not in out and ":class:" not in out
    assert '<autoref identifier="sarnmt.human.task.check_spec" optional><code>check_spec()</code></autoref>' in out
    assert '<autoref identifier="sarnmt.human.task.TaskSpec" optional><code>TaskSpec</code></autoref>' in out


def test_a_role_that_cannot_be_resolved_stays_code_under_its_own_name(task):
    out = sphinx.rewrite_roles(":mod:`secrets` and :meth:`.nowhere`", task["TaskSpec"])
    assert '<autoref identifier="secrets" optional><code>secrets</code></autoref>' in out
    assert "<code>nowhere()</code>" in out


def test_extension_rewrites_every_docstring_of_the_loaded_package():
    package = griffe.load(
        "sarnmt.human",
        search_paths=[str(ROOT)],
        docstring_parser="sphinx",
        extensions=griffe.load_extensions(str(ROOT / "docs" / "hooks" / "sphinx_docstrings.py")),
    )
    spec = package["task.TaskSpec"]
    assert ":mod:" not in spec.docstring.value
    params = [s for s in spec.docstring.parsed if s.kind is griffe.DocstringSectionKind.parameters]
    assert [p.name for p in params[0].value] == ["name", "systems", "sample", "seed"]

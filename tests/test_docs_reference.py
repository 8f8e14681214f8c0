"""The docs read as reference, not as lab notes: no page names an issue of the project's tracker (the history is the
CHANGELOG's and the git log's). Checked on the hand-written pages (README.md, docs/*.md) and on the Results pages
the site generates from ``sweeps/results/`` (``docs/hooks/results.py``: the tables' footers, the folders' notes,
the benchmark and GPU check records), as the site would show them; on the package's docstrings, which the API pages
render; on what a user reads beside them: the packaged YAML files (the Hydra configs and the sweep specs, their
comments and help texts), the Makefile's comments and help and the scripts' headers; and on the docstrings of the
benchmark scripts and of the tests, which say what each script measures and what each test checks.

Only the numbered forms are refused (the word followed by a number, or a hash and two or more digits): the plain
word, a GitHub thread cited by its address and an HTML entity are not a tracker's number."""

from __future__ import annotations

import importlib.util
import re

import pytest

from tests.conftest import ROOT

ISSUE = re.compile(r"\b[Ii]ssues? #?\d+|(?<![&\w])#\d{2,}\b")  # not an HTML entity (``&#124;``)


@pytest.mark.parametrize(
    "text,numbered",
    [
        ("the fix of issue 58", True),
        ("Issue 40's targets", True),
        ("issues 40 and 41", True),
        ("as #58 asked", True),
        ("(issue 45)", True),
        ("open issues and pull requests", False),
        ("https://github.com/pytorch/pytorch/issues/58 (a known bug)", False),
        ("&#124; and &#91; are escaped", False),
        ("an issue of the tracker", False),
    ],
)
def test_only_numbered_issues_are_refused(text: str, numbered: bool):
    assert bool(ISSUE.search(text)) is numbered


def _issues(name: str, text: str) -> list[str]:
    """``page:line: ...the words around it...`` for each line of ``text`` that names an issue."""
    return [
        f"{name}:{number}: ...{line[max(0, match.start() - 50) : match.end() + 10]}..."
        for number, line in enumerate(text.splitlines(), 1)
        if (match := ISSUE.search(line))
    ]


def test_no_page_names_an_issue_number():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    found = [hit for page in pages for hit in _issues(str(page.relative_to(ROOT)), page.read_text(encoding="utf-8"))]
    assert not found, "\n".join(found)


def test_no_generated_results_page_names_an_issue_number():
    pytest.importorskip("mkdocs", reason="MkDocs is not installed (pip install -e '.[docs]')")
    spec = importlib.util.spec_from_file_location("docs_hooks_results", ROOT / "docs" / "hooks" / "results.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    hook._build()  # the pages as `make docs` generates them, from the committed sweeps/results/
    pages = dict(hook._pages)
    for folder in ("mini", "mini8", "bench", "gpu", "mini-pilot"):  # what the site shows, so what is checked
        assert f"results/{folder}.md" in pages, f"no generated page for sweeps/results/{folder}/"
    found = [hit for uri, text in pages.items() for hit in _issues(uri, text)]
    assert not found, "\n".join(found)


def _docstrings(path) -> list[tuple[int, str]]:
    """``(line, text)`` of the module's, every class's and every function's docstring in ``path``."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef))]
    found = []
    for node in nodes:
        doc = ast.get_docstring(node, clean=False)
        if doc is not None:
            found.append((node.body[0].lineno, doc))
    return found


def test_no_api_page_names_an_issue_number():
    """The API pages render the package's docstrings (mkdocstrings), so those read as reference too; comments,
    which no page shows, are left alone."""
    found = []
    for path in sorted((ROOT / "sarnmt").rglob("*.py")):
        for line, doc in _docstrings(path):
            name = f"{path.relative_to(ROOT)}:{line}"
            found += _issues(name, doc)
    assert not found, "\n".join(found)


def test_no_packaged_config_names_an_issue_number():
    """Every YAML file the package ships (``sarnmt/conf``, the sweep specs): its comments are the configs' reference
    (``--help`` prints the header and the settings beside them), read whole, values and help texts included."""
    from sarnmt.utils.compose import config_dir, specs_dir

    package = config_dir().parent  # the imported package's folder: a checkout's sarnmt/, or site-packages/sarnmt/
    files = sorted({*config_dir().rglob("*.yaml"), *specs_dir().rglob("*.yaml")})
    assert len(files) > 50
    found = [
        hit
        for path in files
        for hit in _issues(f"sarnmt/{path.relative_to(package).as_posix()}", path.read_text(encoding="utf-8"))
    ]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("folder", ["benchmarks", "tests"])
def test_no_benchmark_or_test_docstring_names_an_issue_number(folder: str):
    """The benchmark scripts' docstrings (their ``--help`` and what each measures) and the tests' (what each test
    module, class and function checks): every module, class and function docstring under the folder."""
    paths = sorted((ROOT / folder).rglob("*.py"))
    assert paths, f"no Python files under {folder}/"
    found = [
        hit
        for path in paths
        for line, doc in _docstrings(path)
        for hit in _issues(f"{path.relative_to(ROOT)}:{line}", doc)
    ]
    assert not found, "\n".join(found)


def test_no_makefile_or_script_comment_names_an_issue_number():
    """The Makefile (``make help`` prints its ``##`` lines) and the scripts' headers (``scripts/*.sh``)."""
    files = [ROOT / "Makefile", *sorted((ROOT / "scripts").glob("*.sh"))]
    found = [hit for path in files for hit in _issues(str(path.relative_to(ROOT)), path.read_text(encoding="utf-8"))]
    assert not found, "\n".join(found)

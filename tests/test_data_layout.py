"""The layout of ``sarnmt.data``: three subpackages (text, corpora, loading), dependencies one way, no import circle.

The import graph is read from the source with ``ast`` (module-level imports only), so a circle cannot hide behind
an import done inside a function: such imports of ``sarnmt.data`` are refused outright. Every module also imports
on its own in a fresh interpreter (an import that only works after another module has been loaded fails there).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

DATA = ROOT / "sarnmt" / "data"
LAYERS = ("text", "corpora", "loading")  # each may import only the ones before it


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(DATA.rglob("*.py")) if "__pycache__" not in p.parts}


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The modules of ``sarnmt`` an import statement names (``from pkg import mod`` names ``pkg.mod`` when that is
    a module of ``sarnmt.data``, else ``pkg``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:  # relative: resolved against this module's package
        package = module.split(".") if is_package else module.split(".")[:-1]
        base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
    out = []
    for alias in node.names:
        full = f"{base}.{alias.name}"
        out.append(full if full in MODULES else base)
    return out


def _imports(path: Path) -> tuple[set[str], list[str]]:
    """``(modules of sarnmt.data imported at module level, 'line: statement' of every sarnmt.data import made inside
    a function)``."""
    module = _module_name(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    top: set[str] = set()
    nested: list[str] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                names = [n for n in _imported(child, module, path.name == "__init__.py") if n.startswith("sarnmt.data")]
                if in_function and names:
                    nested.append(f"{child.lineno}: {ast.unparse(child)}")
                elif not in_function:
                    top.update(names)
            visit(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))

    visit(tree, False)
    return top, nested


def _graph() -> dict[str, set[str]]:
    """Module -> the modules of sarnmt.data it imports at module level (a package's ``__init__`` counts as the
    package)."""
    graph = {}
    for name, path in MODULES.items():
        top, _ = _imports(path)
        graph[name] = {t for t in top if t in MODULES and t != name}
    return graph


def _layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.index(parts[2]) if len(parts) > 2 and parts[2] in LAYERS else None


def test_the_data_package_is_three_documented_subpackages_and_nothing_else():
    assert sorted(p.name for p in DATA.iterdir() if p.suffix == ".py") == ["__init__.py"]
    assert sorted(p.name for p in DATA.iterdir() if p.is_dir() and p.name != "__pycache__") == sorted(LAYERS)
    for package in ("sarnmt.data", *(f"sarnmt.data.{layer}" for layer in LAYERS)):
        doc = ast.get_docstring(ast.parse(MODULES[package].read_text(encoding="utf-8")))
        assert doc and len(doc) > 100, f"{package} needs a docstring saying what it holds"


def test_no_module_of_sarnmt_data_imports_sarnmt_data_inside_a_function():
    lazy = {name: nested for name, path in MODULES.items() if (nested := _imports(path)[1])}
    assert lazy == {}


def test_the_module_level_imports_of_sarnmt_data_form_no_circle():
    graph = _graph()
    assert graph["sarnmt.data.text.codec_state"] >= {
        "sarnmt.data.text.codecs",
        "sarnmt.data.text.subword",
        "sarnmt.data.text.pipeline",
    }
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                pytest.fail(f"import circle: {' -> '.join(path[path.index(nxt) :] + [nxt])}")
            if nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_the_layers_depend_one_way_text_then_corpora_then_loading():
    upward = [
        f"{module} imports {target}"
        for module, targets in _graph().items()
        for target in sorted(targets)
        if _layer(module) is not None and _layer(target) is not None and _layer(target) > _layer(module)
    ]
    assert upward == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_module_imports_alone_in_a_fresh_interpreter(module):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's sarnmt, not whichever one is installed
    done = subprocess.run(
        [sys.executable, "-c", f"import {module}"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]

"""The seam between the equations and their fast implementations: ``sarnmt.models`` states each equation once and
holds no hand-written backward; ``sarnmt.kernels`` holds every kernel and the choice among them, and imports nothing
from ``sarnmt.models`` (the model hands its own implementations in), so the two packages form no import circle."""

from __future__ import annotations

import ast

from tests.conftest import ROOT

KERNELS = ROOT / "sarnmt" / "kernels"
MODELS = ROOT / "sarnmt" / "models"


def _imported_modules(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):  # every import, at module level or inside a function
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_kernels_import_nothing_from_the_models():
    offending = {
        path.name: sorted(m for m in _imported_modules(ast.parse(path.read_text())) if m.startswith("sarnmt.models"))
        for path in sorted(KERNELS.glob("*.py"))
    }
    assert not {name: mods for name, mods in offending.items() if mods}
    assert {path.stem for path in KERNELS.glob("*.py")} >= {"choice", "registry", "gru", "loop_linear"}


def test_models_hold_no_hand_written_backward_and_no_implementation_switch():
    """No ``torch.autograd.Function`` under ``sarnmt/models/``, and no ``fused``, ``chunked`` or ``loop`` parameter."""
    for path in sorted(MODELS.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = {ast.unparse(base) for base in node.bases}
                assert not bases & {"torch.autograd.Function", "Function"}, f"{path}: {node.name}"
            if isinstance(node, ast.FunctionDef):
                args = node.args.args + node.args.kwonlyargs
                names = {arg.arg for arg in args}
                assert not names & {"fused", "chunked", "loop"}, f"{path}: {node.name}({', '.join(sorted(names))})"

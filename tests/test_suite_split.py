"""`make test` and `make test-full`: the table of long tests in tests/conftest.py names tests that exist, so that a
renamed test is not quietly taken back into the quick suite, nor a table row left naming nothing."""

from __future__ import annotations

import ast

from tests.conftest import ROOT, SLOW


def test_every_row_of_the_slow_table_names_a_test_module_and_its_tests():
    for module, entry in SLOW.items():
        path = ROOT / "tests" / module
        assert path.is_file(), module
        if isinstance(entry, dict):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            tests = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
            assert set(entry) <= tests, (module, sorted(set(entry) - tests))

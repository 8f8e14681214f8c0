"""The hand-written docs read as reference, not as lab notes: no page names an issue of the project's tracker (the
history is the CHANGELOG's and the git log's). The generated Results pages (from ``sweeps/results/``) are not
checked here: older published records' footers still name issues."""

from __future__ import annotations

import re

from tests.conftest import ROOT

ISSUE = re.compile(r"\b[Ii]ssues? #?\d+|#\d{2,}\b")


def test_no_page_names_an_issue_number():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    found = [
        f"{page.relative_to(ROOT)}:{number}: {line.strip()[:80]}"
        for page in pages
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if ISSUE.search(line)
    ]
    assert not found, "\n".join(found)

"""A pytest plugin for ``make faults``: after the run, a table of every fault scenario tried, whether the project
survived it, and what it checks.

Load it with ``-p tests.fault_report`` (``make faults`` does). A scenario is a test marked ``faults``; what it checks
is its docstring's first sentence, followed by the parameter id for a parametrised test (the hostile-input cases name
their command and input there). "Survived" means the test passed: the run resumed exactly, the file was refused with
the right message, and so on; anything else is listed as failed, and skipped scenarios as skipped.
"""

from __future__ import annotations

import pytest

_RESULTS: dict[str, tuple[str, str]] = {}  # node id -> (outcome, what it checks)


def _what(item: pytest.Item) -> str:
    doc = (getattr(item, "function", None).__doc__ or "").strip()
    first = " ".join(doc.split("\n\n")[0].split())
    callspec = getattr(item, "callspec", None)
    return f"{first} [{callspec.id}]" if callspec is not None else first


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    outcome = yield
    report = outcome.get_result()
    if item.get_closest_marker("faults") is None:
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        state = {"passed": "survived", "failed": "FAILED", "skipped": "skipped"}[report.outcome]
        _RESULTS[item.nodeid] = (state, _what(item))


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if not _RESULTS:
        return
    write = terminalreporter.write_line
    terminalreporter.section("fault scenarios")
    width = max(len(node.split("::", 1)[-1]) for node in _RESULTS)
    for node, (state, what) in _RESULTS.items():
        write(f"{state:<9} {node.split('::', 1)[-1]:<{width}}  {what}")
    counts = {state: sum(1 for s, _ in _RESULTS.values() if s == state) for state in ("survived", "FAILED", "skipped")}
    write(
        f"{len(_RESULTS)} scenarios tried: {counts['survived']} survived, {counts['FAILED']} failed, "
        f"{counts['skipped']} skipped"
    )

"""The ranking page in a real headless Chromium (Debian's ``chromium`` driven by Playwright): sign in, rank items
with the mouse and with the keyboard, skip, flag, reload and continue, two tabs; the blinding and the escaping of
outputs; then the export gives the percentages of exactly those judgements.

Skips where Chromium or Playwright is missing (a laptop), but fails under CI (``CI=true``), which installs both.
With ``SARNMT_HUMAN_SCREENSHOT=path.png`` the page as rendered here is also saved there (the picture on
docs/human-evaluation.md: ``make human-eval-screenshot``).
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from sarnmt.human import app as app_module
from sarnmt.human.export import export
from tests.human_helpers import OUTPUTS, SCRIPT_LINE, SYSTEMS, make_task, running, shown_orders

CHROMIUM = os.environ.get("SARNMT_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _need_browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        reason = "Playwright is not installed (pip install -e '.[dev]')"
    else:
        if CHROMIUM:
            return sync_playwright
        reason = "no chromium on PATH (Debian: apt-get install chromium)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the browser test: {reason}")
    pytest.skip(reason)


@contextlib.contextmanager
def launched_chromium():
    """Debian's chromium under Playwright with :data:`CHROMIUM_ARGS`, closed afterwards (a skip, or a failure under
    ``CI=true``, where there is none: :func:`_need_browser`)."""
    sync_playwright = _need_browser()
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def browser():
    with launched_chromium() as chromium:
        yield chromium


@pytest.fixture
def sent(monkeypatch):
    """Every body the app sends (pages, scripts, API answers), recorded as the server writes it: the app's
    outermost middleware (:class:`sarnmt.human.guard.Guard`), wrapped."""
    bodies: list[bytes] = []

    class Recording(app_module.Guard):
        async def __call__(self, scope, receive, send) -> None:
            async def recording(message) -> None:
                if message["type"] == "http.response.body" and message.get("body"):
                    bodies.append(message["body"])
                await send(message)

            await super().__call__(scope, receive, recording)

    monkeypatch.setattr(app_module, "Guard", Recording)
    return bodies


SYSTEM_OF = {text: name for name, texts in OUTPUTS.items() for text in texts}
LINE_OF = {text: k + 1 for texts in OUTPUTS.values() for k, text in enumerate(texts)}


def _shown(page) -> list[str]:
    """The systems behind the outputs on the page, top to bottom (found through the test's own files)."""
    texts = page.locator("#outputs li .text").all_text_contents()
    return [SYSTEM_OF[t] for t in texts]


def _at(page, position: int) -> None:
    """Wait until the page shows the item at ``position``."""
    from playwright.sync_api import expect

    expect(page.locator("#position")).to_have_text(f"Item {position} of 6")


def _position(page) -> int:
    return int(page.locator("#position").text_content().split()[1])


def test_rank_with_mouse_and_keyboard_reload_two_tabs_blind_escaped_and_exported(browser, sent, tmp_path):
    db = tmp_path / "human.sqlite"
    tokens = make_task(db, tmp_path / "inputs")
    judged: dict[int, dict[str, int]] = {}  # position → system → rank, as the test gave them
    statuses: dict[int, str] = {}
    requests: list[str] = []
    pages: list[str] = []
    escaped: list[bool] = []

    def ranked(page, slot_ranks: list[int]) -> None:
        judged[_position(page)] = dict(zip(_shown(page), slot_ranks, strict=True))

    with running(db) as server:
        context = browser.new_context(viewport={"width": 1000, "height": 640})
        context.on("request", lambda r: requests.append(f"{r.method} {r.url} {r.post_data or ''}"))
        page = context.new_page()
        page.goto(server.url)
        page.wait_for_selector("#signin-who")
        page.fill("#signin-who", tokens["ana"])
        page.click("#signin-form button[type=submit]")
        page.wait_for_selector("#outputs li")
        assert page.locator("#who").text_content() == "ana · en_de"
        assert page.locator("#progress").text_content().startswith("0 of 6 done")
        orders = {}

        def visit() -> int:
            position = _position(page)
            orders[position] = _shown(page)
            pages.append(page.content())
            if LINE_OF[page.locator("#outputs li .text").first.text_content()] == SCRIPT_LINE:
                escaped.append(_check_escaped(page))
            return position

        # item 1, the mouse: A = 1, B = 2, C = 2 (a tie), then Submit
        visit()
        for slot, rank in enumerate([1, 2, 2], start=1):
            page.click(f"#outputs li:nth-child({slot}) button[data-rank='{rank}']")
        assert page.locator("#submit").is_enabled()
        if os.environ.get("SARNMT_HUMAN_SCREENSHOT"):
            page.screenshot(path=os.environ["SARNMT_HUMAN_SCREENSHOT"])
        page.screenshot(path=tmp_path / "page.png")
        ranked(page, [1, 2, 2])
        page.click("#submit")
        _at(page, 2)

        # item 2, the keyboard: 2, 1, 3 ranks A, B, C in turn; Enter submits
        visit()
        page.keyboard.press("2")
        page.keyboard.press("1")
        page.keyboard.press("3")
        ranked(page, [2, 1, 3])
        page.keyboard.press("Enter")
        _at(page, 3)

        # item 3: Enter before every output has a rank is refused on the page; = ranks all equal
        visit()
        page.keyboard.press("1")
        page.keyboard.press("Enter")
        assert "has none" in page.locator("#message").text_content() and _position(page) == 3
        page.keyboard.press("=")
        ranked(page, [1, 1, 1])
        page.keyboard.press("Enter")
        _at(page, 4)

        # item 4: skip (s)
        statuses[visit()] = "skipped"
        page.keyboard.press("s")
        _at(page, 5)

        # reload: signed in still, at the first item not done, with the progress kept
        page.reload()
        page.wait_for_selector("#outputs li")
        assert _position(page) == 5
        assert page.locator("#progress").text_content() == "4 of 6 done · 3 ranked · 1 skipped · 0 flagged"

        # item 5: flag as broken with the button
        statuses[visit()] = "broken"
        page.click("#flag")
        _at(page, 6)

        # item 6 in two tabs of the same annotator: the last submit wins, one row
        visit()
        other = context.new_page()
        other.goto(server.url)
        other.wait_for_selector("#outputs li")
        assert _position(other) == 6
        page.keyboard.press("1")
        page.keyboard.press("2")
        page.keyboard.press("3")
        page.keyboard.press("Enter")
        page.wait_for_selector("#done:not([hidden])")
        for slot, rank in enumerate([3, 3, 1], start=1):
            other.click(f"#outputs li:nth-child({slot}) button[data-rank='{rank}']")
        judged[6] = dict(zip(_shown(other), [3, 3, 1], strict=True))
        other.click("#submit")
        other.wait_for_selector("#done:not([hidden])")
        assert "All 6 items are done" in other.locator("#done-text").text_content()
        pages.append(page.content())
        context.close()

    assert escaped == [True]  # the item with <script> was seen, as text

    # the database holds one row per item, the second tab's ranks for item 6
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT i.position, j.status, j.submissions FROM judgement j JOIN item i "
            "ON i.id = j.item_id ORDER BY i.position"
        ).fetchall()
    assert rows == [
        (1, "ranked", 1),
        (2, "ranked", 1),
        (3, "ranked", 1),
        (4, "skipped", 1),
        (5, "broken", 1),
        (6, "ranked", 2),
    ]
    with sqlite3.connect(db) as conn:  # the times: served, submitted, and the seconds between
        times = conn.execute("SELECT shown_at, submitted_at, seconds FROM judgement").fetchall()
    assert all(shown < submitted and 0 <= seconds < 60 for shown, submitted, seconds in times)

    # blinding: the page shows the outputs in the item's stored order, which varies across items, and nothing the
    # browser sent or received names a system or a system's file
    stored = shown_orders(db)
    with sqlite3.connect(db) as conn:
        by_position = dict(conn.execute("SELECT position, id FROM item").fetchall())
    assert all(orders[p] == stored[by_position[p]] for p in orders)
    assert len({tuple(o) for o in orders.values()}) == len(orders) == 6
    secrets = [*SYSTEMS, "out.0.de", "out.1.de", "out.2.de"]
    seen = [*pages, *requests, *(b.decode("utf-8") for b in sent)]
    assert len(sent) > 10 and any("Rank the translations" in s for s in seen)
    assert [(name, s[:80]) for s in seen for name in secrets if name in s] == []

    # the export: the percentages of exactly these judgements
    expected = {}
    for first, second in [(SYSTEMS[1], SYSTEMS[0]), (SYSTEMS[2], SYSTEMS[0]), (SYSTEMS[2], SYSTEMS[1])]:
        labels = [(r[first] < r[second]) - (r[first] > r[second]) for r in judged.values()]
        expected[first, second] = [100 * labels.count(v) / len(labels) for v in (1, 0, -1)]
    files = export(db, tmp_path / "export")
    rows = {(r["first"], r["second"]): r for r in csv.DictReader(io.StringIO(files["table5.csv"]))}
    for key, percents in expected.items():
        got = [float(rows[key][k]) for k in ("pct_higher", "pct_equal", "pct_lower")]
        assert got == pytest.approx(percents, abs=1e-3) and rows[key]["n"] == "4"
    assert "4 ranked, 1 skipped, 1 flagged as broken" in files["table5.md"]
    assert Path(tmp_path / "page.png").stat().st_size > 10_000


def _check_escaped(page) -> bool:
    """The output holding <script> and an <img onerror> is shown as text: no element made, nothing run."""
    texts = page.locator("#outputs li .text").all_text_contents()
    assert any("<script>window.__pwned = 1</script><img src=x" in t for t in texts)
    assert page.locator("#outputs script, #outputs img").count() == 0
    assert page.evaluate("window.__pwned") is None
    return True

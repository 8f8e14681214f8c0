"""The documentation site opened from disk (``file://``) in a real headless Chromium with the network cut.

The site is built as ``make docs`` builds it (``mkdocs build --strict``, into a temporary folder; or the one named by
``SARNMT_DOCS_SITE``), then Chromium, offline and with every request that is not a ``file://`` one aborted and
recorded, opens it as a user who downloaded it would:

- the models page shows every equation of ``docs/models.md`` as MathML that Chromium lays out (no raw TeX in the
  rendered text, the equation numbers beside them);
- every API page shows no raw Sphinx field or role (``:param``, ``:returns:``, ``:meth:``, ``:class:``...): the
  fields are parameter tables, the roles code that links to the object's entry;
- a link clicked in the nav opens the page (not a directory listing), and search finds pages from disk;
- nothing is fetched from anywhere but the disk.

Skips where Chromium, Playwright or MkDocs is missing (a laptop), but fails under CI (``CI=true``), which installs
them (``make browser``, the ``docs`` extra). With ``SARNMT_DOCS_SCREENSHOTS=folder`` the models page and an API page
as rendered here are also saved there (the pictures on docs/development.md: ``make docs-screenshots``).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_human_browser import launched_chromium

ROOT = Path(__file__).resolve().parents[1]
MODELS_MD = ROOT / "docs" / "models.md"

# what must never be seen: TeX commands and delimiters, Sphinx fields and roles
RAW_TEX = re.compile(r"\\[A-Za-z]{2,}|\$\$|\\\(|\\\[")
RAW_SPHINX = re.compile(
    r":(?:param|parameter|returns?|rtype|raises?|type|ivar|var)\b"
    r"|:(?:py:)?(?:meth|class|func|mod|data|attr|exc|obj):"
)
# the rendered text of the page's article, code blocks left out (a code sample may hold a backslash)
ARTICLE_TEXT = """() => {
  const article = document.querySelector("article").cloneNode(true);
  article.querySelectorAll("pre").forEach((e) => e.remove());
  return article.innerText;
}"""


def _equations(markdown: str) -> int:
    """Display (``$$ ... $$``) and inline (``\\( ... \\)``) equations in a page's Markdown."""
    return markdown.count("$$") // 2 + markdown.count("\\(")


@pytest.fixture(scope="module")
def browser():
    with launched_chromium() as chromium:
        yield chromium


@pytest.fixture(scope="module")
def site(browser, tmp_path_factory) -> Path:
    if os.environ.get("SARNMT_DOCS_SITE"):
        return Path(os.environ["SARNMT_DOCS_SITE"]).resolve()
    if importlib.util.find_spec("mkdocs") is None:
        reason = "MkDocs is not installed (pip install -e '.[docs]')"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the docs browser test: {reason}")
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    # not --quiet: it drops the warnings that --strict counts, and a build with a broken link then passes
    run = [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)]
    done = subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"mkdocs build failed:\n{done.stderr[-3000:]}"
    return out


@pytest.fixture
def offline(browser):
    """A page in an offline context that aborts, and records, every request that is not for a file on disk."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, offline=True)
    elsewhere: list[str] = []

    def only_disk(route) -> None:
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    context.route("**/*", only_disk)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    yield page
    context.close()
    assert not elsewhere, f"the site asked the network for {elsewhere}"
    assert not errors, f"script errors on the page: {errors}"


def _scroll_to(page, anchor: str) -> None:
    """Scroll the element with id ``anchor`` to the top, below the fixed header, and let the header settle."""
    page.evaluate("(id) => { document.getElementById(id).scrollIntoView(); window.scrollBy(0, -64); }", anchor)
    page.wait_for_timeout(500)


def _screenshot(page, name: str) -> None:
    folder = os.environ.get("SARNMT_DOCS_SCREENSHOTS")
    if folder:
        page.screenshot(path=str(Path(folder) / name))


def test_models_page_shows_rendered_equations_from_disk(site, offline):
    page = offline
    page.goto((site / "models.html").as_uri())
    page.wait_for_load_state("load")
    text = page.evaluate(ARTICLE_TEXT)
    assert not RAW_TEX.findall(text), f"raw TeX on the models page: {sorted(set(RAW_TEX.findall(text)))[:20]}"

    expected = _equations(MODELS_MD.read_text(encoding="utf-8"))
    assert expected >= 60  # the page's equations, counted in its source
    assert page.locator("article math").count() == expected
    # Chromium lays the MathML out itself: a display equation is a "block math" box with a size
    blocks = page.locator("article .math-block math")
    assert page.evaluate("getComputedStyle(document.querySelector('.math-block math')).display") == "block math"
    sizes = blocks.evaluate_all("(ms) => ms.map((m) => m.getBoundingClientRect()).map((r) => [r.width, r.height])")
    assert sizes and all(w > 10 and h > 10 for w, h in sizes)
    fraction = page.locator("article mfrac").first.bounding_box()  # \frac: numerator over denominator
    assert fraction and fraction["height"] > 20
    tags = page.locator("article .math-tag").all_inner_texts()
    assert "(1)" in tags and "(A.1a)" in tags

    _scroll_to(page, "encoder")
    _screenshot(page, "docs-offline-models.png")


def test_api_pages_show_parameter_tables_and_no_sphinx_markup_from_disk(site, offline):
    page = offline
    api_pages = sorted((site / "api").glob("*.html"))
    assert len(api_pages) >= 5
    for html in api_pages:
        page.goto(html.as_uri())
        page.wait_for_load_state("load")
        raw = RAW_SPHINX.findall(page.evaluate(ARTICLE_TEXT))
        assert not raw, f"{html.name} shows raw Sphinx markup: {raw[:10]}"

    page.goto((site / "api" / "human.html").as_uri())
    spec = page.locator("div.doc-class", has=page.locator("[id='sarnmt.human.task.TaskSpec']")).first
    rows = spec.locator("table tr.doc-section-item td:first-child").all_inner_texts()
    assert [r.strip() for r in rows] == ["name", "systems", "sample", "seed"]  # four :param fields, one table
    create = page.locator("div.doc-function", has=page.locator("[id='sarnmt.human.task.create_task']")).first
    assert create.locator("a.autorefs-internal[href='#sarnmt.human.task.check_spec'] code").inner_text() == (
        "check_spec()"
    )  # :func:`check_spec` links to its entry
    _scroll_to(page, "sarnmt.human.task.TaskSpec")
    _screenshot(page, "docs-offline-api.png")


def test_links_and_search_work_from_disk(site, offline):
    page = offline
    page.goto((site / "index.html").as_uri())
    page.wait_for_load_state("load")
    page.locator("nav.md-nav--primary a[href='models.html']").first.click()
    page.wait_for_load_state("load")
    assert page.url.endswith("/models.html")
    assert page.locator("article h1").first.inner_text().startswith("The models")

    page.locator("input.md-search__input").click()
    page.keyboard.type("attention", delay=20)
    page.wait_for_selector(".md-search-result__item", timeout=20_000)
    meta = page.locator(".md-search-result__meta").inner_text()
    assert re.search(r"\d+ matching documents?", meta), meta

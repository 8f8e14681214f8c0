"""MkDocs hook: the pages' equations rendered to MathML when the site is built, so they show without a script.

The pages write LaTeX between ``$$`` (display, numbered with ``\\tag{}``) and ``\\( ... \\)`` (inline);
``pymdownx.arithmatex`` (generic mode) wraps each one in an element of class ``arithmatex``. This hook converts the
TeX in each of those elements with ``latex2mathml`` (the ``docs`` extra) and writes the MathML in its place: every
browser since 2023 (Chromium 109, Firefox, Safari) draws MathML itself, so the equations render from a file on disk or
a cluster's login node with no network, and the built site loads no script from elsewhere (it used MathJax from a
CDN). A ``\\tag{N}`` becomes the equation's number at the right (``docs/stylesheets/math.css``).

An equation that ``latex2mathml`` cannot convert, or whose MathML still holds a TeX command, fails the build with
the page and the TeX, rather than showing raw TeX.
"""

from __future__ import annotations

import html
import re
from typing import Any

from latex2mathml.converter import convert
from mkdocs.exceptions import PluginError

BLOCK = re.compile(r'<div class="arithmatex">\\\[(?P<tex>.*?)\\\]</div>', flags=re.S)
INLINE = re.compile(r'<span class="arithmatex">\\\((?P<tex>.*?)\\\)</span>', flags=re.S)
TAG = re.compile(r"\\tag\{(?P<number>[^}]*)\}")
LEFTOVER = re.compile(r"\\[A-Za-z]+")  # a TeX command in the MathML's text: not converted


def to_mathml(tex: str, display: str, where: str) -> str:
    """``tex`` as a ``<math>`` element; ``display`` is ``block`` or ``inline``; ``where`` names it in an error."""
    try:
        mathml = convert(tex, display=display)
    except Exception as err:  # latex2mathml raises many kinds, all meaning "this TeX is not supported"
        raise PluginError(f"{where}: cannot render the equation {tex.strip()!r} to MathML: {err}") from err
    text = re.sub(r"<[^>]+>", "", mathml)
    if leftover := LEFTOVER.findall(html.unescape(text)):
        raise PluginError(f"{where}: the equation {tex.strip()!r} keeps unrendered TeX {sorted(set(leftover))}")
    return mathml


def render(content: str, where: str) -> str:
    """The page's HTML with each arithmatex element's TeX replaced by MathML."""

    def block(match: re.Match[str]) -> str:
        tex = html.unescape(match["tex"])
        tag = TAG.search(tex)
        mathml = to_mathml(TAG.sub("", tex), "block", where)
        number = f'<span class="math-tag">({html.escape(tag["number"])})</span>' if tag else ""
        return f'<div class="arithmatex math-block">{mathml}{number}</div>'

    def inline(match: re.Match[str]) -> str:
        return f'<span class="arithmatex">{to_mathml(html.unescape(match["tex"]), "inline", where)}</span>'

    return INLINE.sub(inline, BLOCK.sub(block, content))


def on_page_content(html_content: str, page: Any, **kwargs: Any) -> str:
    """Render the page's equations (runs after Markdown, before the theme lays the page out)."""
    return render(html_content, page.file.src_uri)

"""Griffe extension: the project's Sphinx-style docstrings, made readable by mkdocstrings' Sphinx parser.

The docstrings are written in Sphinx style (``:param x:``, ``:returns:``, ``:raises E:``, and the cross-reference
roles ``:class:``, ``:meth:``, ``:func:``, ``:mod:``, ``:data:``, ``:attr:``). mkdocstrings-python parses the fields
with ``docstring_style: sphinx`` (``mkdocs.yml``), but its parser reads a field only where it starts a line, and
Markdown knows no roles. Before the docstrings are parsed, this extension (``extensions:`` in ``mkdocs.yml``):

- turns every role into inline code that links to the object's entry on the API pages when that object is rendered
  there (an optional autorefs cross-reference: a target that is not on any page, such as ``torch.Tensor`` or a
  private helper, stays plain code, and the strict build does not fail on it). ``~a.b.C`` shows ``C``; ``.name`` is
  looked up in the enclosing class, then the module, as Sphinx does;
- starts each field on a line of its own (``summary.  :param a: ...  :param b: ...`` becomes three lines), so that
  every ``:param`` lands in the parameter table instead of inside the previous parameter's description.

The source files are not changed: ``help()`` and editors keep reading the docstrings as written.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

ROLE = re.compile(r"(?<![\w`]):(?:py:)?(?P<role>mod|func|class|meth|data|attr|exc|obj|const|type):`(?P<target>[^`]+)`")
FIELD_NAMES = (
    "param|parameter|arg|argument|key|keyword|type|var|ivar|cvar|vartype|returns?|rtype|raises?|except|exception"
)
# a field that does not start its line: whitespace after text, then ":name ...:" (the name and its argument, no colon)
INLINE_FIELD = re.compile(rf"(?<=\S)[ \t]+(?=:(?:{FIELD_NAMES})(?:[ \t][^:\n]*)?:)")


def _resolve(obj: griffe.Object, target: str) -> str:
    """The full path of a role's target as seen from ``obj``, or the target itself when it cannot be resolved."""
    if target.startswith("."):  # Sphinx: the enclosing class's members, then the module's
        name = target[1:]
        scopes = [o for o in (obj if obj.is_class else obj.parent, obj.module) if o is not None]
        for scope in scopes:
            head = name.split(".", 1)[0]
            if head in scope.members:
                return f"{scope.path}.{name}"
        return name
    head, _, rest = target.partition(".")
    try:
        path = obj.resolve(head)
    except (griffe.NameResolutionError, KeyError, AttributeError, griffe.AliasResolutionError):
        return target
    return f"{path}.{rest}" if rest else path


def rewrite_roles(text: str, obj: griffe.Object) -> str:
    """Each ``:role:`target``` in ``text`` as code that links to the target's API entry where there is one."""

    def replace(match: re.Match[str]) -> str:
        target = match["target"].strip()
        explicit = re.fullmatch(r"(?P<title>.+?)\s*<(?P<target>[^>]+)>", target)  # :class:`title <path>`
        if explicit:
            shown, target = explicit["title"], explicit["target"]
        else:
            short = target.startswith("~")
            target = target.lstrip("~")
            shown = target.rsplit(".", 1)[-1] if short else target.lstrip(".")
        if match["role"] in ("func", "meth") and not shown.endswith(")"):
            shown += "()"
        identifier = html.escape(_resolve(obj, target.removesuffix("()")), quote=True)
        return f'<autoref identifier="{identifier}" optional><code>{html.escape(shown)}</code></autoref>'

    return ROLE.sub(replace, text)


def split_fields(text: str) -> str:
    """Every Sphinx field (``:param x:``, ``:returns:``, ...) on a line of its own."""
    return INLINE_FIELD.sub("\n", text)


class SphinxDocstrings(griffe.Extension):
    """Rewrite each object's docstring (roles, then fields) once the package is loaded, before it is parsed."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.is_alias or obj.docstring is None:
            return
        docstring = obj.docstring
        docstring.value = split_fields(rewrite_roles(docstring.value, obj))
        docstring.__dict__.pop("parsed", None)  # a cached parse of the text as written

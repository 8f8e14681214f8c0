"""WMT SGML test sets (``newstest2013-src.es.sgm``): documents of ``<seg id=...>sentence</seg>`` lines.

The text of each ``<seg>`` is taken as it is (as sacrebleu does), surrounding whitespace stripped. A source and a
reference file must hold the same documents with the same number of segments each; :func:`read_sgml_parallel`
checks it document by document.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from sarnmt.data.text.reading import read_lines, read_parallel
from sarnmt.errors import InputError

_DOC = re.compile(r"<doc\s[^>]*?docid=\"([^\"]*)\"", re.IGNORECASE)
_SEG = re.compile(r"<seg[^>]*>(.*)</seg>", re.IGNORECASE)


def read_sgml(path: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """``[(docid, sentence), ...]`` in file order.

    :raises InputError: naming file and line on a ``<seg`` line that does not close, or as :func:`read_lines`.
    """
    out, doc = [], ""
    for number, line in enumerate(read_lines(path), 1):
        stripped = line.strip()
        if m := _DOC.search(stripped):
            doc = m.group(1)
        if stripped.lower().startswith("<seg"):
            m = _SEG.search(stripped)
            if m is None:
                raise InputError(f"{path}:{number}: malformed <seg> line: {stripped[:80]!r}")
            out.append((doc, m.group(1).strip()))
    return out


def read_sgml_parallel(
    src_path: str | os.PathLike[str], tgt_path: str | os.PathLike[str]
) -> tuple[list[str], list[str]]:
    """Both sides of an SGML test set, checked to have the same documents and segment counts.

    :raises InputError: naming both files, the document and both counts on a mismatch.
    """
    src, tgt = read_sgml(src_path), read_sgml(tgt_path)
    docs_src, docs_tgt = _counts(src), _counts(tgt)
    for doc in dict.fromkeys([*docs_src, *docs_tgt]):
        a, b = docs_src.get(doc, 0), docs_tgt.get(doc, 0)
        if a != b:
            raise InputError(
                f"SGML files misaligned in document {doc!r}: {src_path} has {a} segments, {tgt_path} has {b}"
            )
    if len(src) != len(tgt):
        raise InputError(f"SGML files misaligned: {src_path} has {len(src)} segments, {tgt_path} has {len(tgt)}")
    return [s for _, s in src], [t for _, t in tgt]


def _counts(segs: list[tuple[str, str]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for doc, _ in segs:
        counts[doc] = counts.get(doc, 0) + 1
    return counts


def read_pair(src_path: str | os.PathLike[str], tgt_path: str | os.PathLike[str]) -> tuple[list[str], list[str]]:
    """A parallel pair of files: SGML when both end in ``.sgm``, else plain text or ``.gz`` (line-aligned)."""
    if Path(src_path).suffix == ".sgm" and Path(tgt_path).suffix == ".sgm":
        return read_sgml_parallel(src_path, tgt_path)
    return read_parallel(src_path, tgt_path)

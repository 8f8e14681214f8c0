"""The attention file of ``sarnmt translate attention=PATH`` (its format: :mod:`sarnmt.cli.translate`), the one
module that writes and reads it: :func:`attention_record` makes a line of it from a translation (``translate``, the
analysis's decoded runs); :func:`read_attention` reads a file into :class:`AttentionRecord` objects with their shapes
checked (the analysis, :mod:`sarnmt.analysis.runs`); :func:`write_attention` writes such records back in the same
format. A file that is not one is refused by :class:`AttentionFileError`, naming the file and line.

Index conventions of a record with n target rows (``target`` = the output pieces, plus ``</s>`` when the hypothesis
ended with EOS):

- ``src_attention``, shape (n, S): row r is the source attention while predicting ``target[r]``; column j is
  ``source[j]`` (the source pieces and the EOS the encoder reads).
- ``tgt_attention``, shape (n, n): row r is the decoder variant's attention over its history items ``0..r`` while
  predicting ``target[r]``; item 0 is the zero slot before the first word (the residual decoders' ȳ_0 = 0, the
  Memory RNN's and self-attentive RNN's s_0), item j >= 1 belongs to ``target[j - 1]`` (its embedding, or the
  decoder state s_j at that word). Entries above the diagonal are 0. None when the decoder has none.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sarnmt.data.text.codecs import EOS_TOKEN
from sarnmt.decoding.stream import Translation
from sarnmt.errors import InputError
from sarnmt.utils.json_bounds import JsonError, loads


class AttentionFileError(InputError):
    """An attention file that is not one ``translate`` wrote: the message names the file (or record) and the line."""


KEYS = ("line", "source", "target", "target_ids", "src_attention", "tgt_attention")


@dataclass(frozen=True)
class AttentionRecord:
    """One translated line.  :param line: 0-based index of the input line.  :param source: source pieces + EOS.
    :param target: output pieces (+ EOS when it ended).  :param target_ids: the output ids without EOS.
    :param src_attention: shape (n, S) or None.  :param tgt_attention: shape (n, n) or None.
    :param score: summed log-probability.  :param normalized_score: what the search ranked by."""

    line: int
    source: tuple[str, ...]
    target: tuple[str, ...]
    target_ids: tuple[int, ...]
    src_attention: np.ndarray | None
    tgt_attention: np.ndarray | None
    score: float = 0.0
    normalized_score: float = 0.0

    @property
    def words(self) -> list[str]:
        """The translation's pieces, without the final EOS."""
        return list(self.target[: len(self.target_ids)])

    @property
    def rows(self) -> int:
        """n, the number of predictions (words, plus the EOS prediction when the hypothesis ended)."""
        return len(self.target)

    def as_json(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "source": list(self.source),
            "target": list(self.target),
            "target_ids": list(self.target_ids),
            "score": self.score,
            "normalized_score": self.normalized_score,
            "src_attention": None if self.src_attention is None else self.src_attention.tolist(),
            "tgt_attention": None if self.tgt_attention is None else self.tgt_attention.tolist(),
        }


def target_pieces(codec, ids: list[int]) -> list[str]:
    """Labels of output ids in the form of the source side's pieces: the codec's ``tokens`` of the translation (for
    a Moses pipeline the truecased ``@@`` pieces, not each piece postprocessed alone, which capitalises it), or,
    when encoding the translation again does not give the same ids back, each id's tokenised form alone."""
    if ids:
        text = codec.decode(ids)
        if codec.encode(text) == list(ids):
            return codec.tokens(text)
    return [codec.decode_tokenized([i]) for i in ids]


def attention_record(index: int, source_pieces: list[str], result: Translation, tgt_codec) -> dict[str, Any]:
    """One line of the attention file (format in :mod:`sarnmt.cli.translate`), as JSON: the translation ``result``
    of input line ``index`` (0-based), whose source pieces are ``source_pieces``."""
    matrix = result.src_attention if result.src_attention is not None else result.tgt_attention
    n = 0 if matrix is None else matrix.size(0)
    target = target_pieces(tgt_codec, result.tokens) + [EOS_TOKEN] * (n - len(result.tokens))
    return {
        "line": index,
        "source": source_pieces + [EOS_TOKEN] if n else [],
        "target": target if n else [],
        "target_ids": result.tokens,
        "score": result.score,
        "normalized_score": result.normalized_score,
        "src_attention": None if result.src_attention is None else result.src_attention.tolist(),
        "tgt_attention": None if result.tgt_attention is None else result.tgt_attention.tolist(),
    }


def _matrix(obj: dict[str, Any], key: str, rows: int, cols: int, where: str) -> np.ndarray | None:
    value = obj[key]
    if value is None:
        return None
    try:
        matrix = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise AttentionFileError(f"{where}: {key!r} is not a matrix of numbers ({err})") from err
    if rows == 0 and matrix.size == 0:
        return matrix.reshape(0, cols)
    if matrix.shape != (rows, cols):
        raise AttentionFileError(
            f"{where}: {key!r} has shape {matrix.shape}, the record's tokens need ({rows}, {cols})"
        )
    return matrix


def record_from_json(obj: Any, where: str) -> AttentionRecord:
    """One record, its keys and shapes checked.  :param where: ``"FILE line K"`` for the messages."""
    if not isinstance(obj, dict):
        raise AttentionFileError(f"{where}: not a JSON object")
    missing = [key for key in KEYS if key not in obj]
    if missing:
        raise AttentionFileError(f"{where}: no {missing[0]!r} key (not an attention file of sarnmt.translate)")
    source, target, ids = obj["source"], obj["target"], obj["target_ids"]
    if not all(isinstance(x, list) for x in (source, target, ids)):
        raise AttentionFileError(f"{where}: 'source', 'target' and 'target_ids' must be lists")
    n = len(target)
    if n and n not in (len(ids), len(ids) + 1) or n == len(ids) + 1 and target[-1] != EOS_TOKEN:
        raise AttentionFileError(f"{where}: 'target' has {n} tokens for {len(ids)} 'target_ids'")
    return AttentionRecord(
        line=int(obj["line"]),
        source=tuple(source),
        target=tuple(target),
        target_ids=tuple(int(i) for i in ids),
        src_attention=_matrix(obj, "src_attention", n, len(source), where),
        tgt_attention=_matrix(obj, "tgt_attention", n, n, where),
        score=float(obj.get("score", 0.0)),
        normalized_score=float(obj.get("normalized_score", 0.0)),
    )


def read_attention(path: str | Path) -> list[AttentionRecord]:
    """Every record of an attention file, in order.

    :raises AttentionFileError: naming the file and line: a missing file, a line that is not JSON, a missing key, a
        matrix whose shape does not fit the tokens, records out of order.
    """
    path = Path(path)
    if not path.is_file():
        raise AttentionFileError(f"attention file {path} does not exist")
    records = []
    with open(path, encoding="utf-8") as handle:
        for number, text in enumerate(handle, start=1):
            where = f"attention file {path} line {number}"
            try:  # bounded: an attention file may come from elsewhere (sarnmt.utils.json_bounds)
                obj = loads(text, where)
            except JsonError as err:
                raise AttentionFileError(str(err)) from err
            record = record_from_json(obj, where)
            if record.line != number - 1:
                raise AttentionFileError(
                    f"{where}: its 'line' is {record.line}, expected {number - 1} (records in order)"
                )
            records.append(record)
    return records


def write_attention(path: str | Path, records: Iterable[AttentionRecord]) -> None:
    """Write records in ``translate``'s format (one JSON object per line)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        for record in records:
            handle.write(json.dumps(record.as_json(), ensure_ascii=False) + "\n")

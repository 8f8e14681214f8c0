"""Scoring system outputs with sacrebleu (stack notes §6); the files are read by :mod:`sarnmt.data.text.reading`.

- ``tokenize="none"`` on text that is already tokenised (Moses, word-segmented Chinese) equals ``multi-bleu.perl``
  (``lowercase=True`` equals its ``-lc``): the paper's Tables 1, 2 and 4.
- ``tokenize="13a"`` on detokenised text against the raw reference is NIST ``mteval-v13a`` BLEU (Table 3).
- Every score is reported with its sacrebleu signature.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF

from sarnmt.errors import InputError, check_one_of

TOKENIZERS = ("none", "13a", "intl", "zh", "char")


def check_tokenize(tokenize: object) -> None:
    """Refuse a ``tokenize=`` value that is not one of :data:`TOKENIZERS`: the one check, where the setting enters
    (``score``, ``analyze table7``), before any file is read; BLEU trusts it.

    :raises InputError: ``tokenize=<value> is not a choice: use one of ...``, one line."""
    check_one_of("tokenize", tokenize, TOKENIZERS)


def check_parallel(hyps: Sequence[str], refs: Sequence[str], hyp_name: str, ref_name: str) -> None:
    """:raises InputError: naming both files and their line counts when they differ."""
    if len(hyps) != len(refs):
        raise InputError(
            f"line counts differ: hypotheses {hyp_name} have {len(hyps)} lines, reference {ref_name} has "
            f"{len(refs)}; give line-aligned files (one hypothesis per reference line, empty lines included)"
        )


def bleu_metric(refs: Sequence[str], tokenize: str = "13a", lowercase: bool = False) -> BLEU:
    """A corpus BLEU metric with the references cached (what :class:`sacrebleu.significance.PairedTest` wants).

    :param tokenize: one of :data:`TOKENIZERS`, trusted (a command's ``tokenize=`` is checked where it
        enters: :func:`check_tokenize`).
    """
    assert tokenize in TOKENIZERS, f"tokenize={tokenize!r} reached BLEU unchecked"
    return BLEU(tokenize=tokenize, lowercase=lowercase, force=True, references=[list(refs)])


@dataclass
class Score:
    """:param score: the corpus score (0-100).  :param signature: sacrebleu's signature.  :param text: the long
    form (n-gram precisions, brevity penalty, lengths)."""

    score: float
    signature: str
    text: str

    def as_dict(self) -> dict[str, float | str]:
        return {"score": round(self.score, 4), "signature": self.signature, "detail": self.text}


def corpus_bleu(hyps: Sequence[str], refs: Sequence[str], tokenize: str = "13a", lowercase: bool = False) -> Score:
    """Corpus BLEU of ``hyps`` against one reference per line."""
    check_parallel(hyps, refs, "(hypotheses)", "(references)")
    metric = bleu_metric(refs, tokenize, lowercase)
    result = metric.corpus_score(list(hyps), None)
    return Score(result.score, str(metric.get_signature()), str(result))


def corpus_chrf(hyps: Sequence[str], refs: Sequence[str]) -> Score:
    """Corpus chrF (sacrebleu defaults: character 6-grams, beta 2)."""
    check_parallel(hyps, refs, "(hypotheses)", "(references)")
    metric = CHRF()
    result = metric.corpus_score(list(hyps), [list(refs)])
    return Score(result.score, str(metric.get_signature()), str(result))

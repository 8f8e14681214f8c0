"""The vocabulary and the token-id streams of a word-level language-model corpus (:mod:`sarnmt.lm.corpus`
reads the corpus folders and caches what this module builds).

**Vocabulary**, built from the training split only: ``<eos>`` = 0 and ``<unk>`` = 1 (the ids of
:mod:`sarnmt.data.text.codecs`, where 0 is EOS everywhere in the project), then the training words by decreasing
frequency, ties by first appearance (deterministic). ``max_size`` caps the whole vocabulary, the two specials
included; ``min_count`` drops words seen fewer times in train; ``None`` keeps all. A literal ``<unk>`` in the text
(PTB, WikiText) is ``<unk>``; a literal ``<eos>`` is ``<eos>``. Words outside the vocabulary become ``<unk>`` in every
split and are counted (``unk_oov``) apart from the literal ones (``unk_literal``).

**Streams.** A split is one int32 array of shape (N,): the words of its non-empty lines in file order, each line
followed by ``<eos>``; N is the split's ``tokens`` (every one of them is a target once in evaluation,
:mod:`sarnmt.lm.datamodule`). Per split the report gives ``lines``, ``empty_lines``, ``words``, ``tokens``
(words + one ``<eos>`` per non-empty line), ``unk_oov``, ``oov_rate`` (= unk_oov / tokens), ``unk_literal`` and
``eos_literal``.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from sarnmt.data.text.codecs import EOS, UNK
from sarnmt.errors import InputError

EOS_WORD, UNK_WORD = "<eos>", "<unk>"
SPECIALS = (EOS_WORD, UNK_WORD)  # ids EOS = 0 and UNK = 1, in this order
assert (EOS, UNK) == (0, 1), "the vocabulary puts <eos> at 0 and <unk> at 1"


class LMCorpusError(InputError):
    """A language-model corpus that cannot be used as given (a missing or empty split, bad settings)."""


def word_counts(lines: Iterable[str]) -> Counter[str]:
    """How often each word occurs; the keys are in order of first appearance."""
    counts: Counter[str] = Counter()
    for line in lines:
        counts.update(line.split())
    return counts


# --- vocabulary -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class VocabSettings:
    """``max_size``: the largest vocabulary, ``<eos>`` and ``<unk>`` included; ``min_count``: words seen fewer times
    in train are left out. ``None``: no limit.

    Both are trusted: the language model's ``data.vocab_max_size`` (at least ``len(SPECIALS)``: it counts ``<eos>``
    and ``<unk>``) and ``data.vocab_min_count`` (1 or more) are checked where they enter, by
    :class:`~sarnmt.lm.datamodule.LanguageModelDataModule`."""

    max_size: int | None = None
    min_count: int | None = None

    def __post_init__(self) -> None:
        assert self.max_size is None or self.max_size >= len(SPECIALS), (
            "vocab_max_size reached the vocabulary unchecked"
        )
        assert self.min_count is None or self.min_count >= 1, "vocab_min_count reached the vocabulary unchecked"


def build_vocab(counts: Counter[str], settings: VocabSettings) -> tuple[list[str], dict[str, int]]:
    """The words in id order (``<eos>``, ``<unk>``, then by decreasing count, ties by first appearance) and what
    the cut left out: ``{"size", "train_types", "dropped_types", "dropped_tokens"}`` (types and tokens of train,
    the specials not counted)."""
    ranked = sorted((wc for wc in counts.items() if wc[0] not in SPECIALS), key=lambda wc: -wc[1])  # stable
    if settings.min_count is not None:
        ranked_kept = [wc for wc in ranked if wc[1] >= settings.min_count]
    else:
        ranked_kept = ranked
    if settings.max_size is not None:
        ranked_kept = ranked_kept[: settings.max_size - len(SPECIALS)]
    words = [*SPECIALS, *(w for w, _ in ranked_kept)]
    stats = {
        "size": len(words),
        "train_types": len(ranked),
        "dropped_types": len(ranked) - len(ranked_kept),
        "dropped_tokens": sum(c for _, c in ranked) - sum(c for _, c in ranked_kept),
    }
    return words, stats


# --- encoding -------------------------------------------------------------------------------------------------------
def encode_lines(lines: Sequence[str], index: dict[str, int]) -> tuple[np.ndarray, dict[str, int]]:
    """The stream of a split, int32 of shape (N,), and its counts (see the module docstring)."""
    ids, empty, oov_id = array("i"), 0, -1
    get = index.get
    for line in lines:
        words = line.split()
        if not words:
            empty += 1
            continue
        ids.extend([get(w, oov_id) for w in words])
        ids.append(EOS)
    stream = np.frombuffer(ids, dtype=np.int32).copy() if ids else np.zeros(0, dtype=np.int32)
    oov = stream == oov_id
    stream[oov] = UNK
    sentences = len(lines) - empty
    counts = {
        "lines": len(lines),
        "empty_lines": empty,
        "words": len(stream) - sentences,
        "tokens": len(stream),
        "unk_oov": int(oov.sum()),
        "unk_literal": int((stream == UNK).sum() - oov.sum()),
        "eos_literal": int((stream == EOS).sum() - sentences),
    }
    counts["oov_rate"] = round(counts["unk_oov"] / max(1, counts["tokens"]), 6)
    return stream, counts

"""Subword BPE over pre-tokenised text, in the subword-nmt ``@@`` style, learned with HuggingFace ``tokenizers``.

The model is ``models.BPE`` with the end-of-word suffix ``</w>`` over a ``WhitespaceSplit`` pre-tokenizer (the
input is already Moses-tokenised). A piece that ends a word is ``piece</w>`` inside the model and ``piece`` in
the ``@@`` form; any other piece ``piece@@``. So ``justification`` -> ``justific@@ ation`` and
``re.sub(r"@@( |$)", "", s)`` (subword-nmt's sed) undoes it. Ids 0 and 1 are ``</s>`` and ``<unk>``
(:mod:`sarnmt.data.text.codecs`); a character never seen in training becomes ``<unk>``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from sarnmt.data.text.codecs import SPECIAL_TOKENS, TokenizerIds, train_bpe

SUFFIX = "</w>"
_SPECIAL = set(SPECIAL_TOKENS)
_MERGE = re.compile(r"@@( |$)")


def merge_bpe(text: str) -> str:
    """Undo the ``@@`` segmentation of a line (subword-nmt's ``sed -r 's/(@@ )|(@@ ?$)//g'``)."""
    return _MERGE.sub("", text)


class SubwordBPE(TokenizerIds):
    """``@@``-style BPE: text of space-separated tokens <-> subword ids (:meth:`encode` takes tokenised lines).

    :param tokenizer: a trained tokenizer built by :meth:`new_tokenizer`, ids 0/1 being ``</s>``/``<unk>``.
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        super().__init__(tokenizer)
        self._id_to_piece = [tokenizer.id_to_token(i) for i in range(self.vocab_size)]

    @staticmethod
    def new_tokenizer() -> Tokenizer:
        tokenizer = Tokenizer(models.BPE(unk_token=SPECIAL_TOKENS[1], end_of_word_suffix=SUFFIX))
        tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        tokenizer.decoder = decoders.BPEDecoder(suffix=SUFFIX)
        return tokenizer

    @classmethod
    def train(cls, tokenized_lines: Iterable[str], vocab_size: int) -> SubwordBPE:
        """Learn merges on tokenised lines (for a joint model, both sides' lines).

        :param vocab_size: target size, the two special tokens and every character included (can end smaller
            when the text has fewer merges to learn).
        """
        return cls(train_bpe(cls.new_tokenizer(), tokenized_lines, vocab_size, "SubwordBPE.train", SUFFIX))

    def pieces(self, tokenized_line: str) -> list[str]:
        """The ``@@``-form pieces of a line, one per id of :meth:`encode`."""
        return [self._at_form(p) for p in self.tokenizer.encode(tokenized_line, add_special_tokens=False).tokens]

    @staticmethod
    def _at_form(piece: str) -> str:
        if piece in _SPECIAL:
            return piece
        return piece[: -len(SUFFIX)] if piece.endswith(SUFFIX) else piece + "@@"

    def merge(self, ids: Sequence[int]) -> str:
        """Tokenised text of ``ids`` (pieces joined into words). ``</s>``/``<unk>`` stand as words of their own.

        :raises ValueError: on an id outside the vocabulary.
        """
        words, current = [], ""
        size = len(self._id_to_piece)
        for i in ids:
            i = int(i)
            if not 0 <= i < size:
                raise ValueError(f"SubwordBPE: id {i} is outside the vocabulary (size {size})")
            piece = self._id_to_piece[i]
            if piece in _SPECIAL:
                if current:
                    words.append(current)
                words.append(piece)
                current = ""
            elif piece.endswith(SUFFIX):
                words.append(current + piece[: -len(SUFFIX)])
                current = ""
            else:
                current += piece
        if current:
            words.append(current)
        return " ".join(words)

    def to_str(self) -> str:
        return self.tokenizer.to_str()

    @classmethod
    def from_str(cls, text: str) -> SubwordBPE:
        return cls(Tokenizer.from_str(text))

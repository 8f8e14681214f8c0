"""BPE, learned with HuggingFace ``tokenizers``, in two front ends that differ in the text they take and give back.

- :class:`RawTextBPECodec` takes **raw text** and is a whole codec (a :class:`~sarnmt.data.text.codecs.TextCodec`):
  ``models.BPE`` over a ``Metaspace`` pre-tokenizer, spaces becoming the ``▁`` marker, so decoding gives the raw text
  back. The parallel-files DataModule uses it (no other preprocessing). Its state's ``"type"`` is ``"bpe"``.
- :class:`TokenizedTextBPE` takes **Moses-tokenised text** and is one step of the paper's pipeline
  (:class:`~sarnmt.data.text.pipeline.PipelineCodec` wraps it; it is no codec by itself): subword-nmt's ``@@`` style,
  ``models.BPE`` with the end-of-word suffix ``</w>`` over a ``WhitespaceSplit`` pre-tokenizer. A piece that ends a
  word is ``piece</w>`` inside the model and ``piece`` in the ``@@`` form; any other piece ``piece@@``. So
  ``justification`` -> ``justific@@ ation``, and ``re.sub(r"@@( |$)", "", s)`` (subword-nmt's sed, :func:`merge_bpe`)
  undoes it. Its output is the tokenised text tokenised BLEU is computed on, which the Metaspace form cannot give.

Both are trained by :func:`train_bpe` and share their ids (:class:`TokenizerIds`): 0 and 1 are ``</s>`` and ``<unk>``
(:mod:`sarnmt.data.text.codecs`); a character never seen in training becomes ``<unk>``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from sarnmt.data.text.codecs import EOS, EOS_TOKEN, SPECIAL_TOKENS, UNK, UNK_TOKEN, TextCodec

SUFFIX = "</w>"
_SPECIAL = set(SPECIAL_TOKENS)
_MERGE = re.compile(r"@@( |$)")


def train_bpe(
    tokenizer: Tokenizer, lines: Iterable[str], vocab_size: int, owner: str, end_of_word_suffix: str | None = None
) -> Tokenizer:
    """Learn BPE merges into ``tokenizer`` with ``</s>`` = 0 and ``<unk>`` = 1 (both front ends' convention).

    :param owner: named where a vocabulary too small to hold the special tokens is refused (an assertion:
        ``data.vocab_size`` is checked where it enters, :func:`~sarnmt.data.loading.translation.check_vocab_size`).
    """
    assert vocab_size > len(SPECIAL_TOKENS), (owner, vocab_size)  # data.vocab_size, checked where it enters
    options = {} if end_of_word_suffix is None else {"end_of_word_suffix": end_of_word_suffix}
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False, **options)
    tokenizer.train_from_iterator(lines, trainer=trainer)
    assert tokenizer.token_to_id(EOS_TOKEN) == EOS and tokenizer.token_to_id(UNK_TOKEN) == UNK
    return tokenizer


class TokenizerIds:
    """Ids from a HuggingFace ``tokenizers.Tokenizer`` whose ids 0 and 1 are ``</s>`` and ``<unk>``: what
    :class:`RawTextBPECodec` and :class:`TokenizedTextBPE` share.

    :raises ValueError: if the tokenizer puts a special token elsewhere.
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        for want_id, token in enumerate(SPECIAL_TOKENS):
            got = tokenizer.token_to_id(token)
            if got != want_id:
                raise ValueError(f"{type(self).__name__}: {token!r} must have id {want_id}, the tokenizer gives {got}")
        self.tokenizer = tokenizer

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def encode(self, line: str) -> list[int]:
        return self.tokenizer.encode(line, add_special_tokens=False).ids

    def encode_batch(self, lines: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(list(lines), add_special_tokens=False)]


class RawTextBPECodec(TokenizerIds, TextCodec):
    """BPE over raw text, a whole codec (``models.BPE`` + ``Metaspace``).

    Spaces become the ``▁`` marker, so decoding gives the raw text back exactly for text made of characters
    seen in training, with two exceptions inherent to the Metaspace scheme: whitespace at the very start of a
    line is not restored, and a literal ``▁`` in the input comes back as a space. Unseen characters become
    ``<unk>`` (and decode as the string ``<unk>``).

    :param tokenizer: a trained tokenizer whose ids 0 and 1 are ``</s>`` and ``<unk>``.
    """

    kind = "bpe"  # the "type" of its state, as checkpoints store it

    @staticmethod
    def new_tokenizer() -> Tokenizer:
        """An untrained tokenizer with the model, pre-tokenizer and decoder this codec uses."""
        tokenizer = Tokenizer(models.BPE(unk_token=UNK_TOKEN))
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
        tokenizer.decoder = decoders.Metaspace()
        return tokenizer

    @classmethod
    def train(cls, lines: Iterable[str], vocab_size: int) -> RawTextBPECodec:
        """Learn BPE merges on raw training lines (for a joint codec, pass the lines of both sides).

        :param vocab_size: the target vocabulary size, special tokens included. The result can be smaller
            (when the text has fewer merges to learn) or larger (every character seen is kept).
        """
        return cls(train_bpe(cls.new_tokenizer(), lines, vocab_size, "RawTextBPECodec.train"))

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> RawTextBPECodec:
        """Rebuild from :meth:`to_state`."""
        return cls(Tokenizer.from_str(state["tokenizer"]))

    def decode(self, ids: Sequence[int]) -> str:
        ids = [int(i) for i in ids]
        size = self.vocab_size
        bad = [i for i in ids if not 0 <= i < size]
        if bad:
            raise ValueError(f"RawTextBPECodec.decode: id {bad[0]} is outside the vocabulary (size {size})")
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def tokens(self, line: str) -> list[str]:
        return self.tokenizer.encode(line, add_special_tokens=False).tokens

    def to_state(self) -> dict[str, Any]:
        return {"type": self.kind, "tokenizer": self.tokenizer.to_str()}


def merge_bpe(text: str) -> str:
    """Undo the ``@@`` segmentation of a line (subword-nmt's ``sed -r 's/(@@ )|(@@ ?$)//g'``)."""
    return _MERGE.sub("", text)


class TokenizedTextBPE(TokenizerIds):
    """``@@``-style BPE over tokenised text: space-separated tokens <-> subword ids (:meth:`encode` takes tokenised
    lines, :meth:`merge` gives tokenised text back). One step of the pipeline, not a codec.

    :param tokenizer: a trained tokenizer built by :meth:`new_tokenizer`, ids 0/1 being ``</s>``/``<unk>``.
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        super().__init__(tokenizer)
        self._id_to_piece = [tokenizer.id_to_token(i) for i in range(self.vocab_size)]

    @staticmethod
    def new_tokenizer() -> Tokenizer:
        tokenizer = Tokenizer(models.BPE(unk_token=UNK_TOKEN, end_of_word_suffix=SUFFIX))
        tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        tokenizer.decoder = decoders.BPEDecoder(suffix=SUFFIX)
        return tokenizer

    @classmethod
    def train(cls, tokenized_lines: Iterable[str], vocab_size: int) -> TokenizedTextBPE:
        """Learn merges on tokenised lines (for a joint model, both sides' lines).

        :param vocab_size: target size, the two special tokens and every character included (can end smaller
            when the text has fewer merges to learn).
        """
        return cls(train_bpe(cls.new_tokenizer(), tokenized_lines, vocab_size, "TokenizedTextBPE.train", SUFFIX))

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
                raise ValueError(f"TokenizedTextBPE: id {i} is outside the vocabulary (size {size})")
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
    def from_str(cls, text: str) -> TokenizedTextBPE:
        return cls(Tokenizer.from_str(text))

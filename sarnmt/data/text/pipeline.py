"""The paper's preprocessing as one object per language pair, with its inverse for output.

Per side (:class:`~sarnmt.data.text.processor.SideSettings`, :class:`~sarnmt.data.text.processor.LanguageProcessor`,
over many lines in parallel with :func:`~sarnmt.data.text.processor.map_lines`), in order:

1. Moses punctuation normalisation (``MosesPunctNormalizer``, as ``normalize-punctuation.perl -l LANG``),
2. Moses tokenisation with XML escaping (``&apos;``, ``&quot;``, ...) and, for Es-En/En-De, aggressive hyphen
   splitting (``re-election`` -> ``re @-@ election``); Chinese is segmented into words with jieba instead;
3. case: ``truecase`` (a :class:`~sarnmt.data.text.truecase.Truecaser` learned on the training side), ``lowercase``
   (the paper's En-Zh English side) or ``keep``;
4. BPE, ``@@`` style (:class:`~sarnmt.data.text.subword.TokenizedTextBPE`), one model per side or one joint model.

Steps 1-3 give the *tokenised* form (:meth:`PipelineCodec.tokenize`), the form of the paper's released test files and
the one tokenised BLEU is computed on. The inverse (:meth:`PipelineCodec.decode`) merges BPE, detruecases
(``detruecase.perl``) and detokenises (``detokenizer.perl``, which also unescapes) to plain text.

:class:`PipelineCodec` is a :class:`~sarnmt.data.text.codecs.TextCodec`, so a DataModule built on it works with the
training and evaluation code unchanged; its state (settings, truecaser, BPE) is JSON-able.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from sarnmt.data.text.codecs import TextCodec
from sarnmt.data.text.processor import LanguageProcessor, SideSettings, map_lines
from sarnmt.data.text.subword import TokenizedTextBPE
from sarnmt.data.text.truecase import Truecaser
from sarnmt.utils.json_bounds import load_file


class PipelineCodec(TextCodec):
    """One side's full pipeline as a :class:`TextCodec`: raw text -> BPE ids, and ids -> plain text.

    :param processor: the side's :class:`LanguageProcessor` (with its truecaser when truecasing).
    :param bpe: the side's BPE model (the same object for both sides when joint).
    """

    kind = "pipeline"

    def __init__(self, processor: LanguageProcessor, bpe: TokenizedTextBPE) -> None:
        self.processor, self.bpe = processor, bpe

    @property
    def vocab_size(self) -> int:
        return self.bpe.vocab_size

    def tokenize(self, line: str) -> str:
        """Raw line -> Moses-tokenised (truecased / lowercased) line, the paper's released form."""
        return self.processor.tokenize(line)

    def detokenize(self, tokenized_line: str) -> str:
        """Tokenised line -> plain text (detruecased, detokenised)."""
        return self.processor.detokenize(tokenized_line)

    def encode(self, line: str) -> list[int]:
        return self.bpe.encode(self.tokenize(line))

    def encode_batch(self, lines: Sequence[str]) -> list[list[int]]:
        return self.bpe.encode_batch([self.tokenize(line) for line in lines])

    def encode_tokenized(self, tokenized_lines: Sequence[str]) -> list[list[int]]:
        """Ids of lines already in the tokenised form (skips steps 1-3)."""
        return self.bpe.encode_batch(tokenized_lines)

    def decode_tokenized(self, ids: Sequence[int]) -> str:
        """Tokenised text of ids (BPE merged, still tokenised and truecased), for tokenised BLEU."""
        return self.bpe.merge(ids)

    def decode(self, ids: Sequence[int]) -> str:
        return self.detokenize(self.decode_tokenized(ids))

    def tokens(self, line: str) -> list[str]:
        return self.bpe.pieces(self.tokenize(line))

    def to_state(self) -> dict[str, Any]:
        truecaser = self.processor.truecaser
        return {
            "type": self.kind,
            "side": asdict(self.processor.settings),
            "truecaser": truecaser.to_state() if truecaser is not None else None,
            "bpe": self.bpe.to_str(),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any], bpe: TokenizedTextBPE | None = None) -> PipelineCodec:
        """Rebuild from :meth:`to_state`; pass ``bpe`` to share one (joint) BPE object."""
        truecaser = Truecaser.from_state(state["truecaser"]) if state["truecaser"] is not None else None
        processor = LanguageProcessor(SideSettings(**state["side"]), truecaser)
        return cls(processor, bpe if bpe is not None else TokenizedTextBPE.from_str(state["bpe"]))

    def __repr__(self) -> str:
        return f"PipelineCodec({self.processor.settings.lang}, vocab_size={self.vocab_size})"


class Pipeline:
    """The preprocessing of a language pair: learn on raw training text, then a :class:`PipelineCodec` per side.

    :param src: source side settings; ``tgt``: target side settings.
    :param vocab_size: BPE vocabulary per side (or shared when ``joint_vocab``), special tokens included.
    :param joint_vocab: one BPE model learned on both sides' training text.
    """

    def __init__(self, src: SideSettings, tgt: SideSettings, vocab_size: int, joint_vocab: bool) -> None:
        self.settings = {"src": src, "tgt": tgt}
        self.vocab_size, self.joint_vocab = vocab_size, joint_vocab
        self.codecs: dict[str, PipelineCodec] = {}

    def fit(self, src_lines: Sequence[str], tgt_lines: Sequence[str], workers: int = 1) -> dict[str, list[str]]:
        """Learn truecasers and BPE from raw training lines. :returns: ``{"src": tokenised lines, "tgt": ...}``."""
        tokenized, processors = {}, {}
        for side, lines in (("src", src_lines), ("tgt", tgt_lines)):
            settings = self.settings[side]
            processor = LanguageProcessor(settings)
            pre = map_lines(processor, "pretokenize", lines, workers, desc=f"tokenize train.{settings.lang}")
            if settings.case == "truecase":
                processor.truecaser = Truecaser.train(pre)
                pre = map_lines(processor, "truecase", pre, workers, desc=f"truecase train.{settings.lang}")
            tokenized[side], processors[side] = pre, processor
        if self.joint_vocab:
            bpe = TokenizedTextBPE.train(tokenized["src"] + tokenized["tgt"], self.vocab_size)
            bpes = {"src": bpe, "tgt": bpe}
        else:
            bpes = {side: TokenizedTextBPE.train(tokenized[side], self.vocab_size) for side in ("src", "tgt")}
        self.codecs = {side: PipelineCodec(processors[side], bpes[side]) for side in ("src", "tgt")}
        return tokenized

    def codec(self, side: str) -> PipelineCodec:
        if not self.codecs:
            raise RuntimeError("Pipeline: call fit() (or from_state) first")
        return self.codecs[side]

    def tokenize_lines(self, side: str, lines: Sequence[str], workers: int = 1, desc: str = "") -> list[str]:
        """:meth:`PipelineCodec.tokenize` over many lines, with progress, over ``workers`` processes."""
        return map_lines(self.codec(side).processor, "tokenize", lines, workers, desc=desc)

    def to_state(self) -> dict[str, Any]:
        """JSON-able: ``{"src": codec state, "tgt": codec state, "joint": bool, "vocab_size": int}``."""
        return {
            "src": self.codec("src").to_state(),
            "tgt": self.codec("tgt").to_state(),
            "joint": self.joint_vocab,
            "vocab_size": self.vocab_size,
        }

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write :meth:`to_state` as JSON (the learned truecasers and BPE models with their settings)."""
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_state(), f)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Pipeline:
        return cls.from_state(load_file(path))

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Pipeline:
        src = PipelineCodec.from_state(state["src"])
        tgt = PipelineCodec.from_state(state["tgt"], bpe=src.bpe if state["joint"] else None)
        pipeline = cls(src.processor.settings, tgt.processor.settings, state["vocab_size"], state["joint"])
        pipeline.codecs = {"src": src, "tgt": tgt}
        return pipeline

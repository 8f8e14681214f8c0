"""The paper's preprocessing as one object per language pair, with its inverse for output.

Per side (:class:`SideSettings`, :class:`LanguageProcessor`), in order:

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
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sacremoses import MosesDetokenizer, MosesPunctNormalizer, MosesTokenizer
from tqdm.auto import tqdm

from sarnmt.data.text.codecs import TextCodec
from sarnmt.data.text.subword import TokenizedTextBPE
from sarnmt.data.text.truecase import Truecaser, detruecase

CASES = ("truecase", "lowercase", "keep")
SEGMENTERS = ("moses", "jieba")


@dataclass(frozen=True)
class SideSettings:
    """How one language side is preprocessed.

    :param lang: ISO code given to the Moses tools (``en``, ``de``, ``es``, ``zh``).
    :param normalize: Moses punctuation normalisation first.
    :param aggressive_dash_splits: split hyphens inside words as ``@-@`` (Moses ``-a``).
    :param case: ``truecase`` | ``lowercase`` | ``keep``.
    :param segmenter: ``moses`` (tokenizer.perl) or ``jieba`` (Chinese word segmentation, then XML escaping).
    """

    lang: str
    normalize: bool = True
    aggressive_dash_splits: bool = True
    case: str = "truecase"
    segmenter: str = "moses"

    def __post_init__(self) -> None:
        if self.case not in CASES:
            raise ValueError(f"SideSettings({self.lang}): case must be one of {CASES}, got {self.case!r}")
        if self.segmenter not in SEGMENTERS:
            raise ValueError(
                f"SideSettings({self.lang}): segmenter must be one of {SEGMENTERS}, got {self.segmenter!r}"
            )


def _jieba() -> Any:
    import jieba

    jieba.setLogLevel(logging.WARNING)
    return jieba


class LanguageProcessor:
    """Raw line <-> tokenised line for one side (steps 1-3 above).

    :param settings: the side's settings.
    :param truecaser: required when ``settings.case == "truecase"`` for :meth:`tokenize` (not for the inverse).
    """

    def __init__(self, settings: SideSettings, truecaser: Truecaser | None = None) -> None:
        self.settings, self.truecaser = settings, truecaser
        self._normalizer = MosesPunctNormalizer(settings.lang)
        self._tokenizer = MosesTokenizer(settings.lang)
        self._detokenizer = MosesDetokenizer(settings.lang)
        self._jieba = _jieba() if settings.segmenter == "jieba" else None

    def pretokenize(self, line: str) -> str:
        """Normalise, tokenise (or segment) and lowercase if configured; no truecasing."""
        s = self.settings
        if s.normalize:
            # the trailing newline reproduces the Perl script, which sees it (e.g. for `."` -> `".` in de/es)
            line = self._normalizer.normalize(line + "\n")
        if self._jieba is not None:
            words = (w.strip() for w in self._jieba.cut(line))
            out = " ".join(self._tokenizer.escape_xml(w) for w in words if w)
        else:
            out = self._tokenizer.tokenize(
                line, aggressive_dash_splits=s.aggressive_dash_splits, escape=True, return_str=True
            )
        out = " ".join(out.split())
        return out.lower() if s.case == "lowercase" else out

    def truecase(self, pretokenized: str) -> str:
        if self.settings.case != "truecase":
            return pretokenized
        if self.truecaser is None:
            raise RuntimeError(f"LanguageProcessor({self.settings.lang}): truecasing needs a learned truecaser")
        return self.truecaser.truecase(pretokenized)

    def tokenize(self, line: str) -> str:
        """The tokenised (and truecased) form of a raw line."""
        return self.truecase(self.pretokenize(line))

    def detokenize(self, tokenized: str) -> str:
        """Plain text from the tokenised form: detruecase (if truecased), detokenise and unescape."""
        if self.settings.case == "truecase":
            tokenized = detruecase(tokenized)
        return self._detokenizer.detokenize(tokenized.split())


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


# --- parallel map over lines (a pool of processes, each with its own processor) -------------------------------

_WORKER: dict[str, Any] = {}


def _init_worker(settings: dict[str, Any], truecaser: dict[str, Any] | None) -> None:
    tc = Truecaser.from_state(truecaser) if truecaser is not None else None
    _WORKER["p"] = LanguageProcessor(SideSettings(**settings), tc)


def _work(args: tuple[str, list[str]]) -> list[str]:
    method, lines = args
    fn: Callable[[str], str] = getattr(_WORKER["p"], method)
    return [fn(line) for line in lines]


def map_lines(
    processor: LanguageProcessor,
    method: str,
    lines: Sequence[str],
    workers: int = 1,
    desc: str = "",
    chunk: int = 2000,
) -> list[str]:
    """``[processor.<method>(line) for line in lines]`` with a progress bar, over ``workers`` processes.

    :param method: ``pretokenize``, ``truecase`` or ``tokenize``.
    :param workers: processes; 0 means one per CPU core; 1 (or a short input) runs in this process.
    """
    workers = workers if workers > 0 else (os.cpu_count() or 1)
    bar = tqdm(total=len(lines), desc=desc or method, unit="line", leave=False, disable=len(lines) < 5000)
    out: list[str] = []
    try:
        if workers <= 1 or len(lines) <= 2 * chunk:
            fn = getattr(processor, method)
            for k in range(0, len(lines), chunk):
                out.extend(fn(line) for line in lines[k : k + chunk])
                bar.update(min(chunk, len(lines) - k))
            return out
        import multiprocessing as mp

        tc = processor.truecaser.to_state() if processor.truecaser is not None else None
        jobs = ((method, list(lines[k : k + chunk])) for k in range(0, len(lines), chunk))
        ctx = mp.get_context("spawn")
        with ctx.Pool(workers, initializer=_init_worker, initargs=(asdict(processor.settings), tc)) as pool:
            for part in pool.imap(_work, jobs):
                out.extend(part)
                bar.update(len(part))
        return out
    finally:
        bar.close()


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
        with open(path, encoding="utf-8") as f:
            return cls.from_state(json.load(f))

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Pipeline:
        src = PipelineCodec.from_state(state["src"])
        tgt = PipelineCodec.from_state(state["tgt"], bpe=src.bpe if state["joint"] else None)
        pipeline = cls(src.processor.settings, tgt.processor.settings, state["vocab_size"], state["joint"])
        pipeline.codecs = {"src": src, "tgt": tgt}
        return pipeline

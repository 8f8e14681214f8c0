"""One language side's preprocessing before BPE (steps 1-3 of :mod:`sarnmt.data.text.pipeline`): its settings
(:class:`SideSettings`), raw line <-> tokenised line (:class:`LanguageProcessor`: Moses punctuation normalisation,
Moses tokenisation or jieba segmentation, truecasing or lowercasing, and the inverse), and the same over many lines in
a pool of processes with a progress bar (:func:`map_lines`).
"""

from __future__ import annotations

import logging
import os
import re
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from sacremoses import MosesDetokenizer, MosesPunctNormalizer, MosesTokenizer
from sacremoses.corpus import NonbreakingPrefixes
from tqdm.auto import tqdm

from sarnmt.data.text.truecase import Truecaser, detruecase
from sarnmt.errors import InputError, check_flag, check_one_of

log = logging.getLogger(__name__)


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
    case: Literal["truecase", "lowercase", "keep"] = "truecase"
    segmenter: Literal["moses", "jieba"] = "moses"

    def __post_init__(self) -> None:
        # the choices and flags, checked where a side's settings enter (check_side)
        assert all(getattr(self, key) in choices for key, choices in side_choices().items()), self


LANG_CODE = re.compile(r"[a-z]{2,3}([-_][A-Za-z]{2,8})?")  # en, yue, pt-BR, zh_Hant: what the Moses tools look up


def side_choices() -> dict[str, tuple[str, ...]]:
    """The settings of a side that are one of a few names, with their names: where :class:`SideSettings` declares
    them (its ``Literal`` annotations)."""
    hints = typing.get_type_hints(SideSettings)
    return {key: typing.get_args(hint) for key, hint in hints.items() if typing.get_origin(hint) is Literal}


def check_side(side: str, settings: Mapping[str, Any]) -> None:
    """``data.<side>`` (``src`` or ``tgt``) where it enters (a described corpus's DataModule), before any file is
    read: only the keys :class:`SideSettings` declares, ``lang`` given as a language code, each setting it declares as
    one of a few names (:func:`side_choices`) one of them, each it declares ``bool`` true or false
    (``normalize=maybe`` was taken as true). A code the Moses tools have no nonbreaking prefixes for is used as
    ``tokenizer.perl`` uses it, with English's prefixes, and said in a warning.

    :raises InputError: ``data.<side>.<key>: not a setting of a side: ...``, ``data.<side>.lang=...: must be a
        language code ...``, ``data.<side>.<key>=<value> is not a choice: ...``
        (:func:`~sarnmt.errors.check_one_of`) or ``...: must be true or false`` (:func:`~sarnmt.errors.check_flag`),
        one line."""
    hints, choices = typing.get_type_hints(SideSettings), side_choices()
    unknown = [key for key in settings if key not in hints]
    if unknown:
        raise InputError(f"data.{side}.{unknown[0]}: not a setting of a side: use {', '.join(hints)}")
    lang = settings.get("lang")
    code = "a language code as the Moses tools take it (ISO 639: en, de, es, zh)"
    if lang is None:
        raise InputError(f"data.{side}.lang is required: {code}")
    if not isinstance(lang, str) or not LANG_CODE.fullmatch(lang):
        raise InputError(f"data.{side}.lang={lang!r}: must be {code}")
    if lang not in NonbreakingPrefixes().available_langs:
        log.warning(
            "data.%s.lang=%r: the Moses tools have no nonbreaking prefixes for it; English's are used "
            "(tokenizer.perl's fall-back)",
            side,
            lang,
        )
    for key, value in settings.items():
        if key in choices:
            check_one_of(f"data.{side}.{key}", value, choices[key])
        elif hints.get(key) is bool:
            check_flag(f"data.{side}.{key}", value)


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

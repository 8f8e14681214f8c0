"""Reading the toy corpus back (:mod:`sarnmt.data.corpora.toy` generates it): a source sentence parsed into its clause,
the reference translation of a source line, the target vocabulary's forms, and the agreement of a target sentence's
final verb with its subject (the agreement probe of :mod:`sarnmt.analysis.agreement`)."""

from __future__ import annotations

from sarnmt.data.corpora.toy import (
    ADJ_SUFFIX,
    ADJS,
    NOUNS,
    NP,
    PREPS,
    SRC_DET,
    SRC_PLURAL,
    SRC_REL,
    TGT_DET,
    TGT_PLURAL,
    TGT_REL,
    VERB_SUFFIX,
    VERBS,
    Clause,
    realize_target,
)


class _ParseError(ValueError):
    pass


def _lookup(table: dict, toks: list[str], i: int):
    if i >= len(toks) or toks[i] not in table:
        raise _ParseError(f"unexpected {toks[i] if i < len(toks) else 'end'!r} at {i}")
    return table[toks[i]]


_S_DET = {v: k for k, v in SRC_DET.items()}
_S_NOUN = {s + suf: (n, bool(suf)) for n, (s, _, _) in enumerate(NOUNS) for suf in ("", SRC_PLURAL)}
_S_ADJ = {s: a for a, (s, _) in enumerate(ADJS)}
_S_VERB = {s: v for v, (s, _) in enumerate(VERBS)}
_S_PREP = {s: p for p, (s, _) in enumerate(PREPS)}
_T_DET = {f + suf: (d, c, bool(suf)) for (d, c), f in TGT_DET.items() for suf in ("", "i")}
_T_NOUN = {t + suf: (n, bool(suf)) for n, (_, t, _) in enumerate(NOUNS) for suf in ("", TGT_PLURAL)}
_T_ADJ = {t + sfx: (a, c) for a, (_, t) in enumerate(ADJS) for c, sfx in ADJ_SUFFIX.items()}
_T_VERB = {t + sfx: (v, c, p) for v, (_, t) in enumerate(VERBS) for (c, p), sfx in VERB_SUFFIX.items()}
_T_POST = {t: p for p, (_, t) in enumerate(PREPS)}
_SRC_FORMS = [_S_DET, _S_NOUN, _S_ADJ, _S_VERB, _S_PREP, {SRC_REL: 0}]
_TGT_FORMS = [_T_DET, _T_NOUN, _T_ADJ, _T_VERB, _T_POST, {TGT_REL: 0}]
for _forms in (_SRC_FORMS, _TGT_FORMS):  # no word form may belong to two categories
    assert sum(map(len, _forms)) == len(set().union(*_forms)), "toy lexicon: ambiguous word form"
SRC_VOCAB_SIZE = sum(map(len, _SRC_FORMS))
TGT_VOCAB_SIZE = sum(map(len, _TGT_FORMS))


def _parse_src_np(toks: list[str], i: int, allow_rel: bool) -> tuple[NP, int]:
    definite = _lookup(_S_DET, toks, i)
    i += 1
    adjs = []
    while i < len(toks) and toks[i] in _S_ADJ:
        adjs.append(_S_ADJ[toks[i]])
        i += 1
    noun, plural = _lookup(_S_NOUN, toks, i)
    i += 1
    rel = None
    if allow_rel and i < len(toks) and toks[i] == SRC_REL:
        verb = _lookup(_S_VERB, toks, i + 1)
        obj, i = _parse_src_np(toks, i + 2, False)
        rel = (verb, obj)
    return NP(noun, plural, definite, tuple(adjs), rel), i


def parse_source(line: str) -> Clause:
    """The :class:`Clause` of a source sentence; raises ``ValueError`` if it is not in the language."""
    toks = line.split()
    subj, i = _parse_src_np(toks, 0, True)
    verb = _lookup(_S_VERB, toks, i)
    obj, i = _parse_src_np(toks, i + 1, True)
    pp = None
    if i < len(toks):
        prep = _lookup(_S_PREP, toks, i)
        pp_np, i = _parse_src_np(toks, i + 1, False)
        pp = (prep, pp_np)
    if i != len(toks):
        raise _ParseError(f"trailing words from position {i} in {line!r}")
    return Clause(subj, verb, obj, pp)


def translate(src_line: str) -> str:
    """The (unique) target sentence of a source sentence."""
    return realize_target(parse_source(src_line))


def _check_tgt_np(toks: list[str], i: int, allow_rel: bool) -> tuple[tuple[int, bool], int]:
    """Parse a target NP, checking determiner, adjective and relative-verb agreement.

    :returns: ``((noun index, plural), position after the NP)``.
    """
    _, det_cls, det_pl = _lookup(_T_DET, toks, i)
    noun, plural = _lookup(_T_NOUN, toks, i + 1)
    cls = NOUNS[noun][2]
    if (det_cls, det_pl) != (cls, plural):
        raise _ParseError(f"determiner {toks[i]!r} does not agree with {toks[i + 1]!r}")
    i += 2
    while i < len(toks) and toks[i] in _T_ADJ:
        if _T_ADJ[toks[i]][1] != cls:
            raise _ParseError(f"adjective {toks[i]!r} does not agree with class {cls}")
        i += 1
    if allow_rel and i < len(toks) and toks[i] == TGT_REL:
        _, i = _check_tgt_np(toks, i + 1, False)
        _, v_cls, v_pl = _lookup(_T_VERB, toks, i)
        if (v_cls, v_pl) != (cls, plural):
            raise _ParseError(f"relative verb {toks[i]!r} does not agree with its head noun")
        i += 1
    return (noun, plural), i


def verb_features(word: str) -> tuple[int, str, bool] | None:
    """``(verb index, class, plural)`` of a target verb form (the class and number of its subject), or None when
    ``word`` is not a verb form."""
    return _T_VERB.get(word)


def verb_forms(verb: int) -> dict[tuple[str, bool], str]:
    """The six target forms of verb ``verb``, by ``(class, plural)`` of the subject they agree with."""
    return {key: VERBS[verb][1] + suffix for key, suffix in VERB_SUFFIX.items()}


def subject_agreement(c: Clause) -> tuple[str, bool]:
    """``(class, plural)`` of the sentence subject: what the main verb must agree with."""
    return NOUNS[c.subj.noun][2], c.subj.plural


def check_agreement(src_line: str, tgt_line: str) -> bool:
    """Whether ``tgt_line`` is well formed with every agreement satisfied, its final word is a verb agreeing
    with the target subject, and that subject and verb are the translations of the source subject and verb.

    The target side is checked by its own parser (it does not call :func:`translate`).
    """
    try:
        src = parse_source(src_line)
        toks = tgt_line.split()
        subj, i = _check_tgt_np(toks, 0, True)
        _, i = _check_tgt_np(toks, i, True)
        if i < len(toks) - 1:
            _, i = _check_tgt_np(toks, i, False)
            _lookup(_T_POST, toks, i)
            i += 1
        verb, v_cls, v_pl = _lookup(_T_VERB, toks, i)
    except _ParseError:
        return False
    return (
        i == len(toks) - 1
        and (v_cls, v_pl) == (NOUNS[subj[0]][2], subj[1])
        and subj == (src.subj.noun, src.subj.plural)
        and verb == src.verb
    )

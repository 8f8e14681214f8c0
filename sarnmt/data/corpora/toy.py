"""A synthetic parallel corpus whose target side needs non-local target context.

Both languages are made up; every word is a pronounceable pseudo-word from the fixed lexicon below. The seed
only chooses sentences, so the grammar and vocabulary are the same for every seed, and a seed gives
byte-identical corpora on every run and machine (only ``random.Random(seed)`` is used).

Source (SVO, pre-nominal adjectives, no agreement at all)::

    S   -> NP V NP [P NP]             the PP always modifies the main verb
    NP  -> D A* N [ko V NP']          0-2 adjectives; optional subject relative clause "that V NP'"
    NP' -> D A? N                     no relative clause, at most one adjective
    D   -> ta (definite) | nu (indefinite)     N plural = stem + "en"     V, A, P invariant

Target (SOV, post-nominal adjectives in mirror order, postpositions, class agreement)::

    S   -> NP NP [NP P] V              the main verb is the last word, after object and PP
    NP  -> D N A* [ki NP' V]           relative clause: marker "ki", its object, then its verb
    NP' -> D N A?

Every target noun lexeme has a fixed class A, B or C (arbitrary, not visible in the source word) and plural =
stem + "ne". Agreement, all of it realised as suffixes or portmanteau forms in the target only:

- determiner: definiteness x class x number: la/lai, ro/roi, ve/vei (definite A/B/C, sg/pl),
  na/nai, so/soi, du/dui (indefinite);
- adjective: stem + class suffix -an (A), -ok (B), -ir (C);
- verb: stem + suffix for class and number of *its subject*: -ta/-tan (A sg/pl), -ko/-kon (B), -mi/-min (C).
  The main verb agrees with the sentence subject, which is the first noun of the target, separated from the
  verb by the subject's adjectives and relative clause, the object phrase and the PP; a relative-clause verb
  agrees with the noun the clause modifies.

Translation is deterministic and one-to-one word for word (:func:`translate`). Sizes: 30 nouns, 14
adjectives, 18 verbs, 6 prepositions, giving 101 source and 229 target word types; sentences have 5-24 words
(same length on both sides), 10.5 on average.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

# fmt: off
_NOUNS = ("blorp:pamo:B drax:teku:A fenn:rina:C gliv:folu:A hask:mabe:B jorb:sidu:C krell:kowa:C lomp:lenu:A "
          "mirv:bari:B nasp:dafo:A plov:goli:C quist:hesa:B ronk:jumi:A skorn:kapu:C trib:lodi:B vosk:mero:A "
          "wemp:nuka:C yarl:pelo:B zint:ruti:A bront:sapa:C dwil:tobi:B frop:vanu:A grell:wiko:C hulm:yara:B "
          "kvast:zelu:A marn:bomi:C nolk:duna:B prend:fira:A snup:gapo:C tovv:huto:B").split()
_ADJS = ("brin:vel dulk:mur flan:sant gorm:kel hiv:dor jask:fim kell:gal lurn:hun mopt:lis nerk:nov "
         "prall:pir skiv:rum tund:tes vell:zor").split()
_VERBS = ("grupt:bela shelk:deno trav:firu dronk:gaso fesk:hemi glemp:jalu plint:kori kvorm:lupa "
          "slev:mosi nusk:nefu prag:pari wolt:rosu zarp:sile drelk:tumo frint:vadi morv:wuko stak:yeni "
          "tresk:zapo").split()
_PREPS = "ob:uma nid:eki sur:ota ep:ila tal:aru vin:esu".split()
TGT_DET = {(True, "A"): "la", (True, "B"): "ro", (True, "C"): "ve",
           (False, "A"): "na", (False, "B"): "so", (False, "C"): "du"}  # (definite, class); plural: + "i"
ADJ_SUFFIX = {"A": "an", "B": "ok", "C": "ir"}
VERB_SUFFIX = {("A", False): "ta", ("A", True): "tan", ("B", False): "ko", ("B", True): "kon",
               ("C", False): "mi", ("C", True): "min"}  # (class, plural)
# fmt: on
NOUNS = [tuple(e.split(":")) for e in _NOUNS]  # (source stem, target stem, class)
ADJS = [tuple(e.split(":")) for e in _ADJS]  # (source, target stem)
VERBS = [tuple(e.split(":")) for e in _VERBS]  # (source, target stem)
PREPS = [tuple(e.split(":")) for e in _PREPS]  # (source preposition, target postposition)
SRC_DET = {True: "ta", False: "nu"}  # definite?
SRC_REL, TGT_REL = "ko", "ki"
SRC_PLURAL, TGT_PLURAL = "en", "ne"


@dataclass(frozen=True)
class NP:
    """A noun phrase: lexicon indices, and an optional relative clause ``(verb index, object NP)``."""

    noun: int
    plural: bool
    definite: bool
    adjs: tuple[int, ...]
    rel: tuple[int, NP] | None = None


@dataclass(frozen=True)
class Clause:
    """A sentence: subject, main verb index, object, optional ``(preposition index, NP)``."""

    subj: NP
    verb: int
    obj: NP
    pp: tuple[int, NP] | None = None


def _tgt_det(np: NP) -> str:
    return TGT_DET[np.definite, NOUNS[np.noun][2]] + ("i" if np.plural else "")


def _tgt_verb(verb: int, subj: NP) -> str:
    return VERBS[verb][1] + VERB_SUFFIX[NOUNS[subj.noun][2], subj.plural]


def _src_np(np: NP) -> list[str]:
    words = [SRC_DET[np.definite], *(ADJS[a][0] for a in np.adjs)]
    words.append(NOUNS[np.noun][0] + (SRC_PLURAL if np.plural else ""))
    if np.rel:
        words += [SRC_REL, VERBS[np.rel[0]][0], *_src_np(np.rel[1])]
    return words


def _tgt_np(np: NP) -> list[str]:
    cls = NOUNS[np.noun][2]
    words = [_tgt_det(np), NOUNS[np.noun][1] + (TGT_PLURAL if np.plural else "")]
    words += [ADJS[a][1] + ADJ_SUFFIX[cls] for a in reversed(np.adjs)]
    if np.rel:
        words += [TGT_REL, *_tgt_np(np.rel[1]), _tgt_verb(np.rel[0], np)]
    return words


def realize_source(c: Clause) -> str:
    words = _src_np(c.subj) + [VERBS[c.verb][0]] + _src_np(c.obj)
    if c.pp:
        words += [PREPS[c.pp[0]][0], *_src_np(c.pp[1])]
    return " ".join(words)


def realize_target(c: Clause) -> str:
    words = _tgt_np(c.subj) + _tgt_np(c.obj)
    if c.pp:
        words += [*_tgt_np(c.pp[1]), PREPS[c.pp[0]][1]]
    return " ".join(words + [_tgt_verb(c.verb, c.subj)])


def _np_tree(np: NP) -> str:
    cls = NOUNS[np.noun][2]
    parts = [f"(D {_tgt_det(np)})", f"(N {NOUNS[np.noun][1] + (TGT_PLURAL if np.plural else '')})"]
    parts += [f"(A {ADJS[a][1] + ADJ_SUFFIX[cls]})" for a in reversed(np.adjs)]
    if np.rel:
        parts.append(f"(RC (REL {TGT_REL}) {_np_tree(np.rel[1])} (V {_tgt_verb(np.rel[0], np)}))")
    return f"(NP {' '.join(parts)})"


def target_tree(c: Clause) -> str:
    """The target sentence's constituency tree as the grammar derives it, in Penn Treebank bracket form::

        (S NP NP [(PP NP (P p))] (V v))       NP -> (NP (D d) (N n) (A a)* [(RC (REL ki) NP' (V v))])

    one node per grammar symbol (the optional groups ``[NP P]`` and ``[ki NP' V]`` are the PP and RC nodes); its
    leaves are the words of :func:`realize_target`. The gold trees of the tree analysis (paper §8.2).
    """
    parts = [_np_tree(c.subj), _np_tree(c.obj)]
    if c.pp:
        parts.append(f"(PP {_np_tree(c.pp[1])} (P {PREPS[c.pp[0]][1]}))")
    parts.append(f"(V {_tgt_verb(c.verb, c.subj)})")
    return f"(S {' '.join(parts)})"


def _sample_np(rng: random.Random, allow_rel: bool) -> NP:
    noun = rng.randrange(len(NOUNS))
    plural = rng.random() < 0.35
    definite = rng.random() < 0.6
    n_adj = rng.choices((0, 1, 2), weights=(0.45, 0.35, 0.2))[0] if allow_rel else int(rng.random() < 0.4)
    adjs = tuple(rng.sample(range(len(ADJS)), n_adj))
    rel = (rng.randrange(len(VERBS)), _sample_np(rng, False)) if allow_rel and rng.random() < 0.3 else None
    return NP(noun, plural, definite, adjs, rel)


def sample_clause(rng: random.Random) -> Clause:
    subj = _sample_np(rng, True)
    verb = rng.randrange(len(VERBS))
    obj = _sample_np(rng, True)
    pp = (rng.randrange(len(PREPS)), _sample_np(rng, False)) if rng.random() < 0.4 else None
    return Clause(subj, verb, obj, pp)


def generate_toy_corpus(seed: int, n_train: int, n_dev: int, n_test: int) -> dict[str, tuple[list[str], list[str]]]:
    """Sample ``n_train + n_dev + n_test`` pairs with distinct sources and split them in that order.

    The sizes are trusted: ``data.n_train``, ``data.n_dev`` and ``data.n_test`` are checked where they enter
    (:class:`~sarnmt.data.loading.in_memory.ToyDataModule`, ``analyze toy_gold`` and ``analyze agreement``), the
    language model's ``data.toy_sizes`` by its corpus.

    :returns: ``{"train": (src, tgt), "dev": (src, tgt), "test": (src, tgt)}`` of whitespace-tokenised lines.
    """
    sizes = {"train": n_train, "dev": n_dev, "test": n_test}
    assert all(n >= 0 for n in sizes.values()), "toy split sizes reached the corpus unchecked"
    total = n_train + n_dev + n_test
    rng = random.Random(seed)
    seen: set[str] = set()
    pairs: list[tuple[str, str]] = []
    attempts = 0
    while len(pairs) < total:
        attempts += 1
        if attempts > 20 * total + 1000:
            raise ValueError(f"generate_toy_corpus: could not find {total} distinct sentences")
        clause = sample_clause(rng)
        src = realize_source(clause)
        if src not in seen:
            seen.add(src)
            pairs.append((src, realize_target(clause)))
    out, start = {}, 0
    for name, n in sizes.items():
        chunk = pairs[start : start + n]
        out[name] = ([s for s, _ in chunk], [t for _, t in chunk])
        start += n
    return out


_EXAMPLE = Clause(
    NP(0, False, True, (0,), (2, NP(4, True, False, ()))),
    5,
    NP(21, True, False, (3, 1)),
    (0, NP(15, False, True, ())),
)
TOY_EXAMPLE = (realize_source(_EXAMPLE), realize_target(_EXAMPLE))  # shown in docs/data.md (the toy corpus)

"""Where each corpus comes from, described once: downloads, archive layout, splits, expected line counts.

A :class:`Corpus` lists its :class:`Download` s (official URLs; ``checksum`` as published, e.g. the MD5s sacrebleu
records for the WMT test archives, or ``None`` where none is published) and its splits, each a list of
:class:`Part` s: a source and a target file, paths relative to the data root, plain text, ``.gz`` or WMT SGML
(``.sgm``, one ``<seg>`` per sentence). A download with ``extract`` is a ``.tgz`` unpacked into ``root/<folder>``;
otherwise the file itself is saved at ``root/<folder>/<name>``. A download with ``manual`` has no direct URL: the text
says where to get the files.

Splits: ``train``, ``val``, ``test``; extra test sets are named ``test_<name>`` (e.g. ``test_nt2015``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Download:
    """One file to fetch. ``url`` is absolute; a mirror (``data.url_base``) keeps its path part."""

    name: str
    url: str
    folder: str
    checksum: str | None = None  # "md5:<hex>" or "sha256:<hex>"
    extract: bool = True
    manual: str | None = None


@dataclass(frozen=True)
class Part:
    """A parallel piece of a split: source and target paths under the data root, the expected line count of the
    files, and optionally which of their lines the split takes: ``rows = (m, (r, ...))`` keeps line i (0-based) iff
    ``i % m`` is one of the ``r`` (a strided share of a file, unbiased by the file's order)."""

    src: str
    tgt: str
    lines: int | None = None
    rows: tuple[int, tuple[int, ...]] | None = None

    def select(self, lines: list[str]) -> list[str]:
        if self.rows is None:
            return lines
        modulus, residues = self.rows
        return [line for i, line in enumerate(lines) if i % modulus in residues]


@dataclass(frozen=True)
class Corpus:
    """A corpus: ``splits`` maps a split name to its parts (concatenated in order); ``pair`` is (src, tgt)."""

    name: str
    splits: dict[str, tuple[Part, ...]]
    downloads: tuple[Download, ...] = ()
    note: str = ""
    pair: tuple[str, str] = ("", "")


def _news(pair_dir: str, names: list[str], src: str, tgt: str) -> tuple[Part, ...]:
    return tuple(Part(f"{pair_dir}/{n}.{src}.gz", f"{pair_dir}/{n}.{tgt}.gz") for n in names)


def _p(src: str, tgt: str, lines: int | None, stem: str, rows: tuple[int, tuple[int, ...]] | None = None) -> Part:
    return Part(stem.format(lang=src), stem.format(lang=tgt), lines, rows)


# --- official archives -------------------------------------------------------------------------------------------
STATMT = "https://www.statmt.org"
WMT12_TEST = Download(
    "wmt12-test.tgz", f"{STATMT}/wmt12/test.tgz", "wmt12-test", "md5:608232d34ebc4ba2ff70fead45674e47"
)
WMT13_TEST = Download(
    "wmt13-test.tgz", f"{STATMT}/wmt13/test.tgz", "wmt13-test", "md5:48eca5d02f637af44e85186847141f67"
)
WMT14_TEST = Download(
    "wmt14-test-full.tgz", f"{STATMT}/wmt14/test-full.tgz", "wmt14-test-full", "md5:a8cd784e006feb32ac6f3d9ec7eb389a"
)
WMT15_TEST = Download(
    "wmt15-test.tgz", f"{STATMT}/wmt15/test.tgz", "wmt15-test", "md5:67e3beca15e69fe3d36de149da0a96df"
)
WMT16_TEST = Download(
    "wmt16-test.tgz",
    "https://data.statmt.org/wmt16/translation-task/test.tgz",
    "wmt16-test",
    "md5:3d809cd0c2c86adb2c67034d15c4e446",
)
EUROPARL_ES = Download("europarl-v7-es-en.tgz", f"{STATMT}/europarl/v7/es-en.tgz", "europarl-v7-es-en")
EUROPARL_DE = Download("europarl-v7-de-en.tgz", f"{STATMT}/europarl/v7/de-en.tgz", "europarl-v7-de-en")
NC_V8 = Download("training-parallel-nc-v8.tgz", f"{STATMT}/wmt13/training-parallel-nc-v8.tgz", "nc-v8")
NC_V11 = Download(
    "training-parallel-nc-v11.tgz",
    "https://data.statmt.org/wmt16/translation-task/training-parallel-nc-v11.tgz",
    "nc-v11",
)
COMMONCRAWL = Download(
    "training-parallel-commoncrawl.tgz", f"{STATMT}/wmt13/training-parallel-commoncrawl.tgz", "commoncrawl"
)
UN_MANUAL = (
    "The UN corpus has no public direct download. Get the English-Chinese UN Parallel Corpus v1.0 "
    "(https://conferences.unite.un.org/UNCorpus, free registration; or the UN corpus of Rafalovitch and Dale 2009 "
    "from OPUS, https://opus.nlpl.eu/UN.php), take 500,000 training pairs and 2,000-pair dev and test sets "
    "(the paper's 2,000-line test set, tokenised, is in the authors' repository "
    "idiap/Attentive_Residual_Connections_NMT, test_files/en-zh), and save them, raw and line-aligned, "
    "as un-en-zh/{train,dev,test}.{en,zh} under the data root"
)
UN = Download("un-en-zh", "", "un-en-zh", extract=False, manual=UN_MANUAL)

ES_EN = Corpus(
    "es_en",
    pair=("es", "en"),
    downloads=(EUROPARL_ES, NC_V8, WMT12_TEST, WMT13_TEST),
    splits={
        "train": (
            _p("es", "en", 1965734, "europarl-v7-es-en/europarl-v7.es-en.{lang}"),
            _p("es", "en", 174441, "nc-v8/training/news-commentary-v8.es-en.{lang}"),
        ),
        "val": (_p("es", "en", 3003, "wmt12-test/test/newstest2012-src.{lang}.sgm"),),
        "test": (_p("es", "en", 3000, "wmt13-test/test/newstest2013-src.{lang}.sgm"),),
    },
    note="WMT13 Es-En: Europarl v7 + News Commentary v8 (the WMT13 release; the paper says v11), ca. 2.14M pairs",
)
EN_DE = Corpus(
    "en_de",
    pair=("en", "de"),
    downloads=(EUROPARL_DE, COMMONCRAWL, NC_V11, WMT13_TEST, WMT14_TEST, WMT15_TEST, WMT16_TEST),
    splits={
        "train": (
            Part("europarl-v7-de-en/europarl-v7.de-en.en", "europarl-v7-de-en/europarl-v7.de-en.de", 1920209),
            Part("commoncrawl/commoncrawl.de-en.en", "commoncrawl/commoncrawl.de-en.de", 2399123),
            Part(
                "nc-v11/training-parallel-nc-v11/news-commentary-v11.de-en.en",
                "nc-v11/training-parallel-nc-v11/news-commentary-v11.de-en.de",
                242770,
            ),
        ),
        "val": (_p("en", "de", 3000, "wmt13-test/test/newstest2013-src.{lang}.sgm"),),
        "test": (
            Part(
                "wmt14-test-full/test-full/newstest2014-deen-src.en.sgm",
                "wmt14-test-full/test-full/newstest2014-deen-ref.de.sgm",
                3003,
            ),
        ),
        "test_nt2015": (
            Part("wmt15-test/test/newstest2015-ende-src.en.sgm", "wmt15-test/test/newstest2015-ende-ref.de.sgm", 2169),
        ),
        "test_nt2016": (
            Part("wmt16-test/test/newstest2016-ende-src.en.sgm", "wmt16-test/test/newstest2016-ende-ref.de.sgm", 2999),
        ),
    },
    note="WMT16 En-De: Europarl v7 + Common Crawl + News Commentary v11, ca. 4.56M pairs",
)
EN_ZH = Corpus(
    "en_zh",
    pair=("en", "zh"),
    downloads=(UN,),
    splits={
        "train": (_p("en", "zh", 500000, "un-en-zh/train.{lang}"),),
        "val": (_p("en", "zh", 2000, "un-en-zh/dev.{lang}"),),
        "test": (_p("en", "zh", 2000, "un-en-zh/test.{lang}"),),
    },
    note="UN corpus En-Zh subset: 0.5M training pairs, 2K dev, 2K test (manual download)",
)

# --- mini corpora from ../shared/data (data.root=../shared/data) -----------------------------------------------
_OLD_NEWS = ["news-test2008", "newssyscomb2009", "newstest2009", "newstest2010", "newstest2011"]
MULTI30K_EN_DE = Corpus(
    "multi30k_en_de",
    pair=("en", "de"),
    splits={
        "train": (_p("en", "de", 29000, "multi30k-en-de/train.{lang}.gz"),),
        "val": (_p("en", "de", 1014, "multi30k-en-de/val.{lang}.gz"),),
        "test": (_p("en", "de", 1000, "multi30k-en-de/test_2016_flickr.{lang}.gz"),),
        "test_2017": (_p("en", "de", 1000, "multi30k-en-de/test_2017_flickr.{lang}.gz"),),
        "test_2018": (_p("en", "de", 1071, "multi30k-en-de/test_2018_flickr.{lang}.gz"),),
        "test_mscoco2017": (_p("en", "de", 461, "multi30k-en-de/test_2017_mscoco.{lang}.gz"),),
    },
    note="Multi30K task 1 (https://github.com/multi30k/dataset, data/task1/raw/), files as multi30k-en-de/*.gz",
)
MULTI30K_DE_EN = Corpus(
    "multi30k_de_en",
    pair=("de", "en"),
    splits={
        name: tuple(replace(part, src=part.tgt, tgt=part.src) for part in parts)
        for name, parts in MULTI30K_EN_DE.splits.items()
    },
    note="Multi30K task 1 in the other direction (German to English), the same files as multi30k_en_de",
)
_TATOEBA_ES = "tatoeba-test-v2021-08-07"
TATOEBA_ES_EN = Corpus(
    "tatoeba_es_en",
    pair=("es", "en"),
    splits={
        "train": (
            *_news(
                "es-en",
                [*_OLD_NEWS, "europarl-sample-train", "europarl-sample-dev", "europarl-sample-test"],
                "es",
                "en",
            ),
            _p("es", "en", 16583, f"es-en/{_TATOEBA_ES}.{{lang}}.gz", rows=(10, (2, 3, 4, 5, 6, 7, 8, 9))),
        ),
        "val": (_p("es", "en", 16583, f"es-en/{_TATOEBA_ES}.{{lang}}.gz", rows=(10, (0,))),),
        "test": (_p("es", "en", 16583, f"es-en/{_TATOEBA_ES}.{{lang}}.gz", rows=(10, (1,))),),
    },
    note="Es->En from ../shared/data: old WMT news tests, a Europarl sample and 80% of the Tatoeba test set for "
    "training; the Tatoeba lines i % 10 == 0 for dev, i % 10 == 1 for test (1,658 pairs each)",
)
TATOEBA_EN_ZH = Corpus(
    "tatoeba_en_zh",
    pair=("en", "zh"),
    splits={
        "train": _news("en-zh", ["anki-tatoeba-cmn", "newstest2017", "newstest2018"], "en", "zh"),
        "val": (_p("en", "zh", 4450, "en-zh/tatoeba-test-v2021-08-07.{lang}.gz", rows=(2, (0,))),),
        "test": (_p("en", "zh", 4450, "en-zh/tatoeba-test-v2021-08-07.{lang}.gz", rows=(2, (1,))),),
    },
    note="En->Zh from ../shared/data: Anki/Tatoeba pairs (deduplicated against the Tatoeba test set) and WMT news "
    "2017-18 for training; the Tatoeba test set's even lines for dev, its odd lines for test",
)
MINI_ES_EN = Corpus(
    "mini_es_en",
    pair=("es", "en"),
    splits={
        "train": _news(
            "es-en",
            [
                *_OLD_NEWS,
                "tatoeba-test-v2021-08-07",
                "europarl-sample-train",
                "europarl-sample-dev",
                "europarl-sample-test",
            ],
            "es",
            "en",
        ),
        "val": _news("es-en", ["newstest2012"], "es", "en"),
        "test": _news("es-en", ["newstest2013"], "es", "en"),
    },
)
MINI_EN_DE = Corpus(
    "mini_en_de",
    pair=("en", "de"),
    splits={
        "train": _news("en-de", [*_OLD_NEWS, "newstest2012", "tatoeba-test-v2021-08-07"], "en", "de"),
        "val": _news("en-de", ["newstest2013"], "en", "de"),
        "test": _news("en-de", ["newstest2014"], "en", "de"),
        "test_nt2015": _news("en-de", ["newstest2015"], "en", "de"),
        "test_nt2016": _news("en-de", ["newstest2016"], "en", "de"),
    },
)
MINI_EN_ZH = Corpus(
    "mini_en_zh",
    pair=("en", "zh"),
    splits={
        "train": _news("en-zh", ["anki-tatoeba-cmn", "newstest2017", "newstest2018"], "en", "zh"),
        "val": _news("en-zh", ["flores101-devtest"], "en", "zh"),
        "test": _news("en-zh", ["newstest2019"], "en", "zh"),
        "test_tatoeba": _news("en-zh", ["tatoeba-test-v2021-08-07"], "en", "zh"),
    },
)

CORPORA: dict[str, Corpus] = {
    c.name: c
    for c in (
        ES_EN,
        EN_DE,
        EN_ZH,
        MULTI30K_EN_DE,
        MULTI30K_DE_EN,
        MINI_ES_EN,
        MINI_EN_DE,
        MINI_EN_ZH,
        TATOEBA_ES_EN,
        TATOEBA_EN_ZH,
    )
}


def get_corpus(name: str) -> Corpus:
    if name not in CORPORA:
        raise ValueError(f"unknown corpus {name!r}; known: {sorted(CORPORA)}")
    return CORPORA[name]

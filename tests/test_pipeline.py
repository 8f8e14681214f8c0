"""The preprocessing pipeline: Moses steps, truecaser, ``@@`` BPE, the codec; acceptance on the paper's test files."""

from __future__ import annotations

import json
import re

import pytest
import sacrebleu

from sarnmt.data.text.codec_state import codec_from_state
from sarnmt.data.text.codecs import WordCodec
from sarnmt.data.text.pipeline import Pipeline
from sarnmt.data.text.processor import LanguageProcessor, SideSettings, check_side, map_lines
from sarnmt.data.text.reading import read_lines
from sarnmt.data.text.subword import RawTextBPECodec, TokenizedTextBPE, merge_bpe
from sarnmt.data.text.truecase import Truecaser, detruecase
from sarnmt.errors import InputError

EU = dict(normalize=True, aggressive_dash_splits=True, case="truecase", segmenter="moses")
TRAIN_EN = [
    "The European Parliament met in Brussels on Monday.",
    "Yesterday the parliament voted on the re-election rules.",
    'In Brussels, the "new" rules weren\'t popular.',
    "The vote in the European Parliament was close.",
    "However, the parliament's members said it's fine.",
] * 4
TRAIN_DE = [
    "Das Europäische Parlament trat am Montag in Brüssel zusammen.",
    "Gestern stimmte das Parlament über die Wiederwahl-Regeln ab.",
    "In Brüssel waren die „neuen“ Regeln nicht beliebt.",
    "Die Abstimmung im Europäischen Parlament war knapp.",
    "Die Abgeordneten sagten jedoch, es sei in Ordnung.",
] * 4


def test_side_settings_reject_unknown_values():
    """Checked where a side's settings enter (:func:`check_side`, the command line's ``data.src`` and ``data.tgt``),
    the choices read from :class:`SideSettings`' annotations; the dataclass trusts the check."""
    with pytest.raises(InputError, match=r"^data.src.case='upper' is not a choice: use one of truecase, lowercase"):
        check_side("src", {"lang": "en", "case": "upper"})
    with pytest.raises(InputError, match=r"^data.tgt.segmenter='pkuseg' is not a choice: use one of moses, jieba$"):
        check_side("tgt", {"lang": "zh", "segmenter": "pkuseg"})
    with pytest.raises(InputError, match=r"^data.src.aggressive_dash_splits='yes': must be true or false$"):
        check_side("src", {"lang": "en", "aggressive_dash_splits": "yes"})
    check_side("src", {"lang": "zh", **EU, "segmenter": "jieba"})
    with pytest.raises(InputError, match=r"^data.src.agressive_dash_splits: not a setting of a side: use lang, "):
        check_side("src", {"lang": "en", "agressive_dash_splits": True})  # a typo is refused where it enters
    with pytest.raises(TypeError):
        SideSettings(**{"lang": "en", "agressive_dash_splits": True})  # and by the dataclass
    for lang in (None, "", "english", 3):
        with pytest.raises(InputError, match=r"^data.tgt.lang"):
            check_side("tgt", {"lang": lang})


def test_a_language_the_moses_tools_do_not_know_is_tokenised_with_englishs_prefixes_and_said(caplog):
    """tokenizer.perl's fall-back (English's nonbreaking prefixes), which sacremoses takes silently, is said."""
    check_side("src", {"lang": "de"})
    assert not caplog.records
    check_side("src", {"lang": "tr"})
    assert [r.getMessage() for r in caplog.records] == [
        "data.src.lang='tr': the Moses tools have no nonbreaking prefixes for it; English's are used "
        "(tokenizer.perl's fall-back)"
    ]
    assert LanguageProcessor(SideSettings("tr", case="keep")).tokenize("Mr. Smith came.") == "Mr. Smith came ."


def test_moses_tokenisation_dashes_escaping_and_lowercase():
    en = LanguageProcessor(SideSettings("en", case="keep"))
    assert en.pretokenize('A re-election of "Obama" isn\'t | [sure].') == (
        "A re @-@ election of &quot; Obama &quot; isn &apos;t &#124; &#91; sure &#93; ."
    )
    assert en.detokenize("A re @-@ election of &quot; Obama &quot; isn &apos;t sure .") == (
        'A re-election of "Obama" isn\'t sure.'
    )
    zh_en = LanguageProcessor(SideSettings("en", aggressive_dash_splits=False, case="lowercase"))
    assert zh_en.pretokenize("The Re-Election, Mr. Smith's.") == "the re-election , mr. smith &apos;s ."
    de = LanguageProcessor(SideSettings("de", case="keep"))
    assert de.pretokenize('Er sagte: "Gut."') == "Er sagte : &quot; Gut &quot; ."  # de normalisation: ." -> ".


def test_jieba_segments_chinese_and_detokenises_back():
    zh = LanguageProcessor(
        SideSettings("zh", normalize=False, aggressive_dash_splits=False, case="keep", segmenter="jieba")
    )
    tok = zh.tokenize("我们今天在北京开会。")
    assert " " in tok and "  " not in tok and tok.replace(" ", "") == "我们今天在北京开会。"
    assert zh.detokenize(tok) == "我们今天在北京开会。"


def test_truecaser_learns_casing_applies_and_roundtrips_state():
    proc = LanguageProcessor(SideSettings("en", **{k: v for k, v in EU.items() if k != "lang"}))
    pre = [proc.pretokenize(line) for line in TRAIN_EN]
    tc = Truecaser.train(pre)
    assert tc.truecase("The parliament met in Brussels .") == "the parliament met in Brussels ."
    assert tc.truecase("Brussels is far .") == "Brussels is far ."  # proper noun stays capitalised
    assert tc.truecase("In Brussels , yes .") == "in Brussels , yes ."
    assert tc.truecase("However , yes .") == "However , yes ."  # never seen inside a sentence: left alone
    again = Truecaser.from_state(json.loads(json.dumps(tc.to_state())))
    assert again.truecase("The European Parliament .") == tc.truecase("The European Parliament .")
    assert detruecase("the vote . however , yes") == "The vote . However , yes"


def test_subword_bpe_at_form_merge_and_state():
    lines = ["justification of the justifications", "the just cause", "justify"] * 5
    bpe = TokenizedTextBPE.train(lines, vocab_size=40)
    ids = bpe.encode("justification unjust")
    pieces = bpe.pieces("justification unjust")
    assert len(pieces) == len(ids) and any(p.endswith("@@") for p in pieces)
    assert merge_bpe(" ".join(pieces)) == "justification unjust"
    assert bpe.merge(ids) == "justification unjust"
    assert TokenizedTextBPE.from_str(bpe.to_str()).encode("the justify") == bpe.encode("the justify")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        bpe.merge([bpe.vocab_size])


@pytest.mark.parametrize("joint", [False, True])
def test_pipeline_codec_roundtrip_state_and_checkpoint_dispatch(joint):
    pipeline = Pipeline(SideSettings("en", **_eu()), SideSettings("de", **_eu()), vocab_size=120, joint_vocab=joint)
    tokenized = pipeline.fit(TRAIN_EN, TRAIN_DE)
    assert tokenized["src"][1] == "Yesterday the parliament voted on the re @-@ election rules ."
    src, tgt = pipeline.codec("src"), pipeline.codec("tgt")
    assert (src.bpe is tgt.bpe) == joint
    line = "The European Parliament voted on the re-election rules."
    assert src.tokenize(line) == "the European Parliament voted on the re @-@ election rules ."
    ids = src.encode(line)
    assert src.decode_tokenized(ids) == src.tokenize(line)
    assert src.decode(ids) == line
    assert merge_bpe(" ".join(src.tokens(line))) == src.tokenize(line)
    state = json.loads(json.dumps(pipeline.to_state()))
    again = Pipeline.from_state(state)
    assert again.codec("src").encode(line) == ids and again.codec("tgt").decode(ids[:3]) == tgt.decode(ids[:3])
    rebuilt = codec_from_state(json.loads(json.dumps(src.to_state())))
    assert rebuilt.encode(line) == ids and rebuilt.decode(ids) == line
    assert map_lines(src.processor, "tokenize", TRAIN_EN[:5]) == [src.tokenize(x) for x in TRAIN_EN[:5]]


def test_base_codecs_have_tokenised_forms():
    word = WordCodec.train(["a b c"])
    assert word.tokenize("a b  c") == "a b c" and word.decode_tokenized(word.encode("a b")) == "a b"
    bpe = RawTextBPECodec.train(["hello world"] * 3, vocab_size=30)
    assert bpe.tokenize("hello") == " ".join(bpe.tokens("hello"))


def _eu() -> dict:
    return {k: v for k, v in EU.items()}


# -- acceptance on the paper's released test files (skipped without ../shared/data) ---------------------------------


def _match(processor: LanguageProcessor, raw: list[str], ref: list[str]) -> float:
    assert len(raw) == len(ref)
    out = [processor.pretokenize(line) for line in raw]
    return sum(a.lower() == b.lower() for a, b in zip(out, ref, strict=True)) / len(ref)


@pytest.mark.parametrize(
    ("pair", "name", "lang", "minimum"),
    [
        ("es-en", "newstest2013", "en", 0.99),
        ("en-de", "newstest2014", "en", 0.99),
        ("en-de", "newstest2014", "de", 0.97),
    ],
)
def test_tokenisation_matches_the_released_references(shared_data, pair, name, lang, minimum):
    processor = LanguageProcessor(SideSettings(lang, **_eu()))
    raw = read_lines(shared_data / pair / f"{name}.{lang}.gz")
    ref = read_lines(shared_data / "released-outputs" / pair / f"{name}.{lang}.gz")
    rate = _match(processor, raw, ref)
    print(f"{pair} {name}.{lang}: {rate:.2%} of lines equal (case-insensitive)")
    assert rate >= minimum
    assert all(re.search(r"\S @-@ \S", x) is None or "@-@" in x for x in ref[:50])


def test_inverse_pipeline_bleu_matches_table3(shared_data):
    """Detruecase + detokenise the released En-De outputs; sacrebleu (13a) vs the raw newstest2014 German."""
    processor = LanguageProcessor(SideSettings("de", **_eu()))  # the inverse needs no learned model
    ref = read_lines(shared_data / "en-de" / "newstest2014.de.gz")
    paper = {"baseline": 21.0, "average": 21.4, "attentive": 21.7}
    for system, expected in paper.items():
        out = read_lines(shared_data / "released-outputs" / "en-de" / f"newstest2014.{system}.de.gz")
        bleu = sacrebleu.corpus_bleu([processor.detokenize(x) for x in out], [ref]).score
        print(f"{system}: BLEU {bleu:.2f} (paper {expected})")
        assert abs(bleu - expected) <= 0.6, (system, bleu, expected)


def test_map_lines_over_a_process_pool_equals_in_process():
    pipeline = Pipeline(SideSettings("en", **_eu()), SideSettings("de", **_eu()), vocab_size=120, joint_vocab=False)
    pipeline.fit(TRAIN_EN, TRAIN_DE)
    processor = pipeline.codec("src").processor
    lines = TRAIN_EN[:7] + ['A re-election, "again".']
    pooled = map_lines(processor, "tokenize", lines, workers=2, chunk=3)
    assert pooled == [processor.tokenize(line) for line in lines]

"""Scoring: file reading, the t-test, significance tables and the released outputs of the paper (Table 1)."""

from __future__ import annotations

import gzip
import math

import pytest
from omegaconf import OmegaConf

from sarnmt.cli.score import score
from sarnmt.data.text.reading import read_lines
from sarnmt.evaluation.bleu import corpus_bleu, corpus_chrf
from sarnmt.evaluation.significance import marker, paired_t_test, student_t_sf
from sarnmt.evaluation.system_names import system_names

REFS = ["the cat sat on the mat", "a dog barks at night", "it is raining today", "we like green tea"]
GOOD = ["the cat sat on the mat", "a dog barks at night", "it is raining today", "we like tea"]
BAD = ["the cat sat on a rug", "the dog barks", "it rains", "we like green tea"]


def _cfg(ref, hyps, **extra):
    base = {
        "ref": str(ref),
        "hyps": [str(h) for h in hyps],
        "names": None,
        "tokenize": "13a",
        "lowercase": False,
        "n_bootstrap": 200,
        "n_randomization": 200,
        "output": None,
    }
    return OmegaConf.create({**base, **extra})


def test_read_lines_plain_and_gz(tmp_path):
    plain, packed = tmp_path / "a.txt", tmp_path / "a.txt.gz"
    plain.write_text("x y\n\nz\r\n", encoding="utf-8")
    with gzip.open(packed, "wt", encoding="utf-8") as handle:
        handle.write("x y\n\nz\n")
    assert read_lines(plain) == read_lines(packed) == ["x y", "", "z"]
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        read_lines(tmp_path / "nope.txt")


def test_student_t_and_paired_test():
    assert student_t_sf(0.0, 7) == pytest.approx(0.5)
    assert student_t_sf(1.812461, 10) == pytest.approx(0.05, abs=1e-5)  # tables: t_{0.95,10}
    assert student_t_sf(2.763769, 10) == pytest.approx(0.01, abs=1e-5)
    assert student_t_sf(-2.763769, 10) == pytest.approx(0.99, abs=1e-5)
    assert student_t_sf(1.959964, 1e7) == pytest.approx(0.025, abs=1e-5)  # the normal limit
    t, p = paired_t_test([2.0, 3.0, 5.0, 4.0], [1.0, 1.0, 2.0, 3.0])
    assert t == pytest.approx(1.75 / (math.sqrt(0.916666666) / 2), rel=1e-6)
    assert p == pytest.approx(student_t_sf(t, 3))
    assert paired_t_test([1.0, 1.0], [1.0, 1.0]) == (0.0, 1.0)
    assert (marker(0.004), marker(0.03), marker(0.2), marker(None)) == ("**", "*", "", "")


def test_corpus_scores_have_signatures():
    bleu = corpus_bleu(GOOD, REFS, tokenize="none")
    assert 0 < bleu.score < 100 and "tok:none" in bleu.signature
    assert corpus_bleu(REFS, REFS).score == pytest.approx(100.0)
    assert "chrF" in corpus_chrf(GOOD, REFS).signature or "nc:6" in corpus_chrf(GOOD, REFS).signature


def test_score_table_and_line_count_error(tmp_path):
    ref, base, sys = tmp_path / "test.ref", tmp_path / "test.base.txt", tmp_path / "test.good.txt"
    ref.write_text("\n".join(REFS * 5) + "\n")
    base.write_text("\n".join(BAD * 5) + "\n")
    sys.write_text("\n".join(GOOD * 5) + "\n")
    record = score(_cfg(ref, [base, sys], output=str(tmp_path / "out" / "table")))
    assert [row["name"] for row in record["systems"]] == ["base", "good"]
    assert record["systems"][1]["bleu"] > record["systems"][0]["bleu"]
    assert record["systems"][1]["p_t_test"] < 0.01 and "**" in record["table"]
    assert (tmp_path / "out" / "table.md").is_file() and (tmp_path / "out" / "table.json").is_file()
    short = tmp_path / "short.txt"
    short.write_text("one line\n")
    with pytest.raises(ValueError, match=r"short\.txt.*1 lines.*test\.ref.*20"):
        score(_cfg(ref, [base, short]))
    single = score(_cfg(ref, [sys]))
    assert len(single["systems"]) == 1 and single["systems"][0]["ci"] >= 0


def test_bootstrap_and_randomisation_are_two_sided_the_t_test_one_sided(tmp_path):
    """What the module docstring says of the three p-values: a clearly worse system gets small bootstrap and
    randomisation p-values (they test |Δ|) but a one-tailed t-test p near 1; a copy of the baseline gets the
    smallest possible p from both resampling tests (sacrebleu keeps MultEval's convention) and no t-test gain."""
    ref, good, bad, copy = (tmp_path / f"test.{name}.txt" for name in ("ref", "good", "bad", "copy"))
    ref.write_text("\n".join(REFS * 5) + "\n")
    good.write_text("\n".join(GOOD * 5) + "\n")
    bad.write_text("\n".join(BAD * 5) + "\n")
    copy.write_text(good.read_text())
    base, worse, same = score(_cfg(ref, [good, bad, copy]))["systems"]
    assert worse["bleu"] < base["bleu"]
    assert worse["p_bootstrap"] < 0.05 and worse["p_randomization"] < 0.05 and worse["p_t_test"] > 0.95
    assert same["p_bootstrap"] == pytest.approx(1 / 201) and same["p_randomization"] == pytest.approx(1 / 201)
    assert (same["t_statistic"], same["p_t_test"]) == (0.0, 1.0)


def test_streamed_resampling_gives_sacrebleus_numbers(monkeypatch):
    """The bootstrap and the randomisation, drawn block by block in bounded memory, give sacrebleu's PairedTest's
    scores, intervals and p-values exactly (same generator, same draws), over several blocks of uneven length."""
    from sacrebleu.significance import PairedTest

    from sarnmt.evaluation import significance
    from sarnmt.evaluation.bleu import bleu_metric

    monkeypatch.setattr(significance, "BLOCK_DRAWS", 64)  # 32 resamples per block of 20 sentences
    refs, systems = REFS * 5, [BAD * 5, GOOD * 5, (GOOD[:2] + BAD[2:]) * 5]
    names = ["bad", "good", "mixed"]
    results, signature = significance.compare_systems(names, systems, refs, n_bootstrap=100, n_randomization=150)
    named, metrics = list(zip(names, systems, strict=True)), {"BLEU": bleu_metric(refs)}
    _, boot = PairedTest(named, metrics, None, test_type="bs", n_samples=100)()
    _, rand = PairedTest(named, metrics, None, test_type="ar", n_samples=150)()
    for k, row in enumerate(results):
        assert (row.bleu, row.ci) == (boot["BLEU"][k].score, boot["BLEU"][k].ci)
        if k:
            assert (row.p_bootstrap, row.p_randomization) == (boot["BLEU"][k].p_value, rand["BLEU"][k].p_value)
    assert "|bs:100|ar:150|seed:12345|" in signature
    single, signature = significance.compare_systems(names[:1], systems[:1], refs, n_bootstrap=100)
    score = bleu_metric(refs).corpus_score(systems[0], None, n_bootstrap=100)
    assert (single[0].bleu, single[0].ci) == (score.score, score._ci) and "|bs:100|seed:12345|" in signature


def test_system_names():
    assert system_names(["d/nt.baseline.en.gz", "d/nt.attentive.en.gz"]) == ["baseline", "attentive"]
    assert system_names(["a.txt", "a.txt"]) == ["a.txt", "a.txt"]


def test_released_es_en_outputs_give_table1(shared_data):
    folder = shared_data / "released-outputs" / "es-en"
    hyps = [folder / f"newstest2013.{name}.en.gz" for name in ("baseline", "average", "attentive")]
    record = score(_cfg(folder / "newstest2013.en.gz", hyps, tokenize="none", lowercase=True))
    bleu = [row["bleu"] for row in record["systems"]]
    assert [round(b, 2) for b in bleu] == [25.43, 25.70, 26.26]
    assert [f"{b:.1f}" for b in bleu] == ["25.4", "25.7", "26.3"]
    assert "25.4 / 25.7 / 26.3" in record["table"]
    assert record["systems"][2]["p_t_test"] < 0.01  # the attentive model's gain is significant


def test_plain_text_bleu_of_chinese_splits_characters():
    """Chinese plain text has no spaces: 13a would see one token per sentence; the corpus DataModule asks for zh."""
    from hydra.utils import instantiate

    from sarnmt.decoding.split_translation import SplitOutput
    from tests.conftest import compose_train

    assert instantiate(compose_train(["data=mini_en_zh"]).data).bleu_tokenize == "zh"
    assert instantiate(compose_train(["data=multi30k_en_de"]).data).bleu_tokenize == "13a"
    hyps, refs = ["我们今天去北京。", "他很高兴"], ["我们明天去北京。", "他很高兴"]
    zh = SplitOutput(hyps, hyps, refs, refs, 0.0, bleu_tokenize="zh").scores()["bleu"]
    plain = SplitOutput(hyps, hyps, refs, refs, 0.0).scores()["bleu"]
    assert "tok:zh" in zh.signature and zh.score > 40 > plain.score

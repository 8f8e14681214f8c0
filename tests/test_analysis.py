"""The analysis's arithmetic on hand-made inputs with known answers: Figure 2's counts, Algorithm 1's trees, the
branching baselines, ParsEval, the toy corpus's gold trees, Table 7's selection and marking, the agreement probe's
items and bins, and the errors of the files they read."""

from __future__ import annotations

import hashlib
import json
import random

import numpy as np
import pytest

from sarnmt.analysis import AnalysisError
from sarnmt.analysis.agreement import bin_labels, by_bin, probe_items
from sarnmt.analysis.examples import differing, html_page, markdown, select
from sarnmt.analysis.parseval import compare, constituents, score
from sarnmt.analysis.positions import distribution
from sarnmt.analysis.tree_report import read_gold
from sarnmt.analysis.trees import (
    Tree,
    algorithm1,
    brackets,
    left_branching,
    parse_brackets,
    right_branching,
    split_points,
)
from sarnmt.data.corpora.toy import TOY_EXAMPLE, generate_toy_corpus, realize_target, sample_clause, target_tree
from sarnmt.data.corpora.toy_reading import parse_source
from sarnmt.decoding.attention_file import AttentionFileError, read_attention

WORDS = ["w0", "w1", "w2", "w3", "w4"]


def focus_matrix(items: list[int]) -> np.ndarray:
    """A causal attention matrix whose row r puts 0.7 on item ``items[r]`` and spreads the rest over items 0..r."""
    n = len(items)
    matrix = np.zeros((n, n))
    for r, item in enumerate(items):
        matrix[r, : r + 1] = 0.3 / (r + 1)
        matrix[r, item] += 0.7
    return matrix


# -- Figure 2


def test_figure2_counts_each_peak_at_its_relative_position_weighted_by_the_history_length():
    a = focus_matrix([0, 1, 2])  # rows 1 and 2 peak at the previous word (-1), with 2 and 3 items to choose among
    b = focus_matrix([0, 0, 1])  # row 1 peaks at the zero slot (counted apart), row 2 at the first word (-2)
    dist = distribution([a, b])
    assert dist.predictions == 4 and dist.beyond == 0  # the first row of each matrix chooses nothing
    np.testing.assert_array_equal(dist.count[1:4], [2, 1, 0])
    np.testing.assert_allclose(dist.weighted[1:4], [1 / 2 + 1 / 3, 1 / 3, 0])
    assert dist.start == 1 and dist.start_weighted == pytest.approx(1 / 2)
    np.testing.assert_allclose(dist.percent[1:4], [50, 20, 0])  # of 5/6 + 1/3 + 1/2 = 5/3
    assert dist.start_percent == pytest.approx(30)
    np.testing.assert_array_equal(dist.opportunities[1:4], [4, 2, 0])  # -2 exists only for the rows r = 2
    np.testing.assert_allclose(dist.rate[1:3], [0.5, 0.5])
    assert dist.farthest == 2
    short = distribution([a, b], max_distance=1)
    assert short.beyond == 1 and short.count[1] == 2 and short.start == 1


# -- Algorithm 1 and the branching trees


def test_algorithm1_splits_before_every_focused_word():
    # rows 0..5 (5 words + EOS) focus items 0, 1, 1, 3, 3, 5: words 2 (item 3) and 4 (item 5) are focused
    matrix = focus_matrix([0, 1, 1, 3, 3, 5])
    assert split_points(matrix, 5) == [2, 4]
    tree = algorithm1(WORDS, matrix)
    assert brackets(tree) == "(X (X w0 w1) (X (X w2 w3) w4))"
    assert tree.leaves() == WORDS


def test_algorithm1_without_focused_words_gives_one_phrase_and_on_the_previous_word_right_branching():
    assert brackets(algorithm1(WORDS, focus_matrix([0] * 6))) == "(X w0 w1 w2 w3 w4)"
    assert brackets(algorithm1(WORDS, focus_matrix([0, 1, 1, 1, 1, 1]))) == "(X w0 w1 w2 w3 w4)"  # word 0 never splits
    previous = algorithm1(WORDS, focus_matrix([0, 1, 2, 3, 4, 5]))  # the Memory RNN's habit
    assert previous == right_branching(WORDS)
    assert brackets(algorithm1(["a"], focus_matrix([0, 1]))) == "(X a)"
    no_eos = algorithm1(WORDS, focus_matrix([0, 1, 1, 3, 3]))  # the length limit stopped it: no row for word 4
    assert brackets(no_eos) == "(X (X w0 w1) (X w2 w3 w4))"
    with pytest.raises(ValueError, match="5 words need"):
        algorithm1(WORDS, focus_matrix([0, 1, 2]))


def test_branching_trees_are_their_definitions():
    words = ["a", "b", "c", "d"]
    assert brackets(right_branching(words)) == "(X a (X b (X c d)))"  # footnote 4: one word, then the rest
    assert brackets(left_branching(words)) == "(X (X (X a b) c) d)"
    assert constituents(right_branching(words)) == {(0, 4), (1, 4), (2, 4)}
    assert constituents(left_branching(words)) == {(0, 2), (0, 3), (0, 4)}
    assert right_branching(["a"]) == "a" == left_branching(["a"])


# -- Penn Treebank brackets and ParsEval


def test_parse_brackets_reads_ptb_trees_and_names_what_is_wrong():
    tree = parse_brackets("( (S (NP (D la) (N mero)) (V nefuta)) )")
    assert tree.leaves() == ["la", "mero", "nefuta"]
    assert tree.spans()[:3] == [(0, 3), (0, 3), (0, 2)]
    assert parse_brackets("(S (NP a b) c)").brackets() == "(S (NP a b) c)"
    with pytest.raises(ValueError, match="never closed"):
        parse_brackets("(S (NP a b) c")
    with pytest.raises(ValueError, match="text after the tree"):
        parse_brackets("(S a) b")
    with pytest.raises(ValueError, match="starts with"):
        parse_brackets("S a")


def test_parseval_counts_spans_of_two_words_or_more_with_and_without_the_whole_sentence():
    predicted = parse_brackets("(X (X a b) (X c d))")
    gold = parse_brackets("(S (NP (D a) (N b) (A c)) (V d))")
    assert constituents(gold) == {(0, 4), (0, 3)}  # preterminals are single words
    whole = compare(predicted, gold)
    assert (whole.matched, whole.predicted, whole.gold) == (1, 3, 2)
    assert whole.precision == pytest.approx(1 / 3) and whole.recall == pytest.approx(1 / 2)
    inner = compare(predicted, gold, whole_sentence=False)
    assert (inner.matched, inner.predicted, inner.gold, inner.f1) == (0, 2, 1, 0.0)
    same = score([(gold, gold), (predicted, predicted)])
    assert same.precision == same.recall == same.f1 == 1.0 and same.sentences == 2
    unary = parse_brackets("(S (NP (NN a b)) c)")  # a unary chain's span counts once
    assert constituents(unary) == {(0, 3), (0, 2)}
    with pytest.raises(ValueError, match="different words"):
        compare(predicted, parse_brackets("(S a b c e)"))


def test_gold_trees_that_do_not_fit_the_sentences_are_named_by_line():
    sentences = [["a", "b"], [], ["c", "d", "e"]]
    trees = read_gold(["(S a b)", "", "(S (NP c d) e)"], "gold.txt", sentences)
    assert trees[1] is None and isinstance(trees[2], Tree)
    with pytest.raises(AnalysisError, match="gold.txt have 2 lines but there are 3 sentences"):
        read_gold(["(S a b)", ""], "gold.txt", sentences)
    with pytest.raises(AnalysisError, match=r"gold.txt line 3: its words differ .* at word 2: 'x' in the tree, 'd'"):
        read_gold(["(S a b)", "", "(S c x e)"], "gold.txt", sentences)
    with pytest.raises(AnalysisError, match="gold.txt line 1: unbalanced"):
        read_gold(["(S a b", "", "(S c d e)"], "gold.txt", sentences)
    with pytest.raises(AnalysisError, match="gold.txt line 2: a tree for an empty sentence"):
        read_gold(["(S a b)", "(S z)", "(S c d e)"], "gold.txt", sentences)


# -- the toy corpus's gold trees


def _check_np(tree: Tree, allow_rel: bool) -> None:
    """NP -> D N A* [RC] (RC only where allowed, and then at most 2 adjectives; NP' at most 1), RC -> REL NP' V."""
    labels = [c.label for c in tree.children]
    assert tree.label == "NP" and labels[:2] == ["D", "N"], labels
    rel = labels[-1] == "RC"
    adjectives = labels[2 : len(labels) - rel]
    assert set(adjectives) <= {"A"} and len(adjectives) <= (2 if allow_rel else 1)
    assert allow_rel or not rel
    if rel:
        clause = tree.children[-1]
        assert [c.label for c in clause.children] == ["REL", "NP", "V"] and clause.children[0].children == ("ki",)
        _check_np(clause.children[1], allow_rel=False)
    for child in tree.children:
        if child.label in ("D", "N", "A"):
            assert len(child.children) == 1 and isinstance(child.children[0], str)


def test_toy_gold_trees_follow_the_grammar_and_their_leaves_are_the_sentence():
    rng = random.Random(5)
    clauses = [sample_clause(rng) for _ in range(300)] + [parse_source(TOY_EXAMPLE[0])]
    for clause in clauses:
        tree = parse_brackets(target_tree(clause))
        assert tree.leaves() == realize_target(clause).split()
        labels = [c.label for c in tree.children]  # S -> NP NP [PP] V
        assert tree.label == "S" and labels in (["NP", "NP", "V"], ["NP", "NP", "PP", "V"]), labels
        _check_np(tree.children[0], allow_rel=True)
        _check_np(tree.children[1], allow_rel=True)
        if labels[2] == "PP":
            pp = tree.children[2]
            assert [c.label for c in pp.children] == ["NP", "P"]
            _check_np(pp.children[0], allow_rel=False)
    example = target_tree(parse_source(TOY_EXAMPLE[0]))
    assert example.startswith("(S (NP (D ro) (N pamo) (A velok) (RC (REL ki) (NP (D soi) (N mabene)) (V firuko)))")


def test_the_toy_corpus_text_is_unchanged_by_the_trees():
    corpus = generate_toy_corpus(1234, 20000, 500, 500)  # the corpus every toy run trains on
    digest = hashlib.sha256(json.dumps(corpus, sort_keys=True).encode()).hexdigest()
    assert digest == "90d1acb6f5f92d260d73d7761d7296e48a014dcd40e8f3e51d9ea7e8b24b7a5d"


# -- Table 7


def test_differing_marks_the_words_outside_the_common_blocks():
    a, b = "the cat sat on the mat".split(), "the dog sat on a mat".split()
    assert differing(a, b) == ([False, True, False, False, True, False], [False, True, False, False, True, False])
    assert differing(["x"], []) == ([True], [])


def test_table7_selects_wins_and_losses_by_sentence_bleu_and_escapes_the_text():
    refs = ["the cat sat on the mat", "a dog ran in the park", "one two three four five", "x y z w"]
    base = ["the cat sat on mat", "a dog ran in the park", "one two three four five", "x y z w"]
    system = ["the cat sat on the mat", "dog a ran park", "one two three four five", "x | <b> & w"]
    selected = select(refs, refs, system, base, count=2, min_words=1)
    assert [e.line for e in selected["better"]] == [1] and [e.line for e in selected["worse"]] == [4, 2]
    assert selected["better"][0].bleu[0] == pytest.approx(100.0) and selected["better"][0].bleu[1] < 100
    md = markdown(selected, ("system", "baseline"))
    assert "*x* \\| \\<b\\> \\&" not in md and "x *\\| \\<b\\> &* w" in md
    page = html_page(selected, ("system", "base<line>"), "t")
    assert "&lt;b&gt; &amp;" in page and "<b>" not in page and "base&lt;line&gt;" in page
    assert "<em>| &lt;b&gt; &amp;</em>" in page


# -- agreement probe


def test_agreement_items_bins_and_labels():
    src, tgt = TOY_EXAMPLE
    (item,) = probe_items([src], "toy.src")
    assert item.reference == tuple(tgt.split()) and item.distance == len(tgt.split()) - 2 == 13
    assert item.forms[item.agreement] == tgt.split()[-1]
    with pytest.raises(AnalysisError, match="toy.src line 2: not a toy-corpus source sentence"):
        probe_items([src, "hello world"], "toy.src")
    assert bin_labels([0, 6, 9]) == ["0-5", "6-8", "9+"] and bin_labels([3, 4]) == ["3", "4+"]
    cells = by_bin(np.array([1, 5, 6, 10, 12]), np.array([True, False, True, True, False]), [0, 6, 9, 20])
    assert cells[:3] == [(2, 0.5), (1, 1.0), (2, 0.5)] and cells[3][0] == 0 and np.isnan(cells[3][1])


# -- attention files


def test_attention_files_that_are_not_translate_records_are_named_by_line(tmp_path):
    good = {
        "line": 0,
        "source": ["a", "</s>"],
        "target": ["x", "</s>"],
        "target_ids": [5],
        "score": -1.0,
        "normalized_score": -0.5,
        "src_attention": [[0.5, 0.5], [0.1, 0.9]],
        "tgt_attention": [[1.0, 0.0], [0.3, 0.7]],
    }
    path = tmp_path / "att.jsonl"
    path.write_text(json.dumps(good) + "\n")
    (record,) = read_attention(path)
    assert record.words == ["x"] and record.rows == 2 and record.tgt_attention.shape == (2, 2)
    cases = [
        ("{not json", "line 2: truncated or not valid JSON"),
        ("[" * 100_000, r"line 2 nests deeper than 64 levels \(100000\)"),
        (json.dumps({**good, "line": 1, "tgt_attention": [[1.0]]}), r"line 2: 'tgt_attention' has shape \(1, 1\)"),
        (json.dumps({k: v for k, v in good.items() if k != "source"} | {"line": 1}), "line 2: no 'source' key"),
        (json.dumps({**good, "line": 5}), "line 2: its 'line' is 5, expected 1"),
    ]
    for text, message in cases:
        path.write_text(json.dumps(good) + "\n" + text + "\n")
        with pytest.raises(AttentionFileError, match=message):
            read_attention(path)
    with pytest.raises(AttentionFileError, match="does not exist"):
        read_attention(tmp_path / "missing.jsonl")

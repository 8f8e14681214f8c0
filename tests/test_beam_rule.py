"""The beam search rule (sarnmt.decoding.rule) on hand-made log-probabilities: candidates, finished hypotheses and
pruning, each worked out by hand (the loop's end-to-end cases are in test_beam.py)."""

from __future__ import annotations

import math

import pytest
import torch

from sarnmt.data.text.codecs import EOS
from sarnmt.decoding.penalties import LengthPenalty
from sarnmt.decoding.rule import BeamRule, Finished

NEG_INF = -math.inf
# one sentence, two live slots (running sums .6 and .4), a vocabulary of EOS and the words 1, 2; k = 2:
# slot 0 continues with EOS .5, 1 .35, 2 .15 (.3, .21, .09); slot 1 with EOS .1, 1 .6, 2 .3 (.04, .24, .12)
PROBS = [[[0.5, 0.35, 0.15], [0.1, 0.6, 0.3]]]
SUMS = [[0.6, 0.4]]


def logs(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float).log()


def step(t: int) -> torch.Tensor:
    """Step t as the loop hands it to the rule: a long tensor of shape ()."""
    return torch.tensor(t)


def two_slot_candidates(rule: BeamRule, t: int = 2):
    return rule.candidates(logs(PROBS), logs(SUMS), step(t))


def test_candidates_are_the_best_2k_continuations_over_all_slots():
    cand = two_slot_candidates(BeamRule(2, LengthPenalty()))
    assert cand.tokens.tolist() == [[EOS, 1, 1, 2]]
    assert cand.parents.tolist() == [[0, 1, 0, 1]]
    torch.testing.assert_close(cand.scores, logs([[0.3, 0.24, 0.21, 0.12]]))
    assert cand.is_eos.tolist() == [[True, False, False, False]] and cand.ranks.tolist() == [0, 1, 2, 3]


def test_min_len_forbids_eos_only_while_hypotheses_are_too_short():
    rule = BeamRule(2, LengthPenalty(), min_len=2)
    assert EOS not in two_slot_candidates(rule, t=2).tokens.tolist()[0]  # one token so far: too few
    assert two_slot_candidates(rule, t=3).tokens.tolist()[0][0] == EOS  # two tokens: EOS may end it


def test_a_vocabulary_smaller_than_2k_is_padded_with_impossible_candidates():
    cand = BeamRule(2, LengthPenalty()).candidates(logs([[[0.7, 0.3]]]), torch.zeros(1, 1), step(1))
    assert cand.scores.shape == (1, 4) and cand.scores[0, 2:].tolist() == [NEG_INF, NEG_INF]
    assert cand.tokens.tolist()[0][:2] == [EOS, 1] and cand.parents.tolist() == [[0, 0, 0, 0]]
    beam = BeamRule(2, LengthPenalty()).prune(cand)  # one real word: the second slot is empty
    assert beam.tokens.tolist()[0][0] == 1 and beam.scores[0, 1].item() == NEG_INF


def test_an_eos_within_the_top_k_finishes_normalised_by_its_length():
    rule = BeamRule(2, LengthPenalty())
    pool = Finished.empty(2, 2, torch.device("cpu"))
    full = rule.finish(pool, two_slot_candidates(rule), torch.tensor([1]), torch.tensor([False]), step(2))
    assert full.tolist() == [False]  # one of k = 2 places taken
    assert pool.norm[1].tolist() == pytest.approx([math.log(0.3) / 2, NEG_INF])
    assert pool.raw[1, 0].item() == pytest.approx(math.log(0.3)) and pool.ref[1, 0].tolist() == [2, 0]
    assert pool.norm[0].tolist() == [NEG_INF, NEG_INF]  # sentence 0 was not active
    # an EOS ranked below the top k does not finish (slot 1's word 1 .3, slot 0's word 1 .25, then its EOS .2)
    cand = rule.candidates(logs([[[0.4, 0.5, 0.1], [0.1, 0.6, 0.3]]]), logs([[0.5, 0.5]]), step(2))
    assert cand.tokens.tolist()[0][2] == EOS
    empty = Finished.empty(1, 2, torch.device("cpu"))
    assert not rule.finish(empty, cand, torch.tensor([0]), torch.tensor([False]), step(2))
    pool = Finished.empty(1, 2, torch.device("cpu"))
    rule.finish(pool, cand, torch.tensor([0]), torch.tensor([False]), step(2))
    assert pool.norm.tolist() == [[NEG_INF, NEG_INF]]


def test_at_the_length_limit_every_candidate_finishes_and_the_pool_keeps_the_k_best():
    rule = BeamRule(2, LengthPenalty(alpha=0.0))  # raw scores
    pool = Finished.empty(1, 2, torch.device("cpu"))
    rule.finish(pool, two_slot_candidates(rule), torch.tensor([0]), torch.tensor([False]), step(2))  # EOS .3 joins
    # candidates .4 (slot 1's word 2), .25, .2 (slot 0's words), .05: the best two of them and .3 are .4 and .3
    cand = rule.candidates(logs([[[0.1, 0.5, 0.4], [0.1, 0.1, 0.8]]]), logs([[0.5, 0.5]]), step(3))
    full = rule.finish(pool, cand, torch.tensor([0]), torch.tensor([True]), step(3))
    assert full.tolist() == [True]
    assert pool.raw.tolist()[0] == pytest.approx([math.log(0.4), math.log(0.3)])  # best first, the old one kept
    assert pool.ref.tolist() == [[[3, 0], [2, 0]]]
    # GNMT's penalty divides by ((5 + t) / 6) ** 0.6
    pool = Finished.empty(1, 2, torch.device("cpu"))
    BeamRule(2, LengthPenalty(0.6, 5.0)).finish(pool, cand, torch.tensor([0]), torch.tensor([True]), step(3))
    assert pool.norm[0, 0].item() == pytest.approx(math.log(0.4) / (8 / 6) ** 0.6)


def test_pruning_keeps_the_best_k_that_are_not_eos():
    beam = BeamRule(2, LengthPenalty()).prune(two_slot_candidates(BeamRule(2, LengthPenalty())))
    assert beam.tokens.tolist() == [[1, 1]] and beam.parents.tolist() == [[1, 0]] and beam.choice.tolist() == [[1, 2]]
    torch.testing.assert_close(beam.scores, logs([[0.24, 0.21]]))
    greedy = BeamRule(1, LengthPenalty()).prune(two_slot_candidates(BeamRule(1, LengthPenalty())))
    assert greedy.tokens.tolist() == [[1]] and greedy.parents.tolist() == [[1]]  # k = 1: the best non-EOS

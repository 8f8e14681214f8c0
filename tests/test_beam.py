"""Beam search: hand-worked cases on a scripted decoder, beam 1 = greedy and attention bookkeeping on real models."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch
from omegaconf import OmegaConf
from torch import Tensor, nn

from sarnmt.data.loading.batching import pad_sequences
from sarnmt.data.text.codecs import EOS
from sarnmt.decoding.beam import BeamSearch, beam_decode, run_search
from sarnmt.decoding.greedy import GreedySearch, greedy_decode
from sarnmt.decoding.penalties import LengthPenalty, max_lengths
from sarnmt.decoding.rule import BeamRule, Candidates
from sarnmt.decoding.search import NEG_INF, build_search
from sarnmt.errors import InputError
from sarnmt.models.skeleton import StepOutput
from tests import model_helpers
from tests.conftest import SYSTEM_IDS, SYSTEMS

V = 5  # 0 = EOS, words 1..4

# Per-sentence probability tables: prefix -> {token: p}; a prefix not listed ends the sentence ({EOS: 1}).
# A: greedy takes 1 (.5) then 3 (.4) = .2; beam 2 finds [2] = .4 * .9 = .36 (normalised: log(.36)/2 > log(.2)/3).
CASE_A = {(): {1: 0.5, 2: 0.4, EOS: 0.1}, (1,): {3: 0.4, 4: 0.35, EOS: 0.25}, (2,): {EOS: 0.9, 4: 0.1}}
# B: raw scores prefer [2] (.405) over [1,3,4] (.396); divided by the length incl. EOS, [1,3,4] wins (= greedy).
CASE_B = {
    (): {1: 0.55, 2: 0.45},
    (1,): {3: 0.8, 4: 0.2},
    (2,): {EOS: 0.9, 3: 0.1},
    (1, 3): {4: 0.9, EOS: 0.1},
    (1, 4): {4: 1.0},
}
# C: the length limit (2 tokens) stops [1, 2] before its EOS; the early EOS (p=.1, rank 2 of 2) finishes.
CASE_C = {(): {1: 0.9, EOS: 0.1}, (1,): {2: 0.9, EOS: 0.1}, (1, 2): {2: 1.0}}
# D: EOS first (empty output).
CASE_D = {(): {EOS: 0.7, 3: 0.3}}


@dataclass(frozen=True)
class ScriptedState:
    """:param prefix: tokens so far, shape (N, t)."""

    prefix: Tensor

    def reorder(self, index: Tensor) -> ScriptedState:
        return ScriptedState(self.prefix.index_select(0, index))


@dataclass(frozen=True)
class ScriptedMemory:
    """:param case: each sentence's table id, shape (N,).  :param length: real source length, shape (N,).
    :param beams: decoder-state rows per sentence (as :class:`~sarnmt.models.state.SourceMemory`)."""

    case: Tensor
    length: Tensor
    beams: int = 1

    def reorder(self, index: Tensor) -> ScriptedMemory:
        return ScriptedMemory(self.case.index_select(0, index), self.length.index_select(0, index), self.beams)

    def with_beams(self, beams: int) -> ScriptedMemory:
        return ScriptedMemory(self.case, self.length, beams)


def scripted_src_attention(prefix: tuple[int, ...], length: int, width: int) -> Tensor:
    """A one-hot source attention row that depends on the whole prefix (to catch rows that miss a reorder)."""
    row = torch.zeros(width)
    row[(sum(prefix) * 7 + len(prefix)) % length] = 1.0
    return row


def scripted_tgt_attention(prefix: tuple[int, ...]) -> Tensor:
    """History attention over items 0..t-1 at step t = len(prefix) + 1."""
    row = torch.zeros(len(prefix) + 1)
    row[sum(prefix) % (len(prefix) + 1)] = 1.0
    return row


class ScriptedDecoder(nn.Module):
    """The ``encode``/``step`` interface of Seq2Seq with fixed probability tables; ``src[:, 0]`` picks the table."""

    def __init__(self, cases: list[dict[tuple[int, ...], dict[int, float]]]) -> None:
        super().__init__()
        self.cases = cases

    def encode(self, src: Tensor, src_mask: Tensor) -> tuple[ScriptedMemory, ScriptedState]:
        memory = ScriptedMemory(case=src[:, 0].clone(), length=src_mask.sum(1))
        return memory, ScriptedState(prefix=src.new_zeros(src.size(0), 0))

    def step(self, prev_tokens: Tensor | None, state: ScriptedState, memory: ScriptedMemory) -> StepOutput:
        prefix = state.prefix if prev_tokens is None else torch.cat([state.prefix, prev_tokens[:, None]], dim=1)
        rows, width = prefix.size(0), int(memory.length.max())
        logits = torch.full((rows, V), -math.inf)
        src_attn, tgt_attn = torch.zeros(rows, width), torch.zeros(rows, prefix.size(1) + 1)
        cases, lengths = (memory.case.repeat_interleave(memory.beams), memory.length.repeat_interleave(memory.beams))
        rows_info = zip(cases.tolist(), lengths.tolist(), prefix.tolist(), strict=True)
        for r, (case, length, p) in enumerate(rows_info):
            for token, prob in self.cases[case].get(tuple(p), {EOS: 1.0}).items():
                logits[r, token] = math.log(prob)
            src_attn[r] = scripted_src_attention(tuple(p), length, width)
            tgt_attn[r] = scripted_tgt_attention(tuple(p))
        return StepOutput(logits=logits, state=ScriptedState(prefix), src_attention=src_attn, tgt_attention=tgt_attn)


def scripted_batch(cases: list[int], lengths: list[int]) -> tuple[Tensor, Tensor]:
    """Sources of ``lengths`` real positions (EOS included) whose first token names the case."""
    return pad_sequences([[case] + [1] * (length - 2) for case, length in zip(cases, lengths, strict=True)])


SCRIPTED = ScriptedDecoder([CASE_A, CASE_B, CASE_C, CASE_D])
RAW = LengthPenalty(alpha=0.0)


def decode(cases, beam_size, penalty=RAW, lengths=None, max_len_b=10):
    src, src_mask = scripted_batch(cases, lengths or [3] * len(cases))
    return beam_decode(SCRIPTED, src, src_mask, beam_size, penalty, 0.0, max_len_b, return_attention=True)


def test_beam_finds_what_greedy_misses():
    src, src_mask = scripted_batch([0], [3])
    assert greedy_decode(SCRIPTED, src, src_mask).tokens == [[1, 3]]
    for penalty in (RAW, LengthPenalty()):
        hyps = decode([0], 2, penalty)
        assert hyps.tokens == [[2]]
        assert hyps.scores[0] == pytest.approx(math.log(0.36), abs=1e-6)
    assert decode([0], 2, LengthPenalty()).normalized_scores[0] == pytest.approx(math.log(0.36) / 2, abs=1e-6)


def test_length_normalisation_changes_the_winner():
    raw, normalised = decode([1], 2, RAW), decode([1], 2, LengthPenalty())
    assert raw.tokens == [[2]] and raw.scores[0] == pytest.approx(math.log(0.405), abs=1e-6)
    assert normalised.tokens == [[1, 3, 4]]
    assert normalised.scores[0] == pytest.approx(math.log(0.396), abs=1e-6)
    assert normalised.normalized_scores[0] == pytest.approx(math.log(0.396) / 4, abs=1e-6)  # 3 words + EOS
    gnmt = LengthPenalty(alpha=0.6, offset=5.0)
    assert gnmt(torch.tensor(-1.0), torch.tensor(4)).item() == pytest.approx(-1.0 / (9 / 6) ** 0.6)


def test_length_limit_and_eos_handling():
    limited = decode([2], 2, LengthPenalty(), lengths=[2], max_len_b=2)
    assert limited.tokens == [[1, 2]]  # stopped by the limit: no EOS, two attention rows
    assert limited.scores[0] == pytest.approx(math.log(0.81), abs=1e-6)
    assert limited.src_attention[0].shape == (2, 2) and limited.tgt_attention[0].shape == (2, 2)
    empty = decode([3], 3, LengthPenalty())
    assert empty.tokens == [[]] and empty.scores[0] == pytest.approx(math.log(0.7), abs=1e-6)
    assert empty.src_attention[0].shape == (1, 3)  # the EOS step's row
    # an EOS outside the top k is not finished (k = 1: greedy continues with the argmax)
    assert decode([2], 1, RAW, lengths=[2], max_len_b=3).tokens == [[1, 2, 2]]


def test_batched_equals_one_at_a_time_and_attention_follows_hypotheses():
    cases, lengths = [0, 1, 2, 3, 1], [3, 4, 2, 5, 2]
    for beam_size in (1, 2, 3):
        batched = decode(cases, beam_size, LengthPenalty(), lengths)
        for i, (case, length) in enumerate(zip(cases, lengths, strict=True)):
            single = decode([case], beam_size, LengthPenalty(), [length])
            assert batched.tokens[i] == single.tokens[0]
            assert batched.scores[i] == pytest.approx(single.scores[0], abs=1e-6)
            out = batched.tokens[i] + ([EOS] if batched.src_attention[i].size(0) > len(batched.tokens[i]) else [])
            prefixes = [tuple(out[:t]) for t in range(len(out))]
            expect_src = torch.stack([scripted_src_attention(p, length, length) for p in prefixes])
            torch.testing.assert_close(batched.src_attention[i], expect_src)
            expect_tgt = torch.zeros(len(out), len(out))
            for t, p in enumerate(prefixes):
                expect_tgt[t, : t + 1] = scripted_tgt_attention(p)
            torch.testing.assert_close(batched.tgt_attention[i], expect_tgt)


def test_max_lengths_and_bad_settings():
    mask = torch.tensor([[True, True, True], [True, False, False]])
    assert max_lengths(mask, 2.0, 1).tolist() == [7, 3]
    assert max_lengths(mask, 0.0, 0).tolist() == [1, 1]
    with pytest.raises(InputError, match=r"^decoding\.beam_size=0: must be 1 or more$"):  # where it enters
        build_search({"_target_": "sarnmt.decoding.beam.BeamSearch", "beam_size": 0})
    with pytest.raises(ValueError, match="alpha"):
        LengthPenalty(alpha=-1.0)


def _real_batch(seed: int = 3, sentences: int = 8):
    gen = torch.Generator().manual_seed(seed)
    srcs = [
        torch.randint(2, model_helpers.VOCAB, (int(n),), generator=gen).tolist()
        for n in torch.randint(1, 9, (sentences,), generator=gen)
    ]
    return pad_sequences(srcs)


def test_nbest_lists_the_pool_best_first():
    """Case A with k = 3: the finished pool is [2] (.36), [1, 3] (.2·1: its EOS follows), [1, 4] ...; n = 2 gives the
    two best by normalised score, the first being the 1-best."""
    src, src_mask = scripted_batch([0, 3], [3, 3])
    hyps = beam_decode(SCRIPTED, src, src_mask, 3, LengthPenalty(), 0.0, 10, nbest=2)
    assert hyps.tokens == [[2], []]
    first, second = hyps.nbest[0]
    assert first.tokens == [2] and first.score == pytest.approx(math.log(0.36), abs=1e-6)
    assert first.normalized_score == pytest.approx(hyps.normalized_scores[0])
    assert second.normalized_score <= first.normalized_score and second.tokens != first.tokens
    want = {(1, 3): math.log(0.5 * 0.4), (1, 4): math.log(0.5 * 0.35), (1,): math.log(0.5 * 0.25)}
    assert second.score == pytest.approx(want[tuple(second.tokens)], abs=1e-6)
    assert [e.tokens for e in hyps.nbest[1]][0] == []  # case D: EOS first
    assert beam_decode(SCRIPTED, src, src_mask, 3, LengthPenalty(), 0.0, 10).nbest == []  # only when asked


def test_minimum_length_forbids_early_eos():
    """Case D ends at once (EOS .7); with min_len=1 the first token must be 3. Case C's EOS at step 2 (after one
    token) is allowed with min_len=1 and forbidden with min_len=2."""
    src, src_mask = scripted_batch([3], [3])
    assert greedy_decode(SCRIPTED, src, src_mask).tokens == [[]]
    assert greedy_decode(SCRIPTED, src, src_mask, min_len=1).tokens == [[3]]
    src, src_mask = scripted_batch([2], [3])
    one = beam_decode(SCRIPTED, src, src_mask, 2, RAW, 0.0, 10, nbest=2, min_len=1)
    two = beam_decode(SCRIPTED, src, src_mask, 2, RAW, 0.0, 10, nbest=2, min_len=2)
    assert [1] in [e.tokens for e in one.nbest[0]]
    assert all(len(e.tokens) >= 2 for e in two.nbest[0])
    with pytest.raises(InputError, match=r"^decoding\.min_len=-1: must be 0 or more$"):  # where it enters
        build_search({"_target_": "sarnmt.decoding.greedy.GreedySearch", "min_len": -1})


@pytest.mark.parametrize(("system", "name", "override"), SYSTEMS, ids=SYSTEM_IDS)
def test_real_models_beam1_is_greedy_and_attention_matches_teacher_forcing(system, name, override):
    model = model_helpers.build_system(system, name, override, scale=6.0)
    src, src_mask = _real_batch()
    greedy = GreedySearch(max_len_a=1.0, max_len_b=4)(model, src, src_mask, return_attention=True)
    beam1 = BeamSearch(1, LengthPenalty(), 1.0, 4)(model, src, src_mask, return_attention=True)
    assert beam1.tokens == greedy.tokens
    assert beam1.scores == pytest.approx(greedy.scores, abs=1e-4)
    beam = BeamSearch(3, LengthPenalty(), 1.0, 4)(model, src, src_mask, return_attention=True)
    plain = BeamSearch(3, LengthPenalty(), 1.0, 4)(model, src, src_mask)
    assert plain.tokens == beam.tokens and plain.src_attention == [] == plain.tgt_attention
    lengths = src_mask.sum(1).tolist()
    for i, tokens in enumerate(beam.tokens):
        if forced_free := not beam.src_attention:  # no source attention (the fixed-context LSTM)
            assert model.encode(src, src_mask)[0].annotations.size(1) == 1
        limit = int(max_lengths(src_mask[i : i + 1], 1.0, 4)[0])  # a hypothesis cut by the limit has no EOS
        steps = len(tokens) + (len(tokens) < limit) if forced_free else beam.src_attention[i].size(0)
        assert steps in (len(tokens), len(tokens) + 1)
        tgt = torch.tensor([tokens + [EOS] * (steps - len(tokens))])
        forced = model(src[i : i + 1, : lengths[i]], src_mask[i : i + 1, : lengths[i]], tgt)
        if not forced_free:
            torch.testing.assert_close(beam.src_attention[i], forced.src_attention[0], atol=1e-5, rtol=0)
            torch.testing.assert_close(beam.src_attention[i].sum(1), torch.ones(steps, dtype=torch.float64))
        if forced.tgt_attention is not None:
            torch.testing.assert_close(beam.tgt_attention[i], forced.tgt_attention[0], atol=1e-5, rtol=0)
            torch.testing.assert_close(beam.tgt_attention[i].sum(1), torch.ones(steps, dtype=torch.float64))
        else:
            assert beam.tgt_attention == []
        log_probs = torch.log_softmax(forced.logits[0], -1).gather(1, tgt[0][:, None]).sum().item()
        assert beam.scores[i] == pytest.approx(log_probs, abs=1e-4)


# -- the rule is handed to the loop (fairseq's Search): a new strategy is a new rule, not an edit of the loop -----


class WithoutTwo(BeamRule):
    """dl4mt's rule, but word 2 is never a candidate (a rule the project does not ship)."""

    def candidates(self, log_probs: Tensor, beam_scores: Tensor, t: Tensor) -> Candidates:
        log_probs[..., 2] = NEG_INF
        return super().candidates(log_probs, beam_scores, t)


def test_a_rule_handed_to_the_search_changes_what_it_finds_and_is_recorded():
    src, src_mask = scripted_batch([0, 1], [3, 3])
    plain, other = BeamSearch(2), BeamSearch(2, rule=WithoutTwo)
    assert plain(SCRIPTED, src, src_mask).tokens == [[2], [1, 3, 4]]  # CASE_A's beam answer is [2]
    assert other(SCRIPTED, src, src_mask).tokens == [[1, 3], [1, 3, 4]]  # without 2: the best that remains
    # the same search as the loop's own rule: run_search under BeamRule is beam_decode
    want = beam_decode(SCRIPTED, src, src_mask, 2)
    got = run_search(SCRIPTED, src, src_mask, BeamRule(2, LengthPenalty()))
    assert (got.tokens, got.scores) == (want.tokens, want.scores)
    assert "rule" not in plain.settings()  # the default's records read as before
    assert other.settings()["rule"] == f"{WithoutTwo.__module__}.WithoutTwo"


def test_a_configured_rule_is_built_by_hydra_and_a_wrong_one_is_named():
    node = OmegaConf.create(
        {
            "_target_": "sarnmt.decoding.beam.BeamSearch",
            "beam_size": 2,
            "rule": {"_target_": "tests.test_beam.WithoutTwo", "_partial_": True},
        }
    )
    src, src_mask = scripted_batch([0], [3])
    assert build_search(node)(SCRIPTED, src, src_mask).tokens == [[1, 3]]
    with pytest.raises(InputError, match=r"rule: .*WithoutTwo built a rule of beam size 3, the search's is 2"):
        BeamSearch(2, rule=lambda _k, penalty, min_len: WithoutTwo(3, penalty, min_len))


def test_captured_steps_are_kept_per_rule_not_per_beam_size():
    from sarnmt.decoding.captured import search_graphs
    from sarnmt.utils.graphs import Eager

    model = nn.Linear(1, 1)  # search_graphs reads only the parameters' addresses
    cpu = torch.device("cpu")
    one = search_graphs(model, BeamRule(2, LengthPenalty()), cpu, Eager())
    assert search_graphs(model, BeamRule(2, LengthPenalty()), cpu, Eager()) is one
    assert search_graphs(model, WithoutTwo(2, LengthPenalty()), cpu, Eager()) is not one
    assert search_graphs(model, BeamRule(2, LengthPenalty(), min_len=1), cpu, Eager()) is not one

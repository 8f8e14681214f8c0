"""The beam search rule (docs/models.md §Decoding), apart from the loop that runs it (:mod:`sarnmt.decoding.beam`),
as fairseq keeps ``search.py`` apart from ``sequence_generator.py``.

For n live sentences of w live slots each (w = 1 at the first step, k afterwards), one step of the rule:

1. **candidates** (:meth:`BeamRule.candidates`): the step's log-probabilities are added to the slots' running sums
   and the best **2k** continuations over w × V are kept per sentence, so that hypotheses ending in EOS never
   shrink the live beam (fairseq's rule); EOS is forbidden while a hypothesis has fewer than ``min_len`` tokens;
2. **finished hypotheses** (:meth:`BeamRule.finish`): an EOS candidate ranked within the top k finishes, and at the
   sentence's length limit every candidate does; its summed log-probability is normalised by the length penalty
   (:class:`~sarnmt.decoding.penalties.LengthPenalty`, length t: EOS included when it was emitted) and merged into
   the sentence's pool of the k best finished hypotheses (:class:`Finished`);
3. **pruning** (:meth:`BeamRule.prune`): the best k candidates that are not EOS become the live beam (:class:`Beam`).

With k = 1 the candidates are the top 2, an EOS finishes only when it is the argmax, and the live hypothesis is
extended by the argmax otherwise: greedy search. The rule holds only its settings; what a search accumulates lives
in the objects it returns and in the pool that the loop owns.

The loop asks a rule for nothing but these three stages (:class:`SearchRule`, fairseq's ``Search`` interface), so
another strategy is another rule handed to the loop (:func:`~sarnmt.decoding.beam.run_search`, or
``+decoding.rule={_target_: my.Rule, _partial_: true}`` on the command line), not an edit of the loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from sarnmt.data.text.codecs import EOS
from sarnmt.decoding.penalties import LengthPenalty
from sarnmt.decoding.search import NEG_INF


@dataclass(slots=True)
class Candidates:
    """One step's candidates: n live sentences, c = 2k candidates each, best first.

    :param scores: running log-probability sums, shape (n, c); -inf for the padding of a vocabulary smaller than
        2k, which extends nothing real.  :param tokens: shape (n, c).
    :param parents: the live slot (0..w-1) each candidate extends, shape (n, c).
    :param is_eos: whether each candidate is EOS, shape (n, c).  :param ranks: 0..c-1, shape (c,).
    """

    scores: Tensor
    tokens: Tensor
    parents: Tensor
    is_eos: Tensor
    ranks: Tensor


@dataclass(slots=True)
class Beam:
    """The live hypotheses after pruning: k slots for each of n sentences.

    :param scores: running log-probability sums, shape (n, k); -inf for an empty slot, which never extends.
    :param tokens: the token each slot ends with, shape (n, k).
    :param parents: the slot of the previous step each extends, shape (n, k).
    :param choice: the candidate index (0..c-1) each slot took, shape (n, k), for the trace-back.
    """

    scores: Tensor
    tokens: Tensor
    parents: Tensor
    choice: Tensor


@dataclass(slots=True)
class Finished:
    """Every sentence's pool of its k best finished hypotheses, best first (B sentences, -inf: an empty place).

    :param norm: normalised scores (what the search ranks by), shape (B, k).
    :param raw: their summed log-probabilities, shape (B, k).
    :param ref: where each ended, shape (B, k, 2): the step t (1-based) and the candidate index, for the trace-back.
    """

    norm: Tensor
    raw: Tensor
    ref: Tensor

    @classmethod
    def empty(cls, batch: int, beam_size: int, device: torch.device) -> Finished:
        """An empty pool of ``beam_size`` places for each of ``batch`` sentences."""
        return cls(
            norm=torch.full((batch, beam_size), NEG_INF, device=device),
            raw=torch.full((batch, beam_size), NEG_INF, device=device),
            ref=torch.zeros(batch, beam_size, 2, dtype=torch.long, device=device),
        )

    def merge(
        self, active: Tensor | None, norm: Tensor, raw: Tensor, ref: Tensor, live: Tensor | None = None
    ) -> Tensor:
        """Keep the k best of the active sentences' pools and new hypotheses (in place).

        :param active: the sentences (rows of the pool) that the new hypotheses belong to, shape (n,); None: every
            sentence, in order (n = B; the search that keeps its shapes).
        :param norm: the new hypotheses' normalised scores, shape (n, c) (-inf: not finished).
        :param raw: their summed log-probabilities, shape (n, c).  :param ref: where they end, shape (n, c, 2).
        :param live: whether each of the n sentences still searches, shape (n,); a pool whose sentence is done is
            left as it was (None: all of them search).
        :returns: the active sentences' pools' normalised scores, shape (n, k), best first.
        """
        n, k = norm.size(0), self.norm.size(1)
        old = [self.norm, self.raw, self.ref]
        if active is not None:
            old = [pool[active] for pool in old]
        best, chosen = torch.cat([old[0], norm], dim=1).topk(k, dim=1)
        merged_raw = torch.cat([old[1], raw], dim=1).gather(1, chosen)
        merged_ref = torch.cat([old[2], ref], dim=1).gather(1, chosen.unsqueeze(2).expand(n, k, 2))
        if live is not None:
            keep = live.unsqueeze(1)
            best = torch.where(keep, best, old[0])
            merged_raw = torch.where(keep, merged_raw, old[1])
            merged_ref = torch.where(keep.unsqueeze(2), merged_ref, old[2])
        if active is None:
            self.norm, self.raw, self.ref = best, merged_raw, merged_ref
        else:
            self.norm[active] = best
            self.raw[active] = merged_raw
            self.ref[active] = merged_ref
        return best


class SearchRule(Protocol):
    """What the search loop asks of a rule, one step of n sentences at a time (the module's docstring has the
    stages; :class:`BeamRule` is the one this project ships). The loop keeps ``beam_size`` live slots and a pool of
    ``beam_size`` finished hypotheses per sentence, and records c = 2 · ``beam_size`` candidates a step; a rule holds
    only its settings (a captured search keeps one capture per rule, keyed by its type and ``repr``, which must
    therefore name every setting).

    The step t is handed to every stage as a long tensor of shape () on the search's device, in every search alike:
    a stage reads it there (a comparison, a mask, a product), never on the host, so that the same stage runs in a
    step launched from Python and in one replayed from a capture.
    """

    beam_size: int

    def candidates(self, log_probs: Tensor, beam_scores: Tensor, t: Tensor) -> Candidates:
        """Stage 1 from float32 log-probabilities, shape (n, w, V); ``beam_scores`` (n, w)."""
        ...

    def candidates_from_logits(self, logits: Tensor, beam_scores: Tensor, t: Tensor) -> Candidates:
        """Stage 1 from the step's logits, shape (n, w, V), in their own dtype; ``beam_scores`` (n, w)."""
        ...

    def finish(
        self,
        pool: Finished,
        cand: Candidates,
        active: Tensor | None,
        at_limit: Tensor,
        t: Tensor,
        live: Tensor | None = None,
    ) -> Tensor:
        """Stage 2: merge the finishing candidates into ``pool``; whether each sentence's pool is full, (n,)."""
        ...

    def prune(self, cand: Candidates) -> Beam:
        """Stage 3: the live beam, ``beam_size`` slots a sentence."""
        ...


# what a search config's ``rule`` builds: called with (beam_size, length_penalty, min_len)
RuleFactory = Callable[[int, LengthPenalty, int], SearchRule]


class BeamRule:
    """dl4mt's beam rule with fairseq's 2k candidates (the module's docstring has the three stages).

    :param beam_size: k >= 1.  :param length_penalty: ranks finished hypotheses.
    :param min_len: m >= 0: no EOS while a hypothesis has fewer than m tokens.
    """

    def __init__(self, beam_size: int, length_penalty: LengthPenalty, min_len: int = 0) -> None:
        self.beam_size, self.length_penalty, self.min_len = beam_size, length_penalty, min_len

    def _forbid_eos(self, scores: Tensor, t: Tensor) -> None:
        """EOS gets -inf in ``scores`` (…, V), in place, while a hypothesis of step t (a long of shape ()) has fewer
        than ``min_len`` tokens, t − 1 < m: a mask read on the device."""
        if self.min_len > 0:
            scores[..., EOS].masked_fill_(t <= self.min_len, NEG_INF)

    def candidates(self, log_probs: Tensor, beam_scores: Tensor, t: Tensor) -> Candidates:
        """Stage 1: the best 2k continuations over all live slots × vocabulary.

        :param log_probs: the step's log-probabilities, shape (n, w, V); overwritten with the running sums (it is the
            step's own buffer: adding in place saves allocating another n·w·V floats).
        :param beam_scores: running sums of the live slots, shape (n, w) (-inf for empty slots).
        :param t: the step, 1-based, a long of shape (): the hypotheses have t - 1 tokens.
        """
        n, width, vocab = log_probs.shape
        wanted = 2 * self.beam_size
        self._forbid_eos(log_probs, t)  # t - 1 tokens: too few to end
        total = log_probs.add_(beam_scores.unsqueeze(2)).view(n, width * vocab)
        if width * vocab < wanted:  # a vocabulary smaller than the beam: pad with impossible candidates
            total = torch.nn.functional.pad(total, (0, wanted - width * vocab), value=NEG_INF)
        scores, index = total.topk(wanted, dim=1)
        tokens = index % vocab
        return Candidates(
            scores=scores,
            tokens=tokens,
            parents=(index // vocab).clamp_max(width - 1),
            is_eos=tokens == EOS,
            ranks=torch.arange(wanted, device=scores.device),
        )

    def candidates_from_logits(self, logits: Tensor, beam_scores: Tensor, t: Tensor) -> Candidates:
        """Stage 1 without a float32 log-softmax of all w × V logits: the best 2k continuations taken on the logits
        themselves (in their own dtype, bf16 under autocast), scored by their log-sum-exp::

            log p(y | slot) = z_y − lse(z),   lse(z) = m + log Σ_y exp(z_y − m),   m = max_y z_y

        Adding the same lse to every logit of a slot keeps their order, so the best 2k of each slot are its best
        2k logits; the 2k best over all slots are among those w·2k. The same candidates as :meth:`candidates` up to
        rounding (ties may come out in another order), not the same bits: the CPU's search keeps :meth:`candidates`
        (:class:`~sarnmt.decoding.schedule.Schedule`).

        :param logits: the step's logits, shape (n, w, V), any float dtype (overwritten at EOS while t <= min_len).
        :param beam_scores: running sums of the live slots, shape (n, w), float32.  :param t: the step, 1-based, a
            long of shape ().
        """
        n, width, vocab = logits.shape
        wanted = 2 * self.beam_size
        peak = logits.amax(dim=2, keepdim=True)
        # Σ exp(z − m) accumulated in float32 whatever the logits' dtype (the exponentials stay in it)
        lse = torch.exp(logits - peak).sum(dim=2, dtype=torch.float32).log_() + peak.squeeze(2).float()
        self._forbid_eos(logits, t)  # after the normaliser: EOS keeps its share of the probability, as in candidates()
        per_slot = min(wanted, vocab)
        top, token = logits.topk(per_slot, dim=2)  # (n, w, per_slot)
        total = (top.float() - lse.unsqueeze(2)).add_(beam_scores.unsqueeze(2)).view(n, width * per_slot)
        if width * per_slot < wanted:
            total = torch.nn.functional.pad(total, (0, wanted - width * per_slot), value=NEG_INF)
        scores, index = total.topk(wanted, dim=1)
        index = index.clamp_max(width * per_slot - 1)
        tokens = token.view(n, width * per_slot).gather(1, index)
        return Candidates(
            scores=scores,
            tokens=tokens,
            parents=index // per_slot,
            is_eos=tokens == EOS,
            ranks=torch.arange(wanted, device=scores.device),
        )

    def finish(
        self,
        pool: Finished,
        cand: Candidates,
        active: Tensor | None,
        at_limit: Tensor,
        t: Tensor,
        live: Tensor | None = None,
    ) -> Tensor:
        """Stage 2: merge the candidates that finish at step t into the active sentences' pools.

        :param pool: the search's pool (updated in place).  :param cand: the step's candidates, n sentences.
        :param active: which pool row each of the n sentences is, shape (n,); None: row i is sentence i (n = B).
        :param at_limit: whether each sentence is at its length limit (all its candidates finish), shape (n,).
        :param t: the step, 1-based, a long of shape (): the finished hypotheses' length.
        :param live: whether each sentence still searches, shape (n,): a done sentence's candidates finish nothing
            and its pool stays as it was (None: every sentence searches).
        :returns: whether each sentence's pool holds k finished hypotheses, shape (n,).
        """
        n, c = cand.tokens.shape
        finishing = ((cand.is_eos & (cand.ranks < self.beam_size)) | at_limit.unsqueeze(1)) & (cand.scores > NEG_INF)
        if live is not None:
            finishing &= live.unsqueeze(1)
        norm = torch.where(finishing, self.length_penalty(cand.scores, t), NEG_INF)
        ref = torch.stack([t.expand(n, c), cand.ranks.expand(n, c)], dim=2)
        best = pool.merge(active, norm, cand.scores, ref, live)
        return (best > NEG_INF).sum(dim=1) >= self.beam_size

    def prune(self, cand: Candidates) -> Beam:
        """Stage 3: the best k candidates that are not EOS (at most w of them are EOS: one per parent). Fewer than k
        real ones (a tiny vocabulary) leave -inf slots, which never extend."""
        c = cand.tokens.size(1)
        choice = (cand.is_eos.long() * c + cand.ranks).topk(self.beam_size, dim=1, largest=False).indices
        return Beam(
            scores=torch.where(cand.is_eos.gather(1, choice), NEG_INF, cand.scores.gather(1, choice)),
            tokens=cand.tokens.gather(1, choice),
            parents=cand.parents.gather(1, choice),
            choice=choice,
        )

    def __repr__(self) -> str:
        return f"BeamRule(beam_size={self.beam_size}, length_penalty={self.length_penalty!r}, min_len={self.min_len})"

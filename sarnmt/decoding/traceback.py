"""The trace-back of beam search (:mod:`sarnmt.decoding.beam`): the loop records per step which candidates it took and
from which slots (:class:`StepRecord`); once the search ends, each finished hypothesis is followed back from the
step it ended at, which gives its tokens and its own attention rows whatever reorders happened on the way.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from sarnmt.data.text.codecs import EOS
from sarnmt.decoding.rule import Beam, Candidates, Finished
from sarnmt.decoding.search import NEG_INF, Hypotheses, NBestEntry, square


@dataclass(slots=True)
class StepRecord:
    """What one step recorded for later trace-back; rows are the sentences active at that step, in order."""

    active: Tensor  # (n,) sentence ids
    tokens: Tensor  # (n, c)
    parents: Tensor  # (n, c)
    choice: Tensor  # (n, k) candidate index chosen for each live slot
    src_attention: Tensor | None  # (n, w, S): the rows computed for the previous step's w live slots
    tgt_attention: Tensor | None  # (n, w, t)

    @classmethod
    def of(
        cls, active: Tensor, cand: Candidates, beam: Beam, src_attention: Tensor | None, tgt_attention: Tensor | None
    ) -> StepRecord:
        """The record of step t over n sentences of w live slots.

        :param active: sentence ids, shape (n,).  :param cand: the step's candidates.  :param beam: the live beam.
        :param src_attention: the step's source attention, shape (n·w, S); None when not asked for or absent.
        :param tgt_attention: the step's history attention, shape (n·w, t); None likewise.
        """
        n = active.size(0)
        src = None if src_attention is None else src_attention.unflatten(0, (n, -1))
        tgt = None if tgt_attention is None else tgt_attention.unflatten(0, (n, -1))
        return cls(
            active=active,
            tokens=cand.tokens,
            parents=cand.parents,
            choice=beam.choice,
            src_attention=src,
            tgt_attention=tgt,
        )


def trace_back(
    records: list[StepRecord], pool: Finished, src_mask: Tensor, return_attention: bool, nbest: int
) -> Hypotheses:
    """The search's result: follow back pointers from each sentence's finished hypotheses.

    :param records: one per step.  :param pool: the finished hypotheses, k per sentence, best first (B sentences).
    :param src_mask: shape (B, S).  :param return_attention: trace each 1-best's attention rows too.
    :param nbest: n, traced for every sentence.
    """
    batch = pool.norm.size(0)
    refs, norm, raw = pool.ref[:, :nbest].tolist(), pool.norm[:, :nbest].tolist(), pool.raw[:, :nbest].tolist()
    src_lengths = src_mask.sum(dim=1).tolist()
    steps = []
    for rec in records:
        row_of = {sent: row for row, sent in enumerate(rec.active.tolist())}
        attn = [None if a is None else a.cpu() for a in (rec.src_attention, rec.tgt_attention)]
        steps.append((row_of, rec.tokens.tolist(), rec.parents.tolist(), rec.choice.tolist(), *attn))
    result = Hypotheses(tokens=[], scores=[row[0] for row in raw], normalized_scores=[row[0] for row in norm])
    for sent in range(batch):
        tokens, src_rows, tgt_rows = follow(steps, sent, *refs[sent][0], return_attention)
        result.tokens.append(tokens)
        if return_attention and src_rows:
            result.src_attention.append(torch.stack([row[: int(src_lengths[sent])] for row in src_rows]))
        if return_attention and tgt_rows:
            result.tgt_attention.append(square(tgt_rows))
        if nbest > 1:  # entry 0 is the 1-best just traced
            result.nbest.append(
                [
                    NBestEntry(
                        tokens if i == 0 else follow(steps, sent, *refs[sent][i], False)[0],
                        raw[sent][i],
                        norm[sent][i],
                    )
                    for i in range(nbest)
                    if norm[sent][i] > NEG_INF
                ]
            )
    return result


def follow(
    steps: list[tuple], sent: int, t: int, cand: int, return_attention: bool
) -> tuple[list[int], list[Tensor], list[Tensor]]:
    """The tokens (without EOS) and attention rows of the hypothesis that ended at step t as candidate ``cand``."""
    tokens, src_rows, tgt_rows = [], [], []
    while t >= 1:
        row_of, cand_tokens, cand_parents, _, src_attn, tgt_attn = steps[t - 1]
        row = row_of[sent]
        slot = cand_parents[row][cand]
        tokens.append(cand_tokens[row][cand])
        if return_attention:
            if src_attn is not None:
                src_rows.append(src_attn[row, slot])
            if tgt_attn is not None:
                tgt_rows.append(tgt_attn[row, slot])
        if t > 1:
            cand = steps[t - 2][3][steps[t - 2][0][sent]][slot]
        t -= 1
    tokens.reverse()
    return (tokens[:-1] if tokens and tokens[-1] == EOS else tokens), src_rows[::-1], tgt_rows[::-1]

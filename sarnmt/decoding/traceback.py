"""The trace-back of beam search (:mod:`sarnmt.decoding.beam`), on the device: every step writes which candidates it
took and from which slots into the search's records, one row per sentence of the batch (:class:`Records`); once the
search ends, every finished hypothesis is followed back from the step it ended at, all of them at once, one step at
a time (:func:`trace_back`), which gives its tokens and its own attention rows whatever reorders happened on the way.
The result comes to the host in one copy (two more with attention rows).

Following a hypothesis back: it ended at step t as candidate ``cand``; at step s its token is ``tokens[s][cand]``
and it extends slot ``parents[s][cand]`` of step s − 1, which took candidate ``choice[s − 1][slot]`` there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

from sarnmt.data.text.codecs import EOS
from sarnmt.decoding.rule import Beam, Candidates, Finished
from sarnmt.decoding.search import NEG_INF, Hypotheses, NBestEntry


def _rows(values: Tensor, active: Tensor | None, batch: int) -> Tensor:
    """``values`` (n, ...) of the sentences ``active`` as rows of a batch of ``batch`` (zeros elsewhere)."""
    if active is None:
        return values
    return values.new_zeros(batch, *values.shape[1:]).index_copy_(0, active, values)


@dataclass(slots=True)
class Records:
    """What every step recorded for the trace-back, written in place by the step itself (the same write in a step
    launched from Python and in one replayed from a capture): for B sentences and room for T steps, step t's record
    at place t (place 0, before step 1, is never written), ``tokens`` and ``parents`` of the c = 2k candidates,
    (B, T + 1, c), and ``choice``, the candidate each of the k live slots took, (B, T + 1, k). A sentence's places
    from the step after it stopped searching hold zeros or what a done sentence's masked step computed (never read:
    no hypothesis of theirs ends after it stopped).

    With ``attention`` (a search launched from Python: its shapes may change), per step in lists: the rows the step
    computed for its n sentences' w live slots, ``src`` (n, w, S) and ``tgt`` (n, w, t) (None where the model has
    none), and ``active``, those sentences' batch rows ((n,); None: all B, in order); :meth:`at` spreads them out.
    """

    tokens: Tensor
    parents: Tensor
    choice: Tensor
    attention: bool = False
    src: list[Tensor | None] = field(default_factory=list)
    tgt: list[Tensor | None] = field(default_factory=list)
    active: list[Tensor | None] = field(default_factory=list)

    @classmethod
    def empty(cls, batch: int, steps: int, beam_size: int, device: torch.device, attention: bool = False) -> Records:
        """Zeroed records of ``batch`` sentences with room for ``steps`` steps of ``beam_size`` live slots."""
        tokens, parents, choice = (
            torch.zeros(batch, steps + 1, width, dtype=torch.long, device=device)
            for width in (2 * beam_size, 2 * beam_size, beam_size)
        )
        return cls(tokens, parents, choice, attention=attention)

    def add(
        self,
        t: Tensor,
        active: Tensor | None,
        cand: Candidates,
        beam: Beam,
        src_attention: Tensor | None = None,
        tgt_attention: Tensor | None = None,
    ) -> None:
        """Record step t over n sentences.

        :param t: the step, a long of shape () on the device: the place written.
        :param active: the batch rows of the n sentences, shape (n,); None: all B, in order.
        :param cand: the step's candidates, (n, c).  :param beam: the live beam, (n, k).
        :param src_attention: the step's source attention, shape (n·w, S); None when absent (kept only when the
            records are for attention).  :param tgt_attention: the step's history attention, shape (n·w, t).
        """
        place, batch = t.view(1), self.tokens.size(0)
        for record, value in ((self.tokens, cand.tokens), (self.parents, cand.parents), (self.choice, beam.choice)):
            record.index_copy_(1, place, _rows(value, active, batch).unsqueeze(1))
        if self.attention:
            n = cand.tokens.size(0)
            self.active.append(active)
            for rows, kept in ((src_attention, self.src), (tgt_attention, self.tgt)):
                kept.append(None if rows is None else rows.unflatten(0, (n, -1)))

    def at(self, name: str, step: int) -> Tensor:
        """Attention record ``name`` (``src``, ``tgt``) of step ``step`` + 1 with one row per sentence of the batch:
        shape (B, ...)."""
        return _rows(getattr(self, name)[step], self.active[step], self.tokens.size(0))


def trace_back(records: Records, pool: Finished, src_mask: Tensor, nbest: int, steps: int) -> Hypotheses:
    """The search's result: follow back pointers from each sentence's n best finished hypotheses.

    :param records: the search's records (rows past the batch's B, a captured bucket's padding, are left out).
    :param pool: the finished hypotheses, k per sentence, best first (rows past B left out).
    :param src_mask: shape (B, S).  :param nbest: n, traced for every sentence.  :param steps: how many steps ran.
    With ``records.attention``, each 1-best's attention rows are traced too.
    """
    batch = src_mask.size(0)
    tokens_at, parents_at, choice_at = (r[:batch] for r in (records.tokens, records.parents, records.choice))
    ref = pool.ref[:batch]
    ends, cand_end = ref[:, :nbest, 0], ref[:, :nbest, 1]  # (B, n): the step and the candidate
    tokens, slots = [], []
    cand = cand_end
    for s in range(steps, 0, -1):
        cand = torch.where(ends == s, cand_end, cand)  # a hypothesis that ended at step s starts here
        tokens.append(tokens_at[:, s].gather(1, cand))
        slot = parents_at[:, s].gather(1, cand)
        slots.append(slot[:, 0])
        if s > 1:
            cand = choice_at[:, s - 1].gather(1, slot)
    if steps:
        traced = torch.stack(tokens[::-1], dim=2)  # (B, n, T)
    else:
        traced = ends.new_zeros(batch, nbest, 0)
    # one copy: ids and steps are exact in float64, and so are the float32 scores
    parts = (traced, ends, pool.raw[:batch, :nbest], pool.norm[:batch, :nbest])
    host = torch.cat([part.flatten().double() for part in parts]).tolist()
    cut = [batch * nbest * steps, batch * nbest * (steps + 1), batch * nbest * (steps + 2)]
    flat_tokens, flat_ends = host[: cut[0]], host[cut[0] : cut[1]]
    raw_h, norm_h = host[cut[1] : cut[2]], host[cut[2] :]
    result = Hypotheses(tokens=[], scores=raw_h[::nbest], normalized_scores=norm_h[::nbest])
    for sent in range(batch):
        found = []
        for i in range(nbest):
            hyp = sent * nbest + i
            length = int(flat_ends[hyp])
            ids = [int(x) for x in flat_tokens[hyp * steps : hyp * steps + length]]
            found.append(ids[:-1] if ids and ids[-1] == EOS else ids)
        result.tokens.append(found[0])
        if nbest > 1:
            result.nbest.append(
                [
                    NBestEntry(found[i], raw_h[sent * nbest + i], norm_h[sent * nbest + i])
                    for i in range(nbest)
                    if norm_h[sent * nbest + i] > NEG_INF
                ]
            )
    if records.attention and steps:
        _attention_rows(records, slots[::-1], [int(x) for x in flat_ends[::nbest]], src_mask, result)
    return result


def _attention_rows(
    records: Records, slots: list[Tensor], lengths: list[int], src_mask: Tensor, result: Hypotheses
) -> None:
    """Each 1-best's attention rows: at step s, the rows of the slot it extended (``slots[s - 1]``, shape (B,)).

    :param lengths: each 1-best's number of steps.  Fills ``result.src_attention`` with (n, S_i) over the real
    source positions and ``result.tgt_attention`` with lower-triangular (n, n) matrices (row t over items 0..t).
    """
    src_lengths = src_mask.sum(dim=1).tolist()
    if records.src[0] is not None:
        src = _stacked([records.at("src", s) for s in range(len(slots))], slots, 0).cpu()  # (B, T, S)
        for sent, length in enumerate(lengths):
            if length:
                result.src_attention.append(src[sent, :length, : int(src_lengths[sent])].clone())
    if records.tgt[0] is not None:
        tgt = _stacked([records.at("tgt", s) for s in range(len(slots))], slots, len(slots)).cpu()  # (B, T, ≥ T)
        for sent, length in enumerate(lengths):
            if length:
                result.tgt_attention.append(tgt[sent, :length, :length].clone())


def _stacked(steps: list[Tensor], slots: list[Tensor], width: int) -> Tensor:
    """Row ``slots[s][b]`` of every sentence b of every step s's attention (B, w, ·), zero-padded to a common
    width of at least ``width``: shape (B, T, ·)."""
    width = max(width, *(step.size(2) for step in steps))
    rows = [F.pad(_slot_rows(step, slot), (0, width - step.size(2))) for step, slot in zip(steps, slots, strict=True)]
    return torch.cat(rows, dim=1)


def _slot_rows(step: Tensor, slot: Tensor) -> Tensor:
    """Row ``slot[b]`` of every sentence b of one step's attention (B, w, ·): shape (B, 1, ·)."""
    return step.gather(1, slot.view(-1, 1, 1).expand(-1, 1, step.size(2)))

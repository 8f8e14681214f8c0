"""Search: batched beam search over the model's step function and the generic state ``reorder``.

The rules are dl4mt's (docs/models.md §Decoding).
It is the only decoding loop: greedy search is this loop with k = 1 (:mod:`sarnmt.decoding.greedy`).

B sentences × k beams are flattened to B·k rows. Each step:

1. the model scores every live row: log-probabilities of shape (B, k, V), added to the beams' running sums;
2. the search rule (:func:`select_candidates`) takes the best **2k** candidates per sentence over k × V, so that
   hypotheses that end in EOS never shrink the live beam (fairseq's rule);
3. an EOS candidate ranked within the top k *finishes*: its score is length-normalised (``penalties``) and merged
   into the sentence's pool of k finished hypotheses; at the sentence's length limit every candidate finishes;
4. the best k non-EOS candidates become the live beam; the state follows them through ``state.reorder``.

Step 1 extends one empty hypothesis per sentence (the source memory is read by 1 row per sentence, then by k:
:attr:`SourceMemory.beams`), so no work is spent on k identical copies.

A minimum length m (fairseq's ``min_len``) forbids EOS while a hypothesis has fewer than m tokens. With ``nbest``
= n <= k the n best finished hypotheses of every sentence are traced back (:attr:`Hypotheses.nbest`).

A sentence is done when its pool holds k finished hypotheses, when it reaches its length limit
``max_len_a · |src| + max_len_b``, or when no live hypothesis has a finite score; done sentences leave the batch.
The loop transfers one small tensor to the host per step (which sentences are still searching). Tokens, back
pointers and attention rows are recorded per step on the device; the final hypotheses are traced back once at the
end, which gives each hypothesis's own attention rows, whatever reorders happened on the way.

With k = 1 the candidates are the top 2, an EOS finishes only when it is the argmax, and the output is greedy
search's: the argmax at every step (``tests/test_model.py`` checks it against a hand-written argmax loop).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from sarnmt.data.text.codecs import EOS
from sarnmt.decoding.penalties import LengthPenalty, max_lengths
from sarnmt.decoding.search import NEG_INF, Hypotheses
from sarnmt.decoding.traceback import StepRecord, trace_back
from sarnmt.errors import InputError, check_range


@dataclass
class Candidates:
    """The search rule's choice for one step (n live sentences, c = min(2k, k·V) candidates each, best first).

    :param scores: running log-probability sums, shape (n, c).  :param tokens: shape (n, c).
    :param parents: the live slot (0..k-1) each candidate extends, shape (n, c).
    Candidates with score -inf (only when the vocabulary is smaller than 2k) extend nothing real.
    """

    scores: Tensor
    tokens: Tensor
    parents: Tensor


def select_candidates(log_probs: Tensor, beam_scores: Tensor, beam_size: int) -> Candidates:
    """The beam search rule: the best 2k continuations over all live beams × vocabulary.

    :param log_probs: shape (n, w, V) for w live slots (1 at the first step, k afterwards); overwritten with the
        running sums (it is the step's own buffer: adding in place saves allocating another n·k·V floats).
    :param beam_scores: running sums of the live slots, shape (n, w) (-inf for empty slots).
    :param beam_size: k.
    """
    n, width, vocab = log_probs.shape
    total = log_probs.add_(beam_scores.unsqueeze(2)).view(n, width * vocab)
    if width * vocab < 2 * beam_size:  # a vocabulary smaller than the beam: pad with impossible candidates
        total = torch.nn.functional.pad(total, (0, 2 * beam_size - width * vocab), value=NEG_INF)
    scores, index = total.topk(2 * beam_size, dim=1)
    return Candidates(scores=scores, tokens=index % vocab, parents=(index // vocab).clamp_max(width - 1))


@torch.no_grad()
def beam_decode(
    model: nn.Module,
    src: Tensor,
    src_mask: Tensor,
    beam_size: int = 5,
    length_penalty: LengthPenalty | None = None,
    max_len_a: float = 2.0,
    max_len_b: int = 10,
    return_attention: bool = False,
    nbest: int = 1,
    min_len: int = 0,
) -> Hypotheses:
    """Beam search for a batch; returns the best finished hypothesis of every sentence (and the n best).

    :param model: anything with the models' ``encode`` and ``step`` (every model the factory builds).
    :param src: shape (B, S).  :param src_mask: shape (B, S).  :param beam_size: k >= 1.
    :param length_penalty: ranks finished hypotheses (default: dl4mt's score / length including EOS).
    :param nbest: n, 1 <= n <= k: also trace back the n best finished hypotheses (:attr:`Hypotheses.nbest`).
    :param min_len: m >= 0: no EOS before a hypothesis has m tokens.
    """
    check_search(beam_size, nbest, min_len)
    penalty = length_penalty if length_penalty is not None else LengthPenalty()
    k, batch, device = beam_size, src.size(0), src.device
    limits = max_lengths(src_mask, max_len_a, max_len_b)
    memory, state = model.encode(src, src_mask)
    beam_scores = src.new_zeros(batch, 1, dtype=torch.float)  # step 1 extends one empty hypothesis per sentence
    # the pool of finished hypotheses, per sentence: normalised and raw scores, (step, candidate) to trace back
    pool_norm = torch.full((batch, k), NEG_INF, device=device)
    pool_raw = torch.full((batch, k), NEG_INF, device=device)
    pool_ref = torch.zeros(batch, k, 2, dtype=torch.long, device=device)
    active = torch.arange(batch, device=device)
    records: list[StepRecord] = []
    prev: Tensor | None = None
    for t in range(1, int(limits.max()) + 1):
        out = model.step(prev, state, memory)
        n, width = beam_scores.shape  # width: 1 at step 1, k afterwards
        log_probs = torch.log_softmax(out.logits.float(), dim=-1).view(n, width, -1)
        if t <= min_len:  # the hypotheses have t - 1 tokens: too few to end
            log_probs[..., EOS] = NEG_INF
        cand = select_candidates(log_probs, beam_scores, k)
        c = cand.tokens.size(1)
        ranks = torch.arange(c, device=device)
        is_eos = cand.tokens == EOS
        at_limit = (limits[active] <= t).unsqueeze(1)
        finishing = ((is_eos & (ranks < k)) | at_limit) & (cand.scores > NEG_INF)
        new_norm = torch.where(finishing, penalty(cand.scores, t), NEG_INF)
        merged_norm = torch.cat([pool_norm[active], new_norm], dim=1)
        pool_norm_a, chosen = merged_norm.topk(k, dim=1)
        merged_raw = torch.cat([pool_raw[active], cand.scores], dim=1)
        new_ref = torch.stack([torch.full_like(cand.tokens, t), ranks.expand(n, c)], dim=2)
        merged_ref = torch.cat([pool_ref[active], new_ref], dim=1)
        pool_norm[active] = pool_norm_a
        pool_raw[active] = merged_raw.gather(1, chosen)
        pool_ref[active] = merged_ref.gather(1, chosen.unsqueeze(2).expand(n, k, 2))
        # live beam: the best k candidates that are not EOS (at most `width` of the candidates are EOS: one per
        # parent); fewer than k real ones (a tiny vocabulary) leave -inf slots, which never extend
        live = (is_eos.long() * c + ranks).topk(k, dim=1, largest=False).indices
        beam_scores = torch.where(is_eos.gather(1, live), NEG_INF, cand.scores.gather(1, live))
        prev = cand.tokens.gather(1, live).view(-1)
        parents = cand.parents.gather(1, live)
        records.append(
            StepRecord(
                active=active,
                tokens=cand.tokens,
                parents=cand.parents,
                live=live,
                src_attention=(
                    out.src_attention.view(n, width, -1) if return_attention and out.src_attention is not None else None
                ),
                tgt_attention=(
                    out.tgt_attention.view(n, width, -1) if return_attention and out.tgt_attention is not None else None
                ),
            )
        )
        full = (pool_norm_a > NEG_INF).sum(dim=1) >= k
        done = full | at_limit.squeeze(1) | ~(beam_scores > NEG_INF).any(dim=1)
        keep = (~done).nonzero().squeeze(1)  # the one host sync of the step
        if keep.numel() == 0:
            break
        rows = (torch.arange(n, device=device) * width).unsqueeze(1) + parents  # (n, k) flat rows to follow
        if keep.numel() < n:
            rows, active, beam_scores = rows[keep], active[keep], beam_scores[keep]
            prev = prev.view(n, k)[keep].view(-1)
            memory = memory.reorder(keep)
        if t == 1:  # from now on k state rows per sentence (reorder keeps the setting)
            memory = memory.with_beams(k)
        if k == 1:  # one slot per sentence (greedy): every row extends itself; reorder only to drop finished ones
            state = out.state if keep.numel() == n else out.state.reorder(keep)
        else:
            state = out.state.reorder(rows.view(-1))
    return trace_back(records, pool_norm, pool_raw, pool_ref, src_mask, return_attention, nbest)


def check_search(beam_size: int, nbest: int, min_len: int) -> None:
    """:raises ValueError: unless 1 <= nbest <= beam_size and min_len >= 0."""
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    if not 1 <= nbest <= beam_size:
        raise ValueError(f"nbest must be between 1 and the beam size {beam_size}, got {nbest}")
    if min_len < 0:
        raise ValueError(f"min_len must be >= 0, got {min_len}")


def check_settings(beam_size: int, max_len_a: float, max_len_b: int, min_len: int) -> None:
    """Validate a search's settings where they are read (the keys of ``sarnmt/conf/decoding/*.yaml``).

    :raises InputError: naming the key: ``beam_size`` < 1, ``max_len_a``, ``max_len_b`` or ``min_len`` < 0, or a
        ``min_len`` above a maximum output length that does not grow with the source (``max_len_a=0``): no output
        could end with EOS.
    """
    check_range("beam_size", beam_size, 1)
    check_range("max_len_a", max_len_a, 0)
    check_range("max_len_b", max_len_b, 0)
    check_range("min_len", min_len, 0)
    longest = max(1, max_len_b)  # tokens, EOS included (penalties.max_lengths)
    if max_len_a == 0 and min_len >= longest:
        raise InputError(
            f"min_len={min_len}: more than the longest output allows (max_len_a=0, max_len_b={max_len_b}: "
            f"{longest} tokens, EOS included), so no output could end; lower min_len or raise max_len_b"
        )


class BeamSearch:
    """Beam search as a configured object (``sarnmt/conf/decoding/beam.yaml``).

    :param beam_size: k.  :param length_penalty: how finished hypotheses are ranked (dl4mt: alpha=1, offset=0).
    :param max_len_a: output length limit ``a·|src| + b``.  :param max_len_b: see ``max_len_a``.
    :param min_len: no EOS before this many tokens (0: none).
    """

    name = "beam"

    def __init__(
        self,
        beam_size: int = 5,
        length_penalty: LengthPenalty | None = None,
        max_len_a: float = 2.0,
        max_len_b: int = 10,
        min_len: int = 0,
    ) -> None:
        check_settings(beam_size, max_len_a, max_len_b, min_len)
        self.beam_size, self.max_len_a, self.max_len_b, self.min_len = beam_size, max_len_a, max_len_b, min_len
        self.length_penalty = length_penalty if length_penalty is not None else LengthPenalty()

    def __call__(
        self, model: nn.Module, src: Tensor, src_mask: Tensor, return_attention: bool = False, nbest: int = 1
    ) -> Hypotheses:
        return beam_decode(
            model,
            src,
            src_mask,
            self.beam_size,
            self.length_penalty,
            self.max_len_a,
            self.max_len_b,
            return_attention,
            nbest,
            self.min_len,
        )

    def settings(self) -> dict[str, Any]:
        return {
            "search": self.name,
            "beam_size": self.beam_size,
            "length_penalty": self.length_penalty.settings(),
            "max_len_a": self.max_len_a,
            "max_len_b": self.max_len_b,
            "min_len": self.min_len,
        }

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(beam_size={self.beam_size}, length_penalty={self.length_penalty!r}, "
            f"max_len_a={self.max_len_a}, max_len_b={self.max_len_b}, min_len={self.min_len})"
        )

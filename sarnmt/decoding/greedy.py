"""Batched greedy decoding over the model's step function, the same step that teacher-forced training unrolls.

Finished sentences leave the batch (the decoder state and source memory are reordered generically), so the cost
follows the longest *unfinished* hypothesis. The maximum length is ``max_len_a · |source| + max_len_b`` tokens.
Beam search with ``beam_size=1`` gives exactly this output (``tests/test_beam.py``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from sarnmt.data.batching import EOS
from sarnmt.decoding.penalties import max_lengths
from sarnmt.decoding.search import Hypotheses, square
from sarnmt.models.seq2seq import Seq2Seq

__all__ = ["GreedySearch", "Hypotheses", "greedy_decode"]


@torch.no_grad()
def greedy_decode(
    model: Seq2Seq,
    src: Tensor,
    src_mask: Tensor,
    max_len_a: float = 2.0,
    max_len_b: int = 10,
    return_attention: bool = False,
) -> Hypotheses:
    """Greedy search for a batch.

    :param src: shape (B, S).  :param src_mask: shape (B, S).
    """
    batch = src.size(0)
    src_lengths = src_mask.sum(dim=1)
    limits = max_lengths(src_mask, max_len_a, max_len_b)
    memory, state = model.encode(src, src_mask)
    active = torch.arange(batch, device=src.device)
    # per step: (sentences still active, their words, their log-probabilities, attention rows); assembled after
    # the loop so that the loop itself waits on the device only for the set of unfinished sentences
    records: list[tuple[Tensor, Tensor, Tensor, Tensor | None, Tensor | None]] = []
    prev = None
    for step in range(int(limits.max())):
        out = model.step(prev, state, memory)
        best_scores, best = torch.log_softmax(out.logits.float(), dim=-1).max(dim=-1)
        attention = (out.src_attention, out.tgt_attention) if return_attention else (None, None)
        records.append((active, best, best_scores, *attention))
        done = (best == EOS) | (limits[active] <= step + 1)
        keep = (~done).nonzero().squeeze(1)
        if keep.numel() == 0:
            break
        if keep.numel() < active.numel():
            active, memory = active[keep], memory.reorder(keep)
            state, best = out.state.reorder(keep), best[keep]
        else:
            state = out.state
        prev = best
    tokens: list[list[int]] = [[] for _ in range(batch)]
    scores = [0.0] * batch
    src_attn: list[list[Tensor]] = [[] for _ in range(batch)]
    tgt_attn: list[list[Tensor]] = [[] for _ in range(batch)]
    for sentences, words, word_scores, src_rows, tgt_rows in records:
        for row, (sent, word, score) in enumerate(
            zip(sentences.tolist(), words.tolist(), word_scores.tolist(), strict=True)
        ):
            scores[sent] += score
            if word != EOS:
                tokens[sent].append(word)
            if src_rows is not None:
                src_attn[sent].append(src_rows[row])
            if tgt_rows is not None:
                tgt_attn[sent].append(tgt_rows[row])
    result = Hypotheses(tokens=tokens, scores=scores, normalized_scores=list(scores))
    if return_attention:
        result.src_attention = [
            torch.stack(rows)[:, : int(src_lengths[i])].cpu() for i, rows in enumerate(src_attn)
        ]
        result.tgt_attention = [square(rows).cpu() for rows in tgt_attn if rows]
    return result


class GreedySearch:
    """Greedy search as a configured object (``conf/decoding/greedy.yaml``).

    :param max_len_a: output length limit ``a·|src| + b``.  :param max_len_b: see ``max_len_a``.
    """

    def __init__(self, max_len_a: float = 2.0, max_len_b: int = 10) -> None:
        self.max_len_a, self.max_len_b = max_len_a, max_len_b

    def __call__(self, model: Seq2Seq, src: Tensor, src_mask: Tensor, return_attention: bool = False) -> Hypotheses:
        return greedy_decode(model, src, src_mask, self.max_len_a, self.max_len_b, return_attention)

    def settings(self) -> dict[str, Any]:
        return {"search": "greedy", "beam_size": 1, "max_len_a": self.max_len_a, "max_len_b": self.max_len_b}

    def __repr__(self) -> str:
        return f"GreedySearch(max_len_a={self.max_len_a}, max_len_b={self.max_len_b})"

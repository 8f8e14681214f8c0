"""Batched greedy decoding over the model's step function, the same step that teacher-forced training unrolls.

Finished sentences leave the batch (the decoder state and source memory are reordered generically), so the cost
follows the longest *unfinished* hypothesis. The maximum length is ``max_len_a · |source| + max_len_b`` tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from sarnmt.data.batching import EOS
from sarnmt.models.seq2seq import Seq2Seq


@dataclass
class Hypotheses:
    """Decoding results in batch order.

    :param tokens: per sentence, the output ids without EOS.
    :param scores: per sentence, the summed log-probability (EOS included when emitted).
    :param src_attention: per sentence, α of shape (n, S_i) over its real source positions (n = len + EOS), when
        requested.
    :param tgt_attention: per sentence, the variant's history attention of shape (n, n), when it has one.
    """

    tokens: list[list[int]]
    scores: list[float]
    src_attention: list[Tensor] = field(default_factory=list)
    tgt_attention: list[Tensor] = field(default_factory=list)


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
    limits = (max_len_a * src_lengths.double() + max_len_b).long().clamp(min=1)
    memory, state = model.encode(src, src_mask)
    active = torch.arange(batch, device=src.device)
    tokens = [[] for _ in range(batch)]
    scores = [0.0] * batch
    src_attn: list[list[Tensor]] = [[] for _ in range(batch)]
    tgt_attn: list[list[Tensor]] = [[] for _ in range(batch)]
    prev = None
    for step in range(int(limits.max())):
        out = model.step(prev, state, memory)
        log_probs = torch.log_softmax(out.logits.float(), dim=-1)
        best_scores, best = log_probs.max(dim=-1)
        done = (best == EOS) | (limits[active] <= step + 1)
        for row, (sent, word, score) in enumerate(
            zip(active.tolist(), best.tolist(), best_scores.tolist(), strict=True)
        ):
            scores[sent] += score
            if word != EOS:
                tokens[sent].append(word)
            if return_attention:
                src_attn[sent].append(out.src_attention[row])
                if out.tgt_attention is not None:
                    tgt_attn[sent].append(out.tgt_attention[row])
        keep = (~done).nonzero().squeeze(1)
        if keep.numel() == 0:
            break
        if keep.numel() < active.numel():
            active, memory = active[keep], memory.reorder(keep)
            state, best = out.state.reorder(keep), best[keep]
        else:
            state = out.state
        prev = best
    result = Hypotheses(tokens=tokens, scores=scores)
    if return_attention:
        result.src_attention = [
            torch.stack(rows)[:, : int(src_lengths[i])] for i, rows in enumerate(src_attn)
        ]
        result.tgt_attention = [_square(rows) for rows in tgt_attn if rows]
    return result


def _square(rows: list[Tensor]) -> Tensor:
    """Stack history-attention rows of growing length 1..n into a lower-triangular (n, n) matrix."""
    steps = len(rows)
    matrix = rows[0].new_zeros(steps, steps)
    for t, row in enumerate(rows):
        matrix[t, : row.numel()] = row
    return matrix

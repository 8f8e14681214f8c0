"""A plain implementation of sarnmt's model, written the way a competent PyTorch user would: the benchmark's peer
(``make bench``: ``peers.plain`` in ``benchmarks/conf/peers/``) and the plain loop of ``make peers``.

The test oracle ``tests/oracle.py`` is a *textbook* implementation: it recomputes the attention keys and every history
score at every step on purpose, so a ratio against it (``make bench-full``) is a lower bound on what sarnmt's
engineering buys. A user who writes this model for their own experiments does better than that, and that is what
sarnmt must beat. This module is that user's code (the same model family as the peer loop that ``benchmarks/peers``
runs against fairseq):

- the encoder is PyTorch's ``nn.GRU`` over packed sequences (the encoder module's own GRU, run the usual way);
- the attention keys W_a h_j + b_a are projected once per batch; a history item's key W_k m_i + b is projected once,
  when the item arrives, and kept in a list;
- the decoder is a Python loop over target positions of ``torch.gru_cell`` (``nn.GRUCell``'s kernel: each step
  projects its inputs), the attention and the readout;
- the output layer runs at every position, padding included, and the loss is ``F.cross_entropy``;
- greedy and beam search step the whole batch until every sentence is done, with a Python loop over sentences for
  the finished hypotheses (no batch shrinking, no trace-back: each hypothesis carries its tokens).

It owns no weights: like the oracle it reads a sarnmt :class:`~sarnmt.models.seq2seq.Seq2Seq`'s parameters by
attribute, so it computes exactly ``model(src, src_mask, tgt).logits`` (``tests/test_plain.py`` checks the logits of
every decoder variant in float64, and that its searches find sarnmt's). Dropout sits at sarnmt's sites and rates with
its own random masks, as in the oracle. It writes the paper's variants (:data:`KINDS`); for a variant of one's own it
says so (:attr:`PlainPeer.implements` false) and the bench times sarnmt without it.

Shapes: B sentences, S source and T target positions, K beams, e = embedding size, d = decoder state size,
V = vocabulary.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from hydra.utils import get_class
from torch import Tensor, nn

from sarnmt.bench.peer import SearchFn
from sarnmt.bench.workload import TrainBatch
from sarnmt.data.text.codecs import EOS
from sarnmt.models.factory import PAPER_MODEL
from sarnmt.models.history import HistoryAttention
from sarnmt.models.seq2seq import Seq2Seq
from sarnmt.models.variants import (
    Baseline,
    DecoderVariant,
    MeanResidual,
    MemoryRNN,
    SelfAttentiveResidual,
    SelfAttentiveRNN,
)

# The variants this user wrote, by class (exact types: a new variant is not silently computed as the baseline).
KINDS = {
    DecoderVariant: "baseline",
    Baseline: "baseline",
    MeanResidual: "mean_residual",
    SelfAttentiveResidual: "self_attentive_residual",
    MemoryRNN: "memory_rnn",
    SelfAttentiveRNN: "self_attentive_rnn",
}


def variant_kind(model: Seq2Seq) -> str:
    """Which of :data:`KINDS` the model's decoder variant is."""
    kind = KINDS.get(type(model.decoder.variant))
    if kind is None:
        raise TypeError(f"the plain peer does not implement the decoder variant {type(model.decoder.variant).__name__}")
    return kind


def linear(x: Tensor, layer: nn.Linear) -> Tensor:
    """x Wᵀ + b with the weights of ``layer``.  :param x: shape (..., n).  :returns: shape (..., m)."""
    out = x @ layer.weight.T
    return out if layer.bias is None else out + layer.bias


def dropout(x: Tensor, site: nn.Dropout, training: bool) -> Tensor:
    """Dropout at rate ``site.p`` (one of the model's dropout modules), only in training mode."""
    return F.dropout(x, site.p, training)


@dataclass
class Source:
    """The encoded batch.  :param annotations: h, shape (B, S, 2d).  :param keys: W_a h + b_a, shape (B, S, 2d).
    :param mask: shape (B, S), True on real positions."""

    annotations: Tensor
    keys: Tensor
    mask: Tensor

    def select(self, rows: Tensor) -> Source:
        return Source(self.annotations[rows], self.keys[rows], self.mask[rows])


@dataclass
class History:
    """A variant's history m_0 .. m_{t-1} and their projected keys W_k m_i + b, each a list of (B, k) tensors."""

    items: list[Tensor] = field(default_factory=list)
    keys: list[Tensor] = field(default_factory=list)

    def add(self, att: HistoryAttention, item: Tensor) -> None:
        self.items.append(item)
        self.keys.append(linear(item, att.key_proj))

    def summary(self, att: HistoryAttention, query: Tensor) -> Tensor:
        """Σ_i α_i m_i, α = softmax_i vᵀ tanh(W_k m_i + b [+ W_q q]).  :param query: (B, d).  :returns: (B, k)."""
        keys = torch.stack(self.keys, dim=1)  # (B, t, k)
        if att.query_proj is not None:
            keys = keys + linear(query, att.query_proj).unsqueeze(1)
        weights = torch.softmax(torch.tanh(keys) @ att.v, dim=-1)
        return (weights.unsqueeze(1) @ torch.stack(self.items, dim=1)).squeeze(1)

    def select(self, rows: Tensor) -> History:
        return History([m[rows] for m in self.items], [k[rows] for k in self.keys])


@dataclass
class State:
    """The decoder's state before step t.  :param hidden: s_{t-1}, (B, d).  :param words: ȳ_0 .. ȳ_{t-2} (residual
    variants).  :param states: s_0 .. s_{t-1} (Memory RNN, self-attentive RNN).  :param word_sum: Σ ȳ (mean)."""

    hidden: Tensor
    words: History
    states: History
    word_sum: Tensor
    steps: int = 0

    def select(self, rows: Tensor) -> State:
        return State(
            self.hidden[rows], self.words.select(rows), self.states.select(rows), self.word_sum[rows], self.steps
        )


def encode(model: Seq2Seq, src: Tensor, src_mask: Tensor) -> tuple[Source, State]:
    """:param src: (B, S).  :param src_mask: (B, S).  :returns: the source memory and the state before step 1."""
    enc = model.encoder
    emb = dropout(enc.embedding(src), enc.dropout_embeddings, model.training)
    annotations = enc.rnn.packed(emb, src_mask)  # nn.GRU over a PackedSequence, zeros at padding
    mean = annotations.sum(dim=1) / src_mask.sum(dim=1, keepdim=True).to(annotations.dtype)
    s0 = torch.tanh(linear(mean, enc.init_state))
    annotations = dropout(annotations, enc.dropout_hidden, model.training)
    source = Source(annotations, linear(annotations, model.decoder.attention.key_proj), src_mask)
    state = State(s0, History(), History(), s0.new_zeros(s0.size(0), model.decoder.emb_dim))
    if variant_kind(model) in ("memory_rnn", "self_attentive_rnn"):
        state.states.add(model.decoder.variant.attention, s0)
    return source, state


def _cell(cell, x: Tensor, h: Tensor) -> Tensor:
    """``nn.GRUCell``'s kernel with a dl4mt cell's weights (its one bias on the side the cell says)."""
    on_input = cell.bias_on == "input"
    return torch.gru_cell(
        x, h, cell.weight_ih, cell.weight_hh, cell.bias if on_input else None, None if on_input else cell.bias
    )


def step(model: Seq2Seq, prev: Tensor | None, state: State, source: Source) -> Tensor:
    """One decoder step t; advances ``state`` in place.

    :param prev: y_{t-1}, shape (B,), or None at t = 1 (ȳ_0 = 0).  :returns: the logits of step t, shape (B, V).
    """
    dec, variant, kind, train = model.decoder, model.decoder.variant, variant_kind(model), model.training
    if prev is None:
        y_prev = state.hidden.new_zeros(state.hidden.size(0), dec.emb_dim)
    else:
        y_prev = dropout(dec.embedding(prev), dec.dropout_embeddings, train)
    query = state.states.summary(variant.attention, state.hidden) if kind == "memory_rnn" else state.hidden
    intermediate = _cell(dec.cell1, y_prev, query)  # s'_t
    att = dec.attention
    scores = torch.tanh(source.keys + linear(intermediate, att.query_proj).unsqueeze(1)) @ att.v + att.score_bias
    alpha = torch.softmax(scores.masked_fill(~source.mask, float("-inf")), dim=-1)
    context = (alpha.unsqueeze(1) @ source.annotations).squeeze(1)  # c_t
    hidden = _cell(dec.cell2, context, intermediate)  # s_t

    if kind == "mean_residual":
        state.word_sum = state.word_sum + y_prev
        r_t = linear(state.word_sum / max(state.steps + 1 - variant.offset, 1), variant.prev_proj)
    elif kind == "self_attentive_residual":
        state.words.add(variant.attention, y_prev)
        r_t = linear(state.words.summary(variant.attention, hidden), variant.prev_proj)
    elif kind == "self_attentive_rnn":
        summary = state.states.summary(variant.attention, hidden)
        r_t = linear(y_prev, variant.prev_proj) + linear(summary, variant.summary_proj)
    else:  # baseline, Memory RNN
        r_t = linear(y_prev, variant.prev_proj)
    if kind in ("memory_rnn", "self_attentive_rnn"):
        state.states.add(variant.attention, hidden)
    state.hidden, state.steps = hidden, state.steps + 1
    readout, drop = dec.readout, dec.dropout_hidden
    features = torch.tanh(
        linear(dropout(hidden, drop, train), readout.hidden_proj)
        + linear(dropout(context, drop, train), readout.context_proj)
        + r_t
    )
    return linear(dropout(features, readout.dropout, train), readout.output)


def plain_logits(model: Seq2Seq, src: Tensor, src_mask: Tensor, tgt: Tensor) -> Tensor:
    """Teacher-forced logits at every position, equal to ``model(src, src_mask, tgt).logits``.

    :param src: (B, S).  :param src_mask: (B, S).  :param tgt: y_1 .. y_T with EOS, padded, (B, T).
    :returns: (B, T, V)."""
    source, state = encode(model, src, src_mask)
    logits = [step(model, None if t == 0 else tgt[:, t - 1], state, source) for t in range(tgt.size(1))]
    return torch.stack(logits, dim=1)


def plain_nll(model: Seq2Seq, src: Tensor, src_mask: Tensor, tgt: Tensor, tgt_mask: Tensor) -> Tensor:
    """−log p(y_t) through ``F.cross_entropy`` over every position, zeroed on padding.  :returns: (B, T)."""
    logits = plain_logits(model, src, src_mask, tgt)
    nll = F.cross_entropy(logits.flatten(0, 1), tgt.flatten(), reduction="none").view_as(tgt)
    return nll * tgt_mask.to(nll.dtype)


def _limits(src_mask: Tensor, max_len_a: float, max_len_b: int) -> list[int]:
    return [max(1, int(max_len_a * n + max_len_b)) for n in src_mask.sum(dim=1).tolist()]


@torch.no_grad()
def plain_greedy(model: Seq2Seq, src: Tensor, src_mask: Tensor, max_len_a: float, max_len_b: int) -> list[list[int]]:
    """The argmax at every step, the whole batch stepping until every sentence has emitted EOS or reached its
    limit ``a·|src| + b``.  :returns: each sentence's tokens without EOS."""
    source, state = encode(model, src, src_mask)
    limits = _limits(src_mask, max_len_a, max_len_b)
    out: list[list[int]] = [[] for _ in limits]
    prev = None
    for t in range(max(limits)):
        prev = step(model, prev, state, source).argmax(dim=-1)
        for b, token in enumerate(prev.tolist()):
            if t < limits[b] and (not out[b] or out[b][-1] != EOS):
                out[b].append(token)
        if all(len(o) == n or o[-1] == EOS for o, n in zip(out, limits, strict=True)):
            break
    return [_strip(o) for o in out]


@torch.no_grad()
def plain_beam(
    model: Seq2Seq, src: Tensor, src_mask: Tensor, beam_size: int, max_len_a: float, max_len_b: int, min_len: int = 0
) -> list[list[int]]:
    """Batched beam search with sarnmt's rule, written plainly: B·K rows step together; the best 2K candidates of
    each sentence are walked in Python, an EOS among them finishes a hypothesis (score / length, EOS included), the
    first K others form the next beam; a sentence is done with K finished hypotheses or at its length limit (its
    live hypotheses then finish as they are); no EOS before a hypothesis has ``min_len`` tokens.
    :returns: the best hypothesis of each sentence, without EOS."""
    k = beam_size
    source, state = encode(model, src, src_mask)
    batch = src.size(0)
    rows = torch.arange(batch, device=src.device).repeat_interleave(k)
    source, state = source.select(rows), state.select(rows)
    limits = _limits(src_mask, max_len_a, max_len_b)
    scores = torch.full((batch, k), float("-inf"), dtype=state.hidden.dtype, device=src.device)
    scores[:, 0] = 0.0
    tokens: list[list[list[int]]] = [[[] for _ in range(k)] for _ in range(batch)]
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(batch)]
    done = [False] * batch
    prev = None
    for t in range(max(limits)):
        log_probs = torch.log_softmax(step(model, prev, state, source).float(), dim=-1).view(batch, k, -1)
        if t < min_len:  # the hypotheses have t tokens: too few to end
            log_probs[..., EOS] = float("-inf")
        vocab = log_probs.size(-1)
        top, index = (scores.unsqueeze(-1) + log_probs).view(batch, -1).topk(min(2 * k, k * vocab), dim=-1)
        top_l, index_l = top.tolist(), index.tolist()
        new_scores = torch.full_like(scores, float("-inf"))
        parents, new_tokens = [[0] * k for _ in range(batch)], [[EOS] * k for _ in range(batch)]
        next_tokens: list[list[list[int]]] = [[[] for _ in range(k)] for _ in range(batch)]
        for b in range(batch):
            if done[b]:
                continue
            last = t + 1 == limits[b]
            live = 0
            for rank, (score, flat) in enumerate(zip(top_l[b], index_l[b], strict=True)):
                parent, token = divmod(flat, vocab)
                hypothesis = tokens[b][parent] + [token]
                if score == float("-inf"):
                    break
                if (token == EOS and rank < k) or last:
                    finished[b].append((score / len(hypothesis), hypothesis))
                elif token != EOS and live < k:
                    new_scores[b, live], parents[b][live], new_tokens[b][live] = score, parent, token
                    next_tokens[b][live] = hypothesis
                    live += 1
            done[b] = last or len(finished[b]) >= k
        if all(done):
            break
        flat_parents = (torch.arange(batch).unsqueeze(1) * k + torch.tensor(parents)).view(-1).to(src.device)
        state = state.select(flat_parents)
        scores, tokens = new_scores, next_tokens
        prev = torch.tensor(new_tokens, device=src.device).view(-1)
    return [_strip(max(pool, key=lambda entry: entry[0])[1]) if pool else [] for pool in finished]


def _strip(tokens: list[int]) -> list[int]:
    return tokens[:-1] if tokens and tokens[-1] == EOS else tokens


class PlainPeer:
    """The plain peer as the bench times it (:class:`sarnmt.bench.peer.Peer`).

    :param model: the timed system's ``model=`` node.  :param decoder: its ``decoder=`` node."""

    def __init__(self, model: Mapping[str, Any], decoder: Mapping[str, Any]) -> None:
        self.implements = model["_target_"] == PAPER_MODEL and get_class(decoder["_target_"]) in KINDS

    def nll(self, model: nn.Module, batch: TrainBatch) -> Tensor:
        """Logits at every position, padding included, then ``F.cross_entropy``.  :returns: (B, T)."""
        return plain_nll(model, batch.src, batch.src_mask, batch.tgt, batch.tgt_mask)

    def searches(self, max_len_a: float, max_len_b: int, beam_size: int) -> dict[str, SearchFn]:
        """Its batched greedy and beam loops."""
        return {
            "greedy": partial(plain_greedy, max_len_a=max_len_a, max_len_b=max_len_b),
            f"beam{beam_size}": partial(plain_beam, beam_size=beam_size, max_len_a=max_len_a, max_len_b=max_len_b),
        }

"""The test oracle: sarnmt's model written the textbook way, straight from the paper's and the appendix's equations.

sarnmt's core (:mod:`sarnmt.models`) is written for speed: the encoder projects the inputs of all positions and
both directions as one product and runs both directions in one loop (cuDNN's fused GRU on a GPU), the source
attention keys W_a h_j + b_a are projected once per batch, cell 1's input projections for all steps are one matrix
product before the recurrent loop, every loop's weight gradients are formed once after it, and the variants'
histories are scored for all steps at once with a causal mask. This module is the same model written the obvious
way, the clearest single statement of it, and what the tests hold sarnmt to (``tests/test_oracle.py``: logits and
gradients of every decoder variant and form, in float64):

- the encoder is a Python loop over source positions, forward then backward, of a hand-written GRU cell with
  dl4mt's masking (at a padded position the state is carried over unchanged);
- the decoder is a Python loop over target positions that, at every step, projects the cells' inputs, recomputes the
  attention keys W_a h_j + b_a over all source positions, and recomputes the keys and scores of every item of a
  variant's history (O(T²) projections per sentence);
- plain tensor operations only (matmul, sigmoid, tanh, softmax): no ``nn.GRU``, no packing, nothing cached.

A decoder variant's terms come from the decoder config the model factory reads (``sarnmt/conf/decoder/<name>.yaml``:
its ``_target_`` and switches): the paper's variants are written out below (:data:`STATED`); any other ``_target_``,
a variant of one's own, runs its own one-step hooks (``recurrent_input``, ``readout_step``), so the oracle still holds
its teacher-forced form to its step form and everything around it to the textbook, with nothing written here.

It owns no weights: it reads the parameters of a sarnmt :class:`~sarnmt.models.seq2seq.Seq2Seq` by attribute, so
it computes exactly ``model(src, src_mask, tgt).logits``, and an optimiser over ``model.parameters()`` trains
through it (``benchmarks/peers/textbook.py`` times it so, as the textbook peer of ``make bench-full``).

Dropout sits at sarnmt's sites and rates (source and target embeddings; annotations; s_t and c_t before the readout;
the readout) and is active when ``model.training``. Its random masks are not sarnmt's draws, so the two agree
exactly only with dropout 0 or in eval mode; with dropout they compute the same random function, which is all a
speed comparison needs.

The shapes: B sentences, S source and T target positions, e = embedding size, d = decoder state size, V = vocabulary.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from hydra.utils import get_class
from torch import Tensor, nn

from sarnmt.data.text.codecs import EOS
from sarnmt.models.attention import SourceAttention
from sarnmt.models.history import HistoryAttention
from sarnmt.models.seq2seq import Seq2Seq

# The paper's decoder variants, by the ``_target_`` of their configs (sarnmt/conf/decoder/*.yaml): the terms
# :func:`textbook_step` writes out for each (their switches, such as ``scorer`` or ``form``, read from the same
# config). Any other ``_target_`` runs the variant's own step hooks: a new variant needs nothing here.
STATED = {
    "sarnmt.models.variants.Baseline": "baseline",  # eq. 3
    "sarnmt.models.variants.MeanResidual": "mean_residual",  # eq. 9
    "sarnmt.models.variants.SelfAttentiveResidual": "self_attentive_residual",  # eqs. 10-13
    "sarnmt.models.variants.MemoryRNN": "memory_rnn",  # eqs. 14-17
    "sarnmt.models.variants.SelfAttentiveRNN": "self_attentive_rnn",  # eqs. 18-21
}


def switch(decoder: Mapping[str, Any], name: str) -> Any:
    """A switch of a decoder config, or the variant class's default where the config leaves it out."""
    if name in decoder:
        return decoder[name]
    return inspect.signature(get_class(decoder["_target_"])).parameters[name].default


def queried(decoder: Mapping[str, Any]) -> bool:
    """Whether the variant's history scores have a query term: content+scope (eq. 12), the appendix forms."""
    kind = STATED[decoder["_target_"]]
    if kind == "self_attentive_residual":
        return switch(decoder, "scorer") == "content_scope"
    return kind in ("memory_rnn", "self_attentive_rnn") and switch(decoder, "form") == "appendix"


def linear(x: Tensor, layer: nn.Linear) -> Tensor:
    """x Wᵀ + b with the weights of ``layer``.  :param x: shape (..., n).  :returns: shape (..., m)."""
    out = x @ layer.weight.T
    return out if layer.bias is None else out + layer.bias


def dropout(x: Tensor, site: nn.Dropout, training: bool) -> Tensor:
    """Dropout at rate ``site.p`` (one of the model's dropout modules), only in training mode."""
    return F.dropout(x, site.p, training)


def gru_cell(
    x: Tensor, h: Tensor, weight_ih: Tensor, weight_hh: Tensor, bias_ih: Tensor | None, bias_hh: Tensor | None
) -> Tensor:
    """One GRU step in PyTorch's gate order (r, u, candidate)::

        r  = σ(W_r x + bˣ_r + U_r h + bʰ_r)        u = σ(W_u x + bˣ_u + U_u h + bʰ_u)
        h̃  = tanh(W_c x + bˣ_c + r ⊙ (U_c h + bʰ_c))
        h' = u ⊙ h + (1 − u) ⊙ h̃

    dl4mt's cells have one bias, on the input side (encoder, decoder cell 1) or on the hidden side (cell 2).

    :param x: shape (B, n).  :param h: shape (B, d).  :param weight_ih: (3d, n).  :param weight_hh: (3d, d).
    :param bias_ih: (3d,) or None.  :param bias_hh: (3d,) or None.  :returns: h', shape (B, d).
    """
    gates_x = x @ weight_ih.T  # the input projection, at every step
    gates_h = h @ weight_hh.T
    if bias_ih is not None:
        gates_x = gates_x + bias_ih
    if bias_hh is not None:
        gates_h = gates_h + bias_hh
    x_r, x_u, x_c = gates_x.chunk(3, dim=-1)
    h_r, h_u, h_c = gates_h.chunk(3, dim=-1)
    r = torch.sigmoid(x_r + h_r)
    u = torch.sigmoid(x_u + h_u)
    candidate = torch.tanh(x_c + r * h_c)
    return u * h + (1 - u) * candidate


def decoder_cell(cell: nn.Module, x: Tensor, h: Tensor) -> Tensor:
    """A step of a decoder :class:`~sarnmt.models.gru.DL4MTGRUCell`, its bias on the side the cell says."""
    on_input = cell.bias_on == "input"
    return gru_cell(
        x, h, cell.weight_ih, cell.weight_hh, cell.bias if on_input else None, None if on_input else cell.bias
    )


def encode(model: Seq2Seq, src: Tensor, src_mask: Tensor) -> tuple[Tensor, Tensor]:
    """The bidirectional GRU encoder, one position at a time in each direction.

    :param src: source ids, shape (B, S).  :param src_mask: shape (B, S), True on real positions.
    :returns: the annotations h_j = [→h_j; ←h_j], shape (B, S, 2d), and s_0 = tanh(W_init mean_j h_j + b_init) over
        real positions, shape (B, d). At padding the forward half holds the last real state (dl4mt; sarnmt has
        zeros there); no later computation sees those positions.
    """
    enc, rnn = model.encoder, model.encoder.rnn
    emb = dropout(enc.embedding.weight[src], enc.dropout_embeddings, model.training)  # (B, S, e)
    mask = src_mask.unsqueeze(-1).to(emb.dtype)  # (B, S, 1)
    length = src.size(1)

    def run(suffix: str, positions: range) -> Tensor:
        weights = [getattr(rnn, name + suffix) for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0")]
        h = emb.new_zeros(src.size(0), rnn.hidden_size)
        states = [h] * length
        for j in positions:
            new = gru_cell(emb[:, j], h, *weights)
            h = mask[:, j] * new + (1 - mask[:, j]) * h  # dl4mt: padding keeps the previous state
            states[j] = h
        return torch.stack(states, dim=1)  # (B, S, d)

    # the backward pass meets the padding first and keeps its zero state there, so it starts at the last real token
    annotations = torch.cat([run("", range(length)), run("_reverse", range(length - 1, -1, -1))], dim=-1)
    mean = (annotations * mask).sum(dim=1) / mask.sum(dim=1)
    s0 = torch.tanh(linear(mean, enc.init_state))
    return dropout(annotations, enc.dropout_hidden, model.training), s0


def source_attention(att: SourceAttention, query: Tensor, annotations: Tensor, mask: Tensor) -> Tensor:
    """Bahdanau attention, keys included, from scratch::

        e_j = vᵀ tanh(W_a h_j + b_a + U_a s'_t) + c      α = softmax_j(e_j) over real positions      c_t = Σ_j α_j h_j

    :param query: s'_t, shape (B, d).  :param annotations: h, shape (B, S, 2d).  :param mask: shape (B, S).
    :returns: the context c_t, shape (B, 2d).
    """
    keys = linear(annotations, att.key_proj)  # (B, S, 2d): all source positions, at every step
    scores = torch.tanh(keys + linear(query, att.query_proj).unsqueeze(1)) @ att.v + att.score_bias  # (B, S)
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return (weights.unsqueeze(1) @ annotations).squeeze(1)


def history_summary(att: HistoryAttention, items: list[Tensor], query: Tensor, queried: bool) -> Tensor:
    """Additive attention over a variant's history m_0 .. m_{t-1}, every key and score recomputed::

        e_i = vᵀ tanh(W_k m_i + b [+ W_q q])      α = softmax_i(e_i)      summary = Σ_i α_i m_i

    :param items: t tensors of shape (B, k).  :param query: shape (B, d).
    :param queried: whether the scores have the query term W_q q (content+scope, the ``appendix`` forms: what the
        decoder config says, :func:`queried`).
    :returns: the summary, shape (B, k).
    """
    memory = torch.stack(items, dim=1)  # (B, t, k)
    keys = linear(memory, att.key_proj)  # all t items, at every step: O(T²) over a sentence
    if queried:
        keys = keys + linear(query, att.query_proj).unsqueeze(1)
    weights = torch.softmax(torch.tanh(keys) @ att.v, dim=-1)  # (B, t)
    return (weights.unsqueeze(1) @ memory).squeeze(1)


@dataclass
class History:
    """What step t reads of the steps before it.

    :param words: ȳ_0 .. ȳ_{t-1} once step t has begun (ȳ_0 = 0), each (B, e).
    :param states: s_0 .. s_{t-1}, each (B, d).
    :param hooks: the variant's own state (a variant the textbook does not state, which runs its own hooks).
    """

    words: list[Tensor] = field(default_factory=list)
    states: list[Tensor] = field(default_factory=list)
    hooks: dict[str, Tensor] = field(default_factory=dict)


def start(model: Seq2Seq, s0: Tensor) -> History:
    """The history before step 1.  :param s0: s_0, shape (B, d)."""
    return History(states=[s0], hooks=model.decoder.variant.init_state(s0))


def textbook_logits(model: Seq2Seq, decoder: Mapping[str, Any], src: Tensor, src_mask: Tensor, tgt: Tensor) -> Tensor:
    """Teacher-forced logits, equal to ``model(src, src_mask, tgt).logits``, computed the textbook way.

    :param model: a sarnmt model; its parameters are used in place (gradients reach them).
    :param decoder: the decoder config it was built from (``decoder=``), as the model factory reads it.
    :param src: source ids, shape (B, S).  :param src_mask: shape (B, S), True on real positions.
    :param tgt: gold target ids y_1 .. y_T with EOS, padded, shape (B, T).
    :returns: logits, shape (B, T, V).
    """
    annotations, s0 = encode(model, src, src_mask)
    history = start(model, s0)
    logits = []
    for t in range(tgt.size(1)):
        y_prev = None if t == 0 else tgt[:, t - 1]
        logits.append(textbook_step(model, decoder, y_prev, history, annotations, src_mask))
    return torch.stack(logits, dim=1)


def textbook_step(
    model: Seq2Seq,
    decoder: Mapping[str, Any],
    prev: Tensor | None,
    history: History,
    annotations: Tensor,
    mask: Tensor,
) -> Tensor:
    """One decoder step t (1-based; s_0 from the encoder, ȳ_0 = 0, no BOS token), from scratch::

        q_{t-1} = s_{t-1}, or the Memory RNN's summary of s_0 .. s_{t-1}
        s'_t    = GRU1(ȳ_{t-1}, q_{t-1})
        c_t     = attention(s'_t, h)
        s_t     = GRU2(c_t, s'_t)
        logits  = W_o tanh(W_st s_t + W_ct c_t + R_t)

    with R_t = W_yt ȳ_{t-1} (baseline, Memory RNN), W_yt d_t (residual variants: d_t the mean or the self-attentive
    summary of ȳ_0 .. ȳ_{t-1}) or W_yt ȳ_{t-1} + W_mt s̃_t (self-attentive RNN: s̃_t a summary of s_0 .. s_{t-1}).
    Appends ȳ_{t-1} to ``history.words`` and s_t to ``history.states``.

    :param decoder: the decoder config (see :func:`textbook_logits`).
    :param prev: y_{t-1}, shape (B,), or None at t = 1 (ȳ_0 = 0).  :param annotations: (B, S, 2d).
    :param mask: (B, S).  :returns: the logits of step t, shape (B, V).
    """
    dec, variant, train = model.decoder, model.decoder.variant, model.training
    kind = STATED.get(decoder["_target_"])  # None: the variant's own hooks
    words, states = history.words, history.states
    if prev is None:
        y_prev = states[0].new_zeros(states[0].size(0), dec.emb_dim)
    else:
        y_prev = dropout(dec.embedding.weight[prev], dec.dropout_embeddings, train)  # (B, e)
    words.append(y_prev)
    s_prev = states[-1]
    if kind is None:
        query, history.hooks, _ = variant.recurrent_input(s_prev, history.hooks)
    elif kind == "memory_rnn":  # s̃_t over s_0 .. s_{t-1}, appendix query s_{t-1}
        query = history_summary(variant.attention, states, s_prev, queried(decoder))
    else:
        query = s_prev

    intermediate = decoder_cell(dec.cell1, y_prev, query)  # s'_t, (B, d)
    context = source_attention(dec.attention, intermediate, annotations, mask)  # c_t, (B, 2d)
    s = decoder_cell(dec.cell2, context, intermediate)  # s_t, (B, d)

    if kind is None:
        steps = torch.tensor(len(words) - 1)  # t − 1, a long tensor of shape () as the decoder passes it
        r_t, history.hooks, _ = variant.readout_step(y_prev, s_prev, s, history.hooks, steps)
    elif kind == "mean_residual":  # d_t = Σ_{i<t} ȳ_i / (t or t - 1), ȳ_0 = 0
        offset = 0 if switch(decoder, "first_step") == "zero_slot" else 1
        r_t = linear(sum(words) / max(len(words) - offset, 1), variant.prev_proj)
    elif kind == "self_attentive_residual":  # d_t over ȳ_0 .. ȳ_{t-1}, scope query s_t
        r_t = linear(history_summary(variant.attention, words, s, queried(decoder)), variant.prev_proj)
    elif kind == "self_attentive_rnn":  # s̃_t over s_0 .. s_{t-1}, appendix query s_t
        summary = history_summary(variant.attention, states, s, queried(decoder))
        r_t = linear(y_prev, variant.prev_proj) + linear(summary, variant.summary_proj)
    else:  # baseline, Memory RNN
        r_t = linear(y_prev, variant.prev_proj)

    readout, drop_hidden = dec.readout, dec.dropout_hidden
    features = torch.tanh(
        linear(dropout(s, drop_hidden, train), readout.hidden_proj)
        + linear(dropout(context, drop_hidden, train), readout.context_proj)
        + r_t
    )
    states.append(s)
    return linear(dropout(features, readout.dropout, train), readout.output)  # (B, V)


@torch.no_grad()
def textbook_greedy(model: Seq2Seq, decoder: Mapping[str, Any], src: Tensor, src_mask: Tensor, max_len: int) -> Tensor:
    """Textbook greedy decoding: the whole batch steps until every sentence has emitted EOS or ``max_len`` steps.

    :param decoder: the decoder config (see :func:`textbook_logits`).  :param src: shape (B, S).
    :param src_mask: shape (B, S).  :returns: the chosen ids, shape (B, ≤ max_len).
    """
    annotations, s0 = encode(model, src, src_mask)
    history = start(model, s0)
    prev, out = None, []
    finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        prev = textbook_step(model, decoder, prev, history, annotations, src_mask).argmax(dim=-1)
        out.append(prev)
        finished |= prev == EOS
        if bool(finished.all()):
            break
    return torch.stack(out, dim=1)

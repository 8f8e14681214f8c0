"""Additive self-attention over a growing history of vectors: the shared piece of every self-attentive variant.

Scores (paper eqs. 12-13 and 15-21; appendix A.3.1-A.3.3)::

    content:        e_i^t = vᵀ tanh(W_k m_i + b)            (no query: the score of item i never changes)
    with a query:   e_i^t = vᵀ tanh(W_k m_i + b + W_q q_t)  (content+scope, and the appendix form of the RNNs)

    α^t = softmax over the visible items,  summary_t = Σ_i α_i^t m_i

The history m is the zero slot plus previous target embeddings (residual decoders) or s_0 .. s_{t-1} (Memory RNN,
self-attentive RNN). Step mode appends one item at a time. With content scoring an item's score never changes, so
the summary is a running softmax: with m = max_i e_i (a stabiliser only; the result does not depend on it)::

    summary_t = N_t / D_t,   N_t = Σ_i exp(e_i − m) m_i,   D_t = Σ_i exp(e_i − m)

updated in O(1) per step, rescaled when m grows, so a step costs the same at t = 100 as at t = 1 and beam search
reorders two vectors per hypothesis instead of its whole history; only the scores (t numbers per hypothesis) are
kept, for the attention weights. With a query the history is kept and rescored at every step (its projected keys
cached). A captured search step needs shapes that never change: :meth:`HistoryAttention.with_capacity` gives the
step-mode history room for every step (a count of the filled places; the places past it take no weight), and
:meth:`~HistoryAttention.append` and :meth:`~HistoryAttention.attend` compute the same from it. A history names its
own entries of the variant's state (``prefix``), so a variant's fixed-shape form is derived from its histories
(:meth:`~sarnmt.models.variants.base.DecoderVariant.with_capacity`).
:meth:`HistoryAttention.attend_all` computes every step of a teacher-forced sequence at once with a causal mask:
query t sees items 0 .. t; the tests check that both modes agree. :meth:`HistoryAttention.attend_window` is
the language models' form (Table 6): a segment of a continuous stream, items carried over from the previous
segment, each query seeing a window of the items before it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sarnmt.models.init import init_linear_, normal_


class HistoryAttention(nn.Module):
    """:param item_dim: size of a history item (e or d).  :param query_dim: size of the query, or None for
    content-only scoring.  :param key_bias: whether W_k has a bias (the released code's ``b_prev``).
    :param prefix: what the names of the history's entries in a variant's state begin with (``y_``: the previous
    words, ``s_``: the decoder states), so that two histories can share one state."""

    def __init__(self, item_dim: int, query_dim: int | None, key_bias: bool, prefix: str = "") -> None:
        super().__init__()
        self.prefix = prefix
        self.key_proj = init_linear_(nn.Linear(item_dim, item_dim, bias=key_bias))
        self.query_proj = init_linear_(nn.Linear(query_dim, item_dim, bias=False)) if query_dim is not None else None
        self.v = nn.Parameter(torch.empty(item_dim))
        normal_(self.v)

    def _score(self, keys: Tensor, query: Tensor | None = None) -> Tensor:
        """vᵀ tanh(keys [+ query]), the sum formed in a fresh buffer and squashed in place."""
        hidden = torch.tanh(keys) if query is None else torch.tanh_(keys + query)
        return torch.matmul(hidden, self.v)

    def empty(self, like: Tensor) -> dict[str, Tensor]:
        """An empty history for a batch of B sentences whose items have size k.

        Content scoring: ``{prefix}scores`` (B, 0), the running ``{prefix}num`` (B, k), ``{prefix}den`` (B,) and
        ``{prefix}max`` (B,). With a query: ``{prefix}values`` (B, 0, k) and projected keys ``{prefix}keys`` (B, 0, k).

        :param like: any tensor of shape (B, k) giving batch size, dtype and device.
        """
        batch, dim, prefix = *like.shape, self.prefix
        if self.query_proj is None:
            return {
                prefix + "scores": like.new_zeros(batch, 0),
                prefix + "num": like.new_zeros(batch, dim),
                prefix + "den": like.new_zeros(batch),
                prefix + "max": like.new_full((batch,), float("-inf")),
            }
        return {prefix + "values": like.new_zeros(batch, 0, dim), prefix + "keys": like.new_zeros(batch, 0, dim)}

    def with_capacity(self, history: dict[str, Tensor], capacity: int) -> dict[str, Tensor]:
        """The same history in its fixed-shape form, room for ``capacity`` items: what a step that must keep its
        shapes (a captured search step, :mod:`sarnmt.decoding.captured`) carries.

        The growing tensors are padded to ``capacity`` items (content scoring: ``{prefix}scores`` (B, capacity),
        -inf past the items, so their softmax weight is 0; with a query: ``{prefix}values`` and ``{prefix}keys``
        (B, capacity, k), zeros past the items) and ``{prefix}count`` (B,), long, says how many are filled (the
        same in every row). :meth:`append` then writes item ``count`` in place of growing, :meth:`attend` masks
        the places past it, and the weights it returns are (B, capacity), zero past the items.

        :raises ValueError: when the history already holds more than ``capacity`` items."""
        content, prefix = self.query_proj is None, self.prefix
        grown = history[prefix + ("scores" if content else "values")]
        batch, filled = grown.shape[:2]
        if filled > capacity:
            raise ValueError(f"a history of {filled} items does not fit a capacity of {capacity}")
        fixed = dict(history, **{prefix + "count": torch.full((batch,), filled, device=grown.device)})
        if content:
            fixed[prefix + "scores"] = F.pad(grown, (0, capacity - filled), value=float("-inf"))
        else:
            for name in ("values", "keys"):
                fixed[prefix + name] = F.pad(history[prefix + name], (0, 0, 0, capacity - filled))
        return fixed

    def append(self, history: dict[str, Tensor], item: Tensor) -> dict[str, Tensor]:
        """Add one item per sentence.  :param item: shape (B, k).  :returns: a new dict (inputs untouched)."""
        key, prefix = self.key_proj(item), self.prefix
        count = history.get(prefix + "count")  # the fixed-shape form (:meth:`with_capacity`): write item `count`
        grown = {} if count is None else {prefix + "count": count + 1}
        if self.query_proj is not None:
            return {
                **history,
                prefix + "values": _put(history[prefix + "values"], count, item),
                prefix + "keys": _put(history[prefix + "keys"], count, key),
                **grown,
            }
        score = self._score(key)  # (B,)
        old_max = history[prefix + "max"]
        new_max = torch.maximum(old_max, score).detach()  # the stabiliser carries no gradient: the sum ignores it
        rescale, weight = torch.exp(old_max - new_max), torch.exp(score - new_max)  # exp(-inf) = 0 at the start
        return {
            **history,
            **grown,
            prefix + "scores": _put(history[prefix + "scores"], count, score),
            prefix + "num": history[prefix + "num"] * rescale.unsqueeze(1) + weight.unsqueeze(1) * item,
            prefix + "den": history[prefix + "den"] * rescale + weight,
            prefix + "max": new_max,
        }

    def attend(self, history: dict[str, Tensor], query: Tensor | None) -> tuple[Tensor, Tensor]:
        """Summarise the history for one step.

        :param query: shape (B, query_dim), or None for content scoring.
        :returns: the summary, shape (B, k), and the weights, shape (B, t).
        """
        prefix = self.prefix
        if self.query_proj is None:
            summary = history[prefix + "num"] / history[prefix + "den"].unsqueeze(1)
            return summary, torch.softmax(history[prefix + "scores"], dim=-1)
        scores = self._score(history[prefix + "keys"], self.query_proj(query).unsqueeze(1))
        count = history.get(prefix + "count")
        if count is not None:  # the fixed-shape form: the places past the items take no weight
            places = torch.arange(scores.size(1), device=scores.device)
            scores = scores.masked_fill(places >= count.unsqueeze(1), float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        return torch.bmm(weights.unsqueeze(1), history[prefix + "values"]).squeeze(1), weights

    def attend_all(self, items: Tensor, queries: Tensor | None) -> tuple[Tensor, Tensor]:
        """Every step at once (teacher forcing).

        :param items: the history, shape (B, T, k); query t sees items 0 .. t.
        :param queries: shape (B, T, query_dim), or None for content scoring.
        :returns: summaries, shape (B, T, k), and weights, shape (B, T, T) (zero above the diagonal).
        """
        keys = self.key_proj(items)
        if self.query_proj is None:
            scores = self._score(keys).unsqueeze(1).expand(-1, items.size(1), -1)
        else:
            scores = self._score(keys.unsqueeze(1), self.query_proj(queries).unsqueeze(2))
        steps = items.size(1)
        causal = torch.ones(steps, steps, dtype=torch.bool, device=items.device).tril()
        weights = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        return torch.bmm(weights, items), weights

    def attend_window(
        self, items: Tensor, queries: Tensor | None, steps: int, window: int, current: bool
    ) -> tuple[Tensor, Tensor]:
        """Every step of a segment of a continuous stream at once, each seeing a window of the items before it
        (the language models of Table 6, :mod:`sarnmt.lm`).

        The last ``steps`` items belong to the segment; the M = N − ``steps`` before them are carried over from
        the previous segment. Query t (0-based) stands at item M + t and sees the ``window`` items ending there
        (``current``: M+t−window < i ≤ M+t, the residual connections' previous words, the current input included)
        or ending just before it (``not current``: M+t−window ≤ i < M+t, Daniluk et al.'s memory of previous
        outputs). A query that sees no item gets a zero summary.

        :param items: shape (B, N, k).  :param queries: shape (B, steps, query_dim), or None for content scoring.
        :returns: summaries, shape (B, steps, k), and weights, shape (B, steps, N) (zero outside the window).
        """
        carried = items.size(1) - steps
        keys = self.key_proj(items)
        if self.query_proj is None:
            scores = self._score(keys).unsqueeze(1).expand(-1, steps, -1)
        else:
            scores = self._score(keys.unsqueeze(1), self.query_proj(queries).unsqueeze(2))
        position = torch.arange(items.size(1), device=items.device)
        query_at = carried + torch.arange(steps, device=items.device).unsqueeze(1)
        last = query_at if current else query_at - 1
        visible = (position <= last) & (position > last - window)  # (steps, N)
        seen = visible.any(dim=1, keepdim=True)  # a row that sees nothing is left unmasked, then zeroed: no NaN
        weights = torch.softmax(scores.masked_fill(~visible & seen, float("-inf")), dim=-1).masked_fill(~seen, 0.0)
        return torch.bmm(weights, items), weights


def _put(items: Tensor, count: Tensor | None, item: Tensor) -> Tensor:
    """``items`` with ``item`` appended: concatenated after the last item (count None), or written at place
    ``count`` of the fixed-shape form, the same shapes in and out.

    :param items: shape (B, N) or (B, N, k).  :param count: the filled places, shape (B,), or None.
    :param item: shape (B,) or (B, k)."""
    if count is None:
        return torch.cat([items, item.unsqueeze(1)], dim=1)
    place = count.view(-1, *([1] * (items.dim() - 1))) == torch.arange(items.size(1), device=items.device).view(
        1, -1, *([1] * (items.dim() - 2))
    )
    return torch.where(place, item.unsqueeze(1).to(items.dtype), items)


STATE_SCORERS = ("count_consistent", "appendix")


def state_attention(hidden_dim: int, form: str) -> HistoryAttention:
    """Attention over previous decoder states for the Memory RNN and the self-attentive RNN.

    :param form: ``count_consistent`` (e_i = vᵀ tanh(W_m s_i), reproduces Table 1's counts) or ``appendix``
        (adds the query term W_s q of appendix A.3.2-A.3.3).
    """
    assert form in STATE_SCORERS, form  # checked where it enters (models/factory.py)
    return HistoryAttention(hidden_dim, hidden_dim if form == "appendix" else None, key_bias=False, prefix="s_")

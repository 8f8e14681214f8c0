"""The language models of Table 6 (sarnmt/lm): causality, the state carried across segments, parameter
parity at the configured sizes, overfitting, and the windowed forms of the shared attention and decoder variants."""

from __future__ import annotations

import re
from functools import partial

import pytest
import torch

from sarnmt.errors import InputError
from sarnmt.lm.daniluk import AttentionOutput, NgramOutput
from sarnmt.lm.heads import ModelConfigError as HeadConfigError
from sarnmt.lm.heads import PlainOutput, ResidualOutput
from sarnmt.lm.model import RecurrentLM
from sarnmt.models.factory import ModelConfigError, build_language_model
from sarnmt.models.history import HistoryAttention
from sarnmt.models.variants import MeanResidual, MemoryRNN, SelfAttentiveResidual, SelfAttentiveRNN
from sarnmt.utils.compose import compose

LM_MODELS = ["lstm", "attention_lstm", "ngram_lstm", "mean_residual_lstm", "self_attentive_residual_lstm"]
HEADS = {
    "lstm": partial(PlainOutput),
    "attention": partial(AttentionOutput, window=4),
    "ngram": partial(NgramOutput, order=4),
    "mean_residual": partial(ResidualOutput, variant=partial(MeanResidual), window=5),
    "self_attentive_content": partial(ResidualOutput, variant=partial(SelfAttentiveResidual), window=5),
    "self_attentive_content_scope": partial(
        ResidualOutput, variant=partial(SelfAttentiveResidual, scorer="content_scope"), window=5
    ),
}
V = 40


def tiny(head) -> RecurrentLM:
    torch.manual_seed(0)
    return RecurrentLM(V, 8, 12, head, init_std=0.3).double().eval()


def segment_nll(model, inputs, targets, state=None):
    mask = torch.ones_like(inputs, dtype=torch.bool)
    return model.nll(inputs, targets, mask, state)


@pytest.mark.parametrize("name", sorted(HEADS))
def test_carried_state_equals_one_long_segment(name):
    """Three segments, each starting from the state the previous one ended with (detached), give the losses of
    one 15-word segment: the carried memory holds all that each window needs."""
    model = tiny(HEADS[name])
    inputs, targets = torch.randint(0, V, (3, 15)), torch.randint(0, V, (3, 15))
    whole, _ = segment_nll(model, inputs, targets)
    parts, state = [], None
    for cut in (slice(0, 4), slice(4, 11), slice(11, 15)):
        nll, state = segment_nll(model, inputs[:, cut], targets[:, cut], state)
        state = state.detach()
        parts.append(nll)
    torch.testing.assert_close(torch.cat(parts, dim=1), whole, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", sorted(HEADS))
def test_causal(name):
    """Changing word t + 1 leaves the predictions of words 1 .. t + 1 unchanged and changes a later one."""
    model = tiny(HEADS[name])
    inputs = torch.randint(0, V, (2, 12))
    changed = inputs.clone()
    changed[:, 7] = (changed[:, 7] + 1) % V
    before, after = model(inputs).logits, model(changed).logits
    torch.testing.assert_close(before[:, :7], after[:, :7], rtol=0, atol=0)
    assert (before[:, 7:] - after[:, 7:]).abs().amax() > 1e-6


@pytest.mark.parametrize("name", ["attention", "mean_residual", "self_attentive_content", "ngram"])
def test_heads_see_their_window_only(name):
    """An item further back than a head's window leaves the last step's output unchanged; the oldest item inside
    it changes it (the residual heads' window ends with the input word, the attention's and N-gram's just before)."""
    torch.manual_seed(4)
    head = HEADS[name](emb_dim=6, hidden_dim=6).double()
    reach = {"attention": 4, "mean_residual": 4, "self_attentive_content": 4, "ngram": 2}[name]  # items back
    outputs, items = torch.randn(1, 3, 6, dtype=torch.float64), torch.randn(1, 12, 6, dtype=torch.float64)
    last = head(outputs, items)[0][:, -1]
    for back, changes in ((reach + 1, False), (reach, True)):
        moved = items.clone()
        moved[:, 11 - back] += 1.0
        difference = (head(outputs, moved)[0][:, -1] - last).abs().amax()
        assert (difference > 1e-9) == changes, (back, difference)


def test_window_attention_matches_causal_attention():
    """With no carried items and a window as long as the segment, the windowed form is the translation decoder's
    causal attention (`attend_all`), for content scoring and with a query."""
    torch.manual_seed(1)
    for query_dim in (None, 6):
        attention = HistoryAttention(5, query_dim, key_bias=True).double()
        items = torch.randn(2, 7, 5, dtype=torch.float64)
        queries = None if query_dim is None else torch.randn(2, 7, 6, dtype=torch.float64)
        expected = attention.attend_all(items, queries)
        got = attention.attend_window(items, queries, steps=7, window=7, current=True)
        torch.testing.assert_close(got[0], expected[0])
        torch.testing.assert_close(got[1], expected[1])


def test_mean_residual_window_is_the_mean_of_the_window():
    torch.manual_seed(2)
    variant = MeanResidual(4, 6, out_dim=6).double()
    items = torch.randn(2, 3 + 5, 4, dtype=torch.float64)  # 3 carried, 5 in the segment
    got, _ = variant.readout_window(items, torch.zeros(2, 5, 6, dtype=torch.float64), window=4)
    for t in range(5):
        at = 3 + t
        expected = variant.prev_proj(items[:, at - 3 : at + 1].mean(dim=1))
        torch.testing.assert_close(got[:, t], expected)


@pytest.mark.parametrize("variant", [MemoryRNN, SelfAttentiveRNN])
def test_state_variants_have_no_language_model_form(variant):
    with pytest.raises(HeadConfigError, match="has no language-model form"):
        ResidualOutput(8, 12, partial(variant), window=3)


@pytest.mark.parametrize(
    "head,window,says",
    [
        ("attention", 0, "model.head.window=0: must be 1 or more"),
        ("mean_residual", 0, "model.head.window=0: must be 1 or more"),
        ("attention", 2.5, "model.head.window=2.5: must be a whole number, 1 or more"),
        ("mean_residual", 2.5, "model.head.window=2.5: must be a whole number, 1 or more"),
    ],
)
def test_a_head_window_out_of_range_is_refused_in_the_one_form(head, window, says):
    """The windowed heads refuse a window below one word, or not a whole number of words, with the line of every range
    check (:func:`~sarnmt.errors.check_range`), naming the key as the command line gives it."""
    with pytest.raises(InputError, match=f"^{re.escape(says)}$"):
        HEADS[head](8, 12, window=window)


def test_ngram_needs_divisible_hidden_size():
    with pytest.raises(HeadConfigError, match="multiple of order - 1"):
        NgramOutput(8, 13, order=4)


def test_translation_model_is_not_a_language_model():
    with pytest.raises(ModelConfigError, match="lm_model= options: attention_lstm, lstm"):
        build_language_model(compose("train", []).model, 100)


def counts(overrides: list[str], vocab_size: int) -> dict[str, int]:
    found = {}
    for name in LM_MODELS:
        cfg = compose("lm", [f"lm_model={name}", *overrides])
        with torch.device("meta"):
            found[name] = sum(p.numel() for p in build_language_model(cfg.model, vocab_size).parameters())
    return found


def test_paper_sizes_have_the_same_parameter_count():
    """Table 6: "The number of parameters for all models is 47M" (with Daniluk et al.'s 77K-word vocabulary)."""
    found = counts([], 77_000)
    assert abs(found["lstm"] - 47_000_000) < 50_000
    assert max(found.values()) / min(found.values()) < 1.02, found


@pytest.mark.parametrize("name", sorted(HEADS))
def test_overfits_a_small_text(name):
    """A few hundred updates on one 30-word segment bring its perplexity near 1."""
    torch.manual_seed(3)
    model = RecurrentLM(V, 16, 24, HEADS[name], init_std=0.3)
    text = torch.randint(0, V, (1, 31))
    inputs, targets = text[:, :-1], text[:, 1:]
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(300):
        nll, _ = segment_nll(model, inputs, targets)
        optimizer.zero_grad()
        nll.mean().backward()
        optimizer.step()
    final, _ = segment_nll(model.eval(), inputs, targets)
    assert torch.exp(final.mean()) < 1.5

"""Decoding batches sized by tokens (``decoding.batch_tokens``, sarnmt/decoding/stream.py): the same outputs in the
same order as batches of sentences, batches that keep within the tokens, bad values refused in one line, and a
batch size halved when the device runs out of memory."""

from __future__ import annotations

import logging

import pytest
import torch
from omegaconf import OmegaConf

from sarnmt.decoding.beam import BeamSearch
from sarnmt.decoding.greedy import GreedySearch
from sarnmt.decoding.search import build_search
from sarnmt.decoding.stream import GPU_BATCH_TOKENS, cut, decode_stream
from sarnmt.errors import InputError
from tests.conftest import compose_train, decoder_cfg
from tests.model_helpers import VOCAB, build

CPU = torch.device("cpu")


def sources(count: int = 40, seed: int = 5) -> list[list[int]]:
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 13, (count,), generator=gen).tolist()  # some empty
    return [torch.randint(2, VOCAB, (n,), generator=gen).tolist() for n in lengths]


def outputs(results) -> list[tuple[list[int], float]]:
    return [(r.tokens, r.score) for r in results]


@pytest.mark.parametrize("search", [BeamSearch(beam_size=3), GreedySearch()], ids=["beam3", "greedy"])
def test_token_batches_give_the_sentence_batches_outputs_in_input_order(one_torch_thread, search):
    net = build(decoder_cfg("self_attentive_content"), seed=2)
    data = sources()
    one_by_one = outputs(decode_stream(net, search, data, 1, CPU))
    by_sentences = outputs(decode_stream(net, search, data, 4, CPU, chunk_batches=3))
    by_tokens = outputs(decode_stream(net, search, data, 4, CPU, chunk_batches=3, batch_tokens=30))
    search.batch_tokens = 17  # the search's own setting (decoding.batch_tokens), when the call gives none
    by_setting = outputs(decode_stream(net, search, data, 4, CPU))
    search.batch_tokens = None
    assert len(by_tokens) == len(data) and any(tokens for tokens, _ in by_tokens)
    for batched in (by_sentences, by_tokens, by_setting):
        assert [tokens for tokens, _ in batched] == [tokens for tokens, _ in one_by_one]
        assert [score for _, score in batched] == pytest.approx([score for _, score in one_by_one], abs=1e-9)


def test_batches_keep_within_the_tokens():
    lengths = [9, 3, 5, 20, 2, 5, 4, 3]
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches = list(cut(order, lengths, 100, 12))
    assert [i for rows in batches for i in rows] == order  # every sentence once, in the sorted order
    assert batches[0] == [3]  # longer than the tokens: alone
    for rows in batches[1:]:
        assert len(rows) * lengths[rows[0]] <= 12 and lengths[rows[0]] == max(lengths[i] for i in rows)
    assert list(cut(order, lengths, 3, None)) == [order[0:3], order[3:6], order[6:8]]


def test_a_gpu_takes_batches_of_tokens_by_default(monkeypatch):
    seen = []
    monkeypatch.setattr("sarnmt.decoding.stream.cut", lambda order, lengths, size, tokens: seen.append(tokens) or [])
    list(decode_stream(None, GreedySearch(), [[3, 4]], 64, torch.device("cuda")))
    list(decode_stream(None, GreedySearch(), [[3, 4]], 64, CPU))
    assert seen == [GPU_BATCH_TOKENS, None]


@pytest.mark.parametrize("value", [0, -5, 2.5e9, float("nan"), "many"])
def test_bad_batch_tokens_are_refused_in_one_line(value):
    """Where the setting enters (the decoding config, :func:`~sarnmt.decoding.search.check_decoding`): once; the
    stream trusts it (tests/test_settings_once.py)."""
    with pytest.raises(InputError, match=r"^decoding\.batch_tokens=") as err:
        build_search({**OmegaConf.to_container(compose_train(["decoding=beam"]).decoding), "batch_tokens": value})
    assert "\n" not in str(err.value)


def test_the_configs_default_is_unset_and_builds():
    for name in ("beam", "greedy"):
        assert build_search(compose_train([f"decoding={name}"]).decoding).batch_tokens is None
        assert build_search(compose_train([f"decoding={name}", "decoding.batch_tokens=4096"]).decoding).batch_tokens


def test_out_of_memory_halves_the_batch_tokens_and_goes_on(one_torch_thread, caplog):
    net = build(decoder_cfg("baseline"), seed=4)
    search = GreedySearch()
    sizes = []

    def small_device(model, src, src_mask, *args):
        sizes.append(src.numel())
        if src.numel() > 24:
            raise torch.OutOfMemoryError("CUDA out of memory (injected)")
        return search(model, src, src_mask, *args)

    data = sources(12)
    with caplog.at_level(logging.WARNING, logger="sarnmt"):
        got = outputs(decode_stream(net, small_device, data, 4, CPU, batch_tokens=100))
    assert got == outputs(decode_stream(net, search, data, 4, CPU))
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings[:2] == [
        "out of device memory at decoding.batch_tokens 100; halving it to 50 and going on",
        "out of device memory at decoding.batch_tokens 50; halving it to 25 and going on",
    ]
    assert max(sizes[-3:]) <= 24

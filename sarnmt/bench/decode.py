"""The benchmark's decoding figures: sentences per second of sarnmt's search beside its peers'
(:mod:`sarnmt.bench.peer`), on the same sources and weights.

sarnmt's greedy and beam searches run batched (``batch_size`` sentences per call) and one sentence at a time; each
peer runs its own batched searches (the plain peer its greedy and beam loops, the textbook model its greedy loop).
Weights are fresh (random): a few training steps already make EOS likely, which would end searches early; with random
weights every hypothesis runs to its length limit ``a·|src| + b`` in every implementation, so all of them do the same
number of steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import torch
from omegaconf import DictConfig
from torch import nn

from sarnmt.bench.measure import in_turn, median_rate, sources_of, timed
from sarnmt.bench.peer import Peer, SearchFn
from sarnmt.bench.workload import TrainBatch
from sarnmt.data.loading.batching import pad_sequences
from sarnmt.decoding.beam import BeamSearch
from sarnmt.decoding.greedy import GreedySearch
from sarnmt.decoding.penalties import LengthPenalty
from sarnmt.utils.precision import precision_context


def evenly_spaced(items: list, count: int) -> list:
    """``count`` items spread evenly over ``items`` (a batch sorted by length: short, middle and long ones alike)."""
    if count >= len(items):
        return list(items)
    return [items[i * len(items) // count] for i in range(count)]


def searches(cfg: DictConfig, peers: Mapping[str, Peer]) -> dict[str, tuple[SearchFn, bool]]:
    """Every timed search, by record key prefix, and whether it is sarnmt's own: sarnmt's ``greedy`` and ``beam<k>``,
    then each peer's as ``<peer>_<search>`` (``plain_greedy``, ``plain_beam<k>``, ``reference_greedy``)."""
    a, b, k = cfg.decode.max_len_a, cfg.decode.max_len_b, cfg.decode.beam_size
    out = {"greedy": (GreedySearch(a, b), True), f"beam{k}": (BeamSearch(k, LengthPenalty(), a, b), True)}
    for peer_name, peer in peers.items():
        for name, search in peer.searches(a, b, k).items():
            out[f"{peer_name}_{name}"] = (search, False)
    return out


def decode_rates(
    cfg: DictConfig, model: nn.Module, batches: list[TrainBatch], peers: Mapping[str, Peer]
) -> dict[str, float]:
    """Sentences/s of every search of :func:`searches` on the sources of the median-length batch: ``<name>_batched``
    for all, ``<name>_single`` (one sentence at a time, ``decode.single`` of them) for sarnmt's own; medians over
    ``repeats`` rounds, each round timing every search once, in reverse order every other round (sarnmt and its peers
    interleaved, as in training).

    :param peers: the peers that implement ``model``."""
    device = batches[0].src.device
    sources = sources_of(batches[len(batches) // 2])
    single = evenly_spaced(sources, cfg.decode.single)
    model.eval()
    rates: dict[str, float] = {}

    def run(search: SearchFn, group: list[list[int]]) -> None:
        src, mask = pad_sequences(group)
        search(model, src.to(device), mask.to(device))

    def run_each(search: SearchFn, group: list[list[int]]) -> None:
        for sentence in group:
            run(search, [sentence])

    timed_searches = searches(cfg, peers)
    batched: dict[str, list[tuple[float, float]]] = {name: [] for name in timed_searches}
    one_by_one: dict[str, list[tuple[float, float]]] = {name: [] for name, (_, own) in timed_searches.items() if own}
    with precision_context(device, cfg.precision), torch.no_grad():
        for search, _ in timed_searches.values():
            run(search, sources[:1])  # warm-up
        order = list(timed_searches.items())
        for repeat in range(cfg.repeats):  # every search once per repeat: a slow spell of the machine slows all alike
            for name, (search, _) in in_turn(order, repeat):
                batched[name].append((len(sources), timed(partial(run, search, sources), device)))
                if name in one_by_one:
                    one_by_one[name].append((len(single), timed(partial(run_each, search, single), device)))
    for name in timed_searches:
        rates[f"{name}_batched"] = median_rate(batched[name])
        if name in one_by_one:
            rates[f"{name}_single"] = median_rate(one_by_one[name])
    return rates

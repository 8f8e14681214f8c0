"""The textbook model (the tests' oracle, ``tests/oracle.py``) as a peer of the benchmark: ``peers.reference`` of
``make bench-full`` (``benchmarks/conf/peers/full.yaml``, :mod:`sarnmt.bench.peer`).

It recomputes the attention keys and every history score at every step, so sarnmt's speed-up over it is the upper
figure of what sarnmt's engineering buys. It computes any decoder variant of the paper's cGRU, one of one's own
included (through that variant's step hooks).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor, nn

from sarnmt.bench.peer import SearchFn
from sarnmt.bench.workload import TrainBatch
from sarnmt.models.factory import PAPER_MODEL
from sarnmt.training.loss import token_nll
from tests.oracle import textbook_greedy, textbook_logits


class TextbookPeer:
    """:param model: the timed system's ``model=`` node.  :param decoder: its ``decoder=`` node."""

    def __init__(self, model: Mapping[str, Any], decoder: Mapping[str, Any]) -> None:
        self.implements = model["_target_"] == PAPER_MODEL
        self.decoder = decoder

    def nll(self, model: nn.Module, batch: TrainBatch) -> Tensor:
        """The textbook logits at every position, (B, T, V), then PyTorch's cross-entropy.  :returns: (B, T)."""
        logits = textbook_logits(model, self.decoder, batch.src, batch.src_mask, batch.tgt)
        return token_nll(logits, batch.tgt, batch.tgt_mask)

    def searches(self, max_len_a: float, max_len_b: int, beam_size: int) -> dict[str, SearchFn]:
        """Its batched greedy loop, up to ``a·|src| + b`` tokens of the batch's longest source."""

        def greedy(model: nn.Module, src: Tensor, src_mask: Tensor) -> Tensor:
            return textbook_greedy(model, self.decoder, src, src_mask, int(max_len_a * (src.size(1) - 1) + max_len_b))

        return {"greedy": greedy}

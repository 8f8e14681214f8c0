"""What the benchmark times beside sarnmt: its *peers*, the same model written another way, on the same batches and
weights (:mod:`sarnmt.bench.run`).

The package has none. A peer is named in the bench config under ``peers`` (name -> a node whose ``_target_`` is its
class); a checkout's ``benchmarks/conf/peers/`` names two, which ``make bench`` and ``make bench-full`` add through
``hydra.searchpath`` (the option of ``peers`` follows ``bench_preset``): ``plain``, the model as a competent PyTorch
user writes it (``benchmarks/peers/plain.py``, both presets), and ``reference``, the textbook model that is the tests'
oracle (``tests/oracle.py`` through ``benchmarks/peers/textbook.py``, ``bench_preset=full``). Their figures go into the
record under their names (``plain_train_tok_s``, ``reference_greedy_batched``, ...).

The bench builds each peer once per timed system, ``instantiate(node, model=<its model= node>, decoder=<its decoder=
node>)``; a peer whose :attr:`Peer.implements` is false (the plain peer writes the paper's cGRU and its variants, not
the LSTM systems or a variant of one's own) is left out for that system.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from torch import Tensor, nn

from sarnmt.bench.workload import TrainBatch

# (model, src (B, S), src_mask (B, S)) -> anything: one batched search
SearchFn = Callable[[nn.Module, Tensor, Tensor], object]


class Peer(Protocol):
    """The interface of a peer: whether it computes the system it was built for, its loss and its searches."""

    implements: bool

    def nll(self, model: nn.Module, batch: TrainBatch) -> Tensor:
        """−log p(y_t) of the batch's gold targets through the peer's own forward pass and loss, shape (B, T), zero
        on padding (gradients reach ``model``'s parameters)."""
        ...

    def searches(self, max_len_a: float, max_len_b: int, beam_size: int) -> dict[str, SearchFn]:
        """The peer's batched searches, by record key (``greedy``, ``beam<k>``), each stopping at ``a·|src| + b``
        tokens."""
        ...

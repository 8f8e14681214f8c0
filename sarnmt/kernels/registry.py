"""Which kernel replaces which hot spot, under which flag: the flags and the one table of them.

Each row registers one kernel as the implementation of one named hot spot of the model's
:class:`~sarnmt.models.hot_spots.HotSpots` (the interface, which :mod:`sarnmt.models` owns; here it is any dataclass
with those fields) when its flag of :class:`Kernels` is on; with the flag off the hot spot keeps the model's own
equation. A row's builder gets the flags and the hot spots resolved by the rows above it (the unrolled encoder
runs whichever ``gru_update`` is chosen). ``sigmoid_tanh`` is no hot spot of its own: it is how the chunked
energies and the loop attention compute tanh.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeVar

from sarnmt.kernels.attention import scores_in_chunks
from sarnmt.kernels.encoder import unrolled_bigru
from sarnmt.kernels.gru import gru_update
from sarnmt.kernels.loop_attention import LoopAttention
from sarnmt.kernels.loop_linear import LoopLinear
from sarnmt.kernels.masked_lstm import masked_lstm
from sarnmt.kernels.output import every_position, linear_nll


@dataclass(frozen=True)
class Kernels:
    """Which kernels one call runs, one flag each (:mod:`sarnmt.kernels`).

    :param loop_weights: the teacher-forced loops' weight gradients, and the attention's source-side gradients,
        formed once after the loop (only with autograd on).
    :param gru_update: the GRU's gates and new state as one autograd node.
    :param unrolled_encoder: the bi-GRU as one Python loop over both directions (else PyTorch's packed GRU).
    :param fused_output: the output layer and the cross-entropy as one operation.
    :param chunked_attention: the search-time attention energies in cache-sized pieces (only without autograd).
    :param sigmoid_tanh: in those pieces and in the loop attention, tanh as 2σ(2x) − 1.
    :param static_shapes: no shape read from the device, so that a CUDA graph can hold the step (the captured
        training step, :mod:`sarnmt.training.capture`, turns it on; off under every ``kernels=`` choice): the
        output layer reads every padded position instead of selecting the real ones, and the encoders are loops
        over the padded positions (PyTorch's packed GRU and LSTM read the lengths on the host): the unrolled bi-GRU,
        the masked LSTM.
    """

    loop_weights: bool
    gru_update: bool
    unrolled_encoder: bool
    fused_output: bool
    chunked_attention: bool
    sigmoid_tanh: bool
    static_shapes: bool


# every kernel on; static shapes (no kernel, a form for capture) only where a captured step asks for them
FUSED = Kernels(*[True] * (len(Kernels.__dataclass_fields__) - 1), static_shapes=False)
PLAIN = Kernels(*[False] * len(Kernels.__dataclass_fields__))
# the kernels that only pay on a CPU, off on a GPU under ``kernels=auto``: the unrolled encoder (PyTorch's packed GRU
# is cuDNN's there), the cache-sized pieces of the search's energies (a Python loop over the batch at every step on
# a GPU; under ``kernels=fused`` they run as one piece there: :func:`sarnmt.kernels.attention.chunk_rows`) and tanh
# by the sigmoid (a CPU's tanh is slow, a GPU's is not). What else is sized for a CPU's cache is sized by the device
# where it runs: :func:`~sarnmt.kernels.attention.chunk_rows`, :func:`~sarnmt.kernels.output.block_rows`.
CPU_ONLY = ("unrolled_encoder", "chunked_attention", "sigmoid_tanh")

Spots = TypeVar("Spots")  # the model's hot spots (:class:`~sarnmt.models.hot_spots.HotSpots`), a dataclass
Builder = Callable[[Kernels, Any], Callable[..., Any]]


def unrolled(flags: Kernels, spots: Any) -> Callable[..., Any]:
    """The unrolled bi-GRU, running the ``gru_update`` chosen so far."""
    return partial(unrolled_bigru, gru_update=spots.gru_update, loop_weights=flags.loop_weights)


REGISTRY: tuple[tuple[str, str, Builder], ...] = (
    # (flag, hot spot, the kernel given the flags and the hot spots so far)
    ("gru_update", "gru_update", lambda flags, spots: gru_update),
    ("loop_weights", "step_linear", lambda flags, spots: LoopLinear),
    ("loop_weights", "step_attention", lambda flags, spots: partial(LoopAttention, sigmoid_tanh=flags.sigmoid_tanh)),
    (
        "chunked_attention",
        "attention_scores",
        lambda flags, spots: partial(scores_in_chunks, by_sigmoid=flags.sigmoid_tanh),
    ),
    ("unrolled_encoder", "bigru", unrolled),
    ("fused_output", "output_nll", lambda flags, spots: linear_nll),
    ("static_shapes", "output_rows", lambda flags, spots: every_position),
    ("static_shapes", "bigru", unrolled),
    ("static_shapes", "lstm_encoder", lambda flags, spots: masked_lstm),
)


def resolve(flags: Kernels, equations: Spots) -> Spots:
    """The hot spots' implementations under ``flags``: each registered kernel whose flag is on, in place of the
    model's equation."""
    spots = equations
    for flag, spot, build in REGISTRY:
        if getattr(flags, flag):
            spots = replace(spots, **{spot: build(flags, spots)})
    return spots

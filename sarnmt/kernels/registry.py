"""Which kernel replaces which hot spot, under which flag: the one table of them.

Each row registers one kernel as the implementation of one named hot spot of :class:`~sarnmt.kernels.choice.HotSpots`
when its flag of :class:`~sarnmt.kernels.choice.Kernels` is on; with the flag off the hot spot keeps the model's
own equation. A row's builder gets the flags and the hot spots resolved by the rows above it (the unrolled encoder
runs whichever ``gru_update`` is chosen). ``sigmoid_tanh`` is no hot spot of its own: it is how the chunked
energies and the loop attention compute tanh.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from sarnmt.kernels.attention import scores_in_chunks
from sarnmt.kernels.encoder import unrolled_bigru
from sarnmt.kernels.gru import gru_update
from sarnmt.kernels.loop_attention import LoopAttention
from sarnmt.kernels.loop_linear import LoopLinear
from sarnmt.kernels.output import linear_nll

if TYPE_CHECKING:
    from sarnmt.kernels.choice import HotSpots, Kernels

Builder = Callable[["Kernels", "HotSpots"], Callable[..., Any]]

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
    (
        "unrolled_encoder",
        "bigru",
        lambda flags, spots: partial(unrolled_bigru, gru_update=spots.gru_update, loop_weights=flags.loop_weights),
    ),
    ("fused_output", "output_nll", lambda flags, spots: linear_nll),
)


def resolve(flags: Kernels, equations: HotSpots) -> HotSpots:
    """The hot spots' implementations under ``flags``: each registered kernel whose flag is on, in place of the
    model's equation."""
    spots = equations
    for flag, spot, build in REGISTRY:
        if getattr(flags, flag):
            spots = replace(spots, **{spot: build(flags, spots)})
    return spots

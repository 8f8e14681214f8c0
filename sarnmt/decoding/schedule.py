"""How the search loop meets the host, a rule of the device: how often it learns that every sentence is done,
whether it then drops their rows, whether it scores candidates in float32 and whether it replays captured steps
(:func:`~sarnmt.decoding.beam.run_search` takes one; :meth:`Schedule.for_device` picks it)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch


@dataclass(frozen=True)
class Schedule:
    """How the search loop meets the host, a rule of the device (:meth:`for_device`).

    :param check_every: read whether every sentence is done every this many steps (1: at every step).
    :param compact: at each read, drop the rows of the sentences that are done (the shapes shrink, and the read
        blocks: it decides them). Otherwise a done sentence's rows stay in the batch, masked: they finish nothing
        and their pool stays as it was, and every step has the same shapes.
    :param lag: read the flag copied this many steps earlier (a non-blocking copy: the host does not wait for the
        device to finish the step it is queuing; the loop may run up to ``check_every + lag − 1`` steps past the
        end, which change nothing).
    :param exact: score the candidates from a float32 log-softmax of every slot's V logits (the search's
        original arithmetic, bit for bit); otherwise take them on the logits with their log-sum-exp
        (:meth:`~sarnmt.decoding.rule.BeamRule.candidates_from_logits`: no float32 copy of k × V logits).
    :param capture: replay every step after the first from one capture per shape bucket
        (:mod:`sarnmt.decoding.captured`; CUDA graphs on a GPU), where the model allows it (not under
        ``kernels=plain``, not when attention rows are asked for) and the batch fits a bucket; else the eager loop.
        Only with ``compact`` off and ``exact`` off (the loop it replays).
    """

    check_every: int
    compact: bool
    lag: int
    exact: bool
    capture: bool = False

    @property
    def masked(self) -> bool:
        """Whether a step may hold the rows of sentences that are done (masked: they finish nothing): every
        schedule but one that drops them after every step."""
        return not (self.compact and self.check_every == 1)

    @classmethod
    def for_device(cls, device: torch.device) -> Schedule:
        """On a CPU :data:`PER_STEP`: a read costs nothing there, dropping finished rows saves their work, and
        its products have the shapes that the search had before the GPU schedules (the CPU's matrix products round a row
        differently with the number of rows, so only these shapes give its bits). On a GPU :data:`CAPTURED`,
        elsewhere :data:`STATIC`."""
        if device.type == "cpu":
            return PER_STEP
        return CAPTURED if device.type == "cuda" else STATIC


PER_STEP = Schedule(check_every=1, compact=True, lag=0, exact=True)
STATIC = Schedule(check_every=8, compact=False, lag=2, exact=False)
CAPTURED = replace(STATIC, capture=True)

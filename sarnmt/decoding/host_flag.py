"""How a search loop learns, without waiting, that every sentence is done (:class:`~sarnmt.decoding.beam.Schedule`)."""

from __future__ import annotations

import torch
from torch import Tensor


class HostFlag:
    """A one-element device tensor on its way to the host: copied without blocking (into pinned memory, an event
    recorded behind the copy) and read later, when the device has most likely passed the copy long ago.

    :param flag: a bool tensor of one element, on any device."""

    def __init__(self, flag: Tensor) -> None:
        self.event = None
        if flag.is_cuda:
            self.host = torch.empty((), dtype=flag.dtype, pin_memory=True)
            self.host.copy_(flag, non_blocking=True)
            self.event = torch.cuda.Event()
            self.event.record()
        else:
            self.host = flag

    def read(self) -> bool:
        """The flag's value (waits for the copy if the device has not got there yet)."""
        if self.event is not None:
            self.event.synchronize()
        return bool(self.host.item())

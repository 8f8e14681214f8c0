"""How the search loop learns, without waiting, that every sentence is done
(:class:`~sarnmt.decoding.schedule.Schedule`): a flag copied to the host without blocking (:class:`HostFlag`), and
the loop's polling of those flags (:class:`DonePoll`), the same whether its steps are launched from Python or
replayed from a capture."""

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


class DonePoll:
    """When a search loop stops: "every sentence is done" is copied to the host every ``check_every`` steps
    (:class:`HostFlag`) and read ``lag`` steps later, so the host never waits for the step it has just queued.

    :param check_every: copy the flag at every step t with t % check_every == 0.
    :param lag: read the copy made this many steps earlier."""

    def __init__(self, check_every: int, lag: int) -> None:
        self.check_every, self.lag = check_every, lag
        self.flags: dict[int, HostFlag] = {}

    def stop(self, t: int, done: Tensor) -> bool:
        """Whether the loop may stop after step t.  :param done: whether each sentence is done after step t, shape
        (n,), on the device (copied, not read, at this step)."""
        if t % self.check_every == 0:
            self.flags[t] = HostFlag(done.all())
        flag = self.flags.pop(t - self.lag, None)
        return flag is not None and flag.read()

"""CUDA graphs per shape bucket, for any step that reads static buffers and leaves its results in static outputs:
the training step (:mod:`sarnmt.training.capture`) and the search step (:mod:`sarnmt.decoding.captured`).

:class:`Buckets` are the captured shapes (a batch runs in the smallest that holds it, padded), :class:`GraphBackend`
turns a body into its replay (:class:`CudaGraphs` on a GPU; :class:`Eager` runs the same body uncaptured, so the
bucket choice, padding and fallbacks are tested on the CPU), and :class:`BucketedGraphs` keeps one replay per bucket
with the fallbacks: a shape outside every bucket, a bucket beyond ``max_graphs`` or a capture that fails runs the
caller's eager step, with one warning per cause (never a crash, never a new capture per batch), and the causes are
kept (:attr:`BucketedGraphs.warned`) for the run's record. A bucket whose buffers or capture run out of device memory
sends only its bucket to the eager step (a smaller bucket may still fit); any other failure sends every later batch
there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import torch

from sarnmt.errors import InputError

log = logging.getLogger("sarnmt")
T = TypeVar("T")
Key = tuple[int, int, int]


@dataclass(frozen=True)
class Buckets:
    """The captured shapes: every combination of a row count, a source length and a target length.

    :param rows: batch sizes (sentences), ascending.  :param source: padded source lengths (EOS included).
    :param target: padded target lengths (EOS included).
    """

    rows: tuple[int, ...]
    source: tuple[int, ...]
    target: tuple[int, ...]

    @classmethod
    def from_config(cls, config: Any, key: str = "trainer.strategy.buckets") -> Buckets:
        """From ``{rows: [...], source: [...], target: [...]}``.  :raises InputError: naming the key of a list that
        is missing, empty, not ascending or holds a number below 1."""
        if isinstance(config, Buckets):
            return config
        sizes = []
        for name in ("rows", "source", "target"):
            values = list(config.get(name) or []) if config is not None else []
            good = values and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in values)
            if not good or values != sorted(set(values)):
                raise InputError(f"{key}.{name}={values}: must be a list of whole numbers >= 1, ascending")
            sizes.append(tuple(values))
        return cls(*sizes)

    def key(self, rows: int, source: int, target: int) -> Key | None:
        """The smallest bucket that holds the shape; None when a size is above every bucket's."""
        shape = (rows, source, target)
        chosen = [next((b for b in sizes if b >= n), None) for sizes, n in zip(self.all(), shape, strict=True)]
        return None if None in chosen else tuple(chosen)  # type: ignore[return-value]

    def all(self) -> tuple[tuple[int, ...], ...]:
        return self.rows, self.source, self.target


class GraphBackend(Protocol):
    """Turns a body (a function of static buffers, returning static outputs) into its replay."""

    def capture(self, body: Callable[[], T]) -> Callable[[], T]: ...


class Eager:
    """No capture: the replay runs the body again (CPU tests, and a reference for the captured step)."""

    def __init__(self) -> None:
        self.captures = 0

    def capture(self, body: Callable[[], T]) -> Callable[[], T]:
        self.captures += 1
        return body


class CudaGraphs:
    """``torch.cuda.CUDAGraph`` capture (PyTorch's "whole network capture"): ``warmup`` eager runs on a side stream
    (lazy initialisations, cuBLAS workspaces, autograd's streams), then one capture; every graph allocates from one
    shared memory pool (graphs never run concurrently, and each graph's outputs are used before the next replay).

    :param warmup: eager runs before capturing (PyTorch's examples use 3; DDP needs 11).
    """

    def __init__(self, warmup: int = 3) -> None:
        self.warmup = warmup
        self.pool = None
        self.graphs: list[Any] = []

    def capture(self, body: Callable[[], T]) -> Callable[[], T]:
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(self.warmup):
                body()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            outputs = body()
        self.graphs.append(graph)

        def replay() -> T:
            graph.replay()
            return outputs

        return replay


class BucketedGraphs:
    """One captured body per bucket, with the fallbacks of the module docstring.

    :param buckets: the captured shapes.  :param backend: how a body is captured.
    :param max_graphs: at most this many captures (each holds its activations' memory); later buckets run eager.
    :param what: named in the warnings (``training step``).  :param dims: what the three sizes of a shape are.
    """

    def __init__(
        self, buckets: Buckets, backend: GraphBackend, max_graphs: int, what: str, dims: str = "rows, source, target"
    ) -> None:
        self.buckets, self.backend, self.max_graphs, self.what = buckets, backend, max_graphs, what
        self.dims = dims
        self.replays: dict[Key, Callable[[], Any]] = {}
        self.statics: dict[Key, Any] = {}
        self.broken = False  # a capture failed: eager from then on
        self.too_big: set[Key] = set()  # buckets whose capture ran out of device memory: eager for those only
        self.warned: dict[str, str] = {}  # cause: the first message of that cause (what a run's record names)
        self.eager_steps = 0

    def warn_once(self, cause: str, message: str) -> None:
        """Log ``message`` once per ``cause`` (and keep it in :attr:`warned`)."""
        if cause not in self.warned:
            self.warned[cause] = message
            log.warning("%s: %s; it runs eagerly (this warning is shown once)", self.what, message)

    def choose(self, shape: tuple[int, int, int]) -> Key | None:
        """The bucket ``shape`` runs in; None where the eager step must run (after a failed capture, for a shape
        outside every bucket or in a bucket too big to capture: warned once, and counted in ``eager_steps``)."""
        key = self.buckets.key(*shape)
        if self.broken:
            return self._eager()
        if key is None:
            self.warn_once("outside", f"a batch of shape {shape} ({self.dims}) is outside the buckets {self}")
            return self._eager()
        if key in self.too_big:
            return self._eager()
        return key

    def prepare(
        self,
        shape: tuple[int, int, int],
        make: Callable[[Key], Any],
        fill: Callable[[Any], None],
        body: Callable[[Any], T],
    ) -> Callable[[], T] | None:
        """Fill the static buffers of ``shape``'s bucket and return the replay of its body, to be called as often as
        the caller needs (a search step replays once per step); None where the eager step must run (warned once per
        cause). A bucket's first use allocates its buffers (``make``), fills them and captures the body, all inside
        the guard against running out of device memory; it is followed by a second ``fill``: the backend's warm-up
        runs may have changed the buffers (a body that updates its own buffers, as the search step does)."""
        key = self.choose(shape)
        if key is None:
            return None
        if key not in self.replays:
            if len(self.replays) >= self.max_graphs:
                self.warn_once(
                    "limit", f"bucket {key} would be graph {len(self.replays) + 1} of max_graphs={self.max_graphs}"
                )
                return self._eager()
            try:
                static = make(key)
                fill(static)
                self.replays[key] = self.backend.capture(lambda: body(static))
            except torch.OutOfMemoryError as err:  # this bucket is too big to hold as a graph; smaller ones may not be
                self.too_big.add(key)
                message = f"capturing bucket {key} ran out of device memory ({err}): that bucket, and any other that"
                self.warn_once("memory", message + " does")
                return self._eager()
            except Exception as err:  # noqa: BLE001 - any capture failure: the eager step computes the same
                self.broken = True
                self.warn_once("capture", f"capturing bucket {key} failed ({type(err).__name__}: {err})")
                return self._eager()
            self.statics[key] = static
        fill(self.statics[key])
        return self.replays[key]

    def _eager(self) -> None:
        self.eager_steps += 1
        return None

    def __str__(self) -> str:
        return f"rows {list(self.buckets.rows)}, source {list(self.buckets.source)}, target {list(self.buckets.target)}"

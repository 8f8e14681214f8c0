"""The training step as a CUDA graph per shape bucket (``trainer=gpu``; ``kernels=plain`` turns it off).

Why ``torch.cuda.graphs`` with static buffers and not ``torch.compile(mode="reduce-overhead")``: the step's work is
one forward and one backward pass of ~75 kernels per target position from Python (docs/performance.md); capturing
it needs (a) shapes that repeat, which bucketing gives either way, and (b) a step the host never waits on. With
``reduce-overhead`` a graph is recorded per compiled shape and a graph break (a host sync, a data-dependent shape,
Lightning's hooks) silently splits the step into eagerly launched pieces, and every new shape recompiles: the
"recompile storm" this module must rule out. With explicit graphs the buckets are ours, a shape outside them is seen
on the host before anything runs, and a step that cannot be captured fails at capture, once, loudly.

What is captured: the forward pass, the loss and the backward pass of one padded batch, reading the batch from
static input buffers of the bucket's shape and leaving the loss and the parameters' gradients in static outputs.
Gradient clipping and the optimizer update stay outside, in Lightning's usual order, where the callbacks see them
(:class:`~sarnmt.training.nonfinite.NonFiniteGuard` skips a non-finite update before it happens, as without
capture): both are a handful of multi-tensor kernels (the update is ``torch.optim.Adadelta``'s ``foreach`` one on a
GPU, :class:`sarnmt.training.optim.Adadelta`), against thousands in the passes.

A batch of R sentences, source length S and target length T (padded, EOS included) runs in the smallest bucket
(R', S', T') with R' >= R, S' >= S, T' >= T (:class:`Buckets`): positions past the real lengths are masked, and the
R' − R extra rows copy row 0 with weight 0, so that every row's arithmetic is finite and none adds to the loss::

    loss = Σ_r w_r Σ_t nll_{r,t} / R          (sentence; w_r = 1 for the R real rows, 0 for the padding rows)
    loss = Σ_r w_r Σ_t nll_{r,t} / Σ_r w_r Σ_t m_{r,t}          (token)

A batch outside every bucket, a bucket beyond ``max_graphs``, or a step whose capture fails runs the eager step,
with one warning per cause (never a crash, never a new capture per batch). The capture itself is behind
:class:`GraphBackend`: :class:`CudaGraphs` on a GPU; :class:`Eager` runs the same body without capturing, so the
bucket choice, the padding, the fallbacks and their warnings are tested on the CPU.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import torch
from lightning.pytorch.strategies import SingleDeviceStrategy
from torch import Tensor

from sarnmt.data.loading.batching import Batch
from sarnmt.errors import InputError
from sarnmt.training.loss import translation_loss

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
    :param what: named in the warnings (``training step``).
    """

    def __init__(self, buckets: Buckets, backend: GraphBackend, max_graphs: int, what: str) -> None:
        self.buckets, self.backend, self.max_graphs, self.what = buckets, backend, max_graphs, what
        self.replays: dict[Key, Callable[[], Any]] = {}
        self.statics: dict[Key, Any] = {}
        self.broken = False  # a capture failed: eager from then on
        self.warned: set[str] = set()
        self.eager_steps = 0

    def warn_once(self, cause: str, message: str) -> None:
        if cause not in self.warned:
            self.warned.add(cause)
            log.warning("%s: %s; it runs eagerly (this warning is shown once)", self.what, message)

    def run(
        self,
        shape: tuple[int, int, int],
        make: Callable[[Key], Any],
        fill: Callable[[Any], None],
        body: Callable[[Any], T],
    ) -> T | None:
        """Fill the static buffers of ``shape``'s bucket and replay its body (capturing it the first time).

        :param make: the static buffers of a bucket.  :param fill: copies this batch into them.
        :param body: the work, reading the buffers.
        :returns: the body's static outputs; None where the eager step must run instead (warned once per cause).
        """
        key = self.buckets.key(*shape)
        if self.broken:
            return self._eager()
        if key is None:
            self.warn_once("outside", f"a batch of shape {shape} (rows, source, target) is outside the buckets {self}")
            return self._eager()
        if key not in self.replays:
            if len(self.replays) >= self.max_graphs:
                self.warn_once(
                    "limit", f"bucket {key} would be graph {len(self.replays) + 1} of max_graphs={self.max_graphs}"
                )
                return self._eager()
            static = make(key)
            fill(static)
            try:
                self.replays[key] = self.backend.capture(lambda: body(static))
            except Exception as err:  # noqa: BLE001 - any capture failure: the eager step computes the same
                self.broken = True
                self.warn_once("capture", f"capturing bucket {key} failed ({type(err).__name__}: {err})")
                return self._eager()
            self.statics[key] = static
        else:
            fill(self.statics[key])
        return self.replays[key]()

    def _eager(self) -> None:
        self.eager_steps += 1
        return None

    def __str__(self) -> str:
        return f"rows {list(self.buckets.rows)}, source {list(self.buckets.source)}, target {list(self.buckets.target)}"


@dataclass
class StaticBatch:
    """A bucket's input buffers: the batch's tensors at the bucket's shape, ``real`` (R',) marking its real rows,
    ``scale`` the loss's factor R'/R (sentence normalization; 1 for token)."""

    src: Tensor
    src_mask: Tensor
    tgt: Tensor
    tgt_mask: Tensor
    real: Tensor
    scale: Tensor

    @classmethod
    def empty(cls, key: Key, like: Batch, device: torch.device) -> StaticBatch:
        rows, source, target = key
        return cls(
            src=torch.zeros(rows, source, dtype=like.src.dtype, device=device),
            src_mask=torch.zeros(rows, source, dtype=like.src_mask.dtype, device=device),
            tgt=torch.zeros(rows, target, dtype=like.tgt.dtype, device=device),
            tgt_mask=torch.zeros(rows, target, dtype=like.tgt_mask.dtype, device=device),
            real=torch.zeros(rows, dtype=torch.bool, device=device),
            scale=torch.ones((), dtype=torch.float32, device=device),
        )

    def fill(self, batch: Batch, normalization: str) -> None:
        """Copy ``batch`` in: padded positions masked, rows R..R'−1 copies of row 0 with ``real`` False."""
        rows = batch.src.size(0)
        for buffer, value in ((self.src, batch.src), (self.src_mask, batch.src_mask)):
            buffer.zero_()
            buffer[:rows, : value.size(1)].copy_(value, non_blocking=True)
            buffer[rows:] = buffer[0]
        for buffer, value in ((self.tgt, batch.tgt), (self.tgt_mask, batch.tgt_mask)):
            buffer.zero_()
            buffer[:rows, : value.size(1)].copy_(value, non_blocking=True)
            buffer[rows:] = buffer[0]
        self.real.zero_()
        self.real[:rows] = True
        self.scale.fill_(self.real.size(0) / rows if normalization == "sentence" else 1.0)


def padded_loss(net: torch.nn.Module, static: StaticBatch, normalization: str) -> tuple[Tensor, Tensor, Tensor]:
    """The loss of the real rows of a padded batch (module docstring's equations).

    :returns: the loss (0-d), the summed NLL of the real target tokens and their count."""
    weight = static.real.unsqueeze(1)
    with net.kernels.static_shapes():  # every position read out, the masked encoder: no host read in the step
        nll = net.nll(static.src, static.src_mask, static.tgt, static.tgt_mask) * weight
    mask = static.tgt_mask & weight
    loss = translation_loss(nll, mask, normalization) * static.scale
    return loss, nll.sum(), mask.sum()


AUTOCAST = {"bf16-mixed": torch.bfloat16}  # Lightning precisions that autocast without a gradient scaler


class CaptureStrategy(SingleDeviceStrategy):
    """Lightning's single-device strategy whose training step replays a captured forward-backward pass.

    The captured path returns the loss (detached) from :meth:`training_step` and, in :meth:`backward`, hands the
    captured gradients to the parameters; Lightning then clips and steps the optimizer as usual. Everything else
    (validation, test, the eager fallback) is :class:`~lightning.pytorch.strategies.SingleDeviceStrategy`'s.

    :param device: the device (``cuda``: the current CUDA device).  :param buckets: :class:`Buckets` or its config.
    :param kernels: the run's ``kernels=`` choice; ``plain`` turns the capture off.
    :param max_graphs: at most this many captured buckets.  :param backend: :class:`CudaGraphs` by default.
    """

    def __init__(
        self,
        device: str | torch.device = "cuda",
        buckets: Buckets | dict | None = None,
        kernels: str = "auto",
        max_graphs: int = 16,
        backend: GraphBackend | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(device=device, **kwargs)
        self.enabled = kernels != "plain"
        self.buckets = Buckets.from_config(buckets) if self.enabled or buckets is not None else None
        if max_graphs < 1:
            raise InputError(f"trainer.strategy.max_graphs={max_graphs}: must be 1 or more")
        self.max_graphs = max_graphs
        self.backend = backend
        self.graphs: BucketedGraphs | None = None
        self._grads: tuple[Tensor | None, ...] | None = None
        self._params: list[Tensor] = []
        self._shared: list[Tensor] = []

    def _setup_graphs(self) -> BucketedGraphs:
        if self.graphs is None:
            backend = self.backend if self.backend is not None else CudaGraphs()
            self.graphs = BucketedGraphs(self.buckets, backend, self.max_graphs, "captured training step")
            self._params = [p for p in self.lightning_module.parameters() if p.requires_grad]
            self._shared = [torch.zeros_like(p) for p in self._params]
        return self.graphs

    def training_step(self, *args: Any, **kwargs: Any) -> Any:
        batch = args[0] if args else kwargs.get("batch")
        self._grads = None
        if not self.enabled or not isinstance(batch, Batch):
            return super().training_step(*args, **kwargs)
        graphs = self._setup_graphs()
        precision = str(getattr(self.precision_plugin, "precision", "32-true"))
        if precision.endswith("-mixed") and precision not in AUTOCAST:
            graphs.warn_once("precision", f"trainer.precision={precision} scales gradients, which is not captured")
            return super().training_step(*args, **kwargs)
        accumulate = getattr(self.lightning_module.trainer, "accumulate_grad_batches", 1)
        if accumulate > 1:  # the captured gradients replace .grad; accumulating needs them added
            graphs.warn_once("accumulate", f"trainer.accumulate_grad_batches={accumulate} adds gradients up")
            return super().training_step(*args, **kwargs)
        module = self.lightning_module
        normalization = module.hparams.loss_normalization
        outputs = graphs.run(
            (batch.size, batch.src.size(1), batch.tgt.size(1)),
            lambda key: StaticBatch.empty(key, batch, self.root_device),
            lambda static: static.fill(batch, normalization),
            lambda static: self._body(static, normalization, AUTOCAST.get(precision)),
        )
        if outputs is None:
            return super().training_step(*args, **kwargs)
        loss, nll_sum, tokens, grads = outputs
        self._grads = grads
        loss = loss.detach().clone()
        module.log_training(loss, nll_sum.clone(), tokens.clone(), batch.size)
        return loss

    def _body(self, static: StaticBatch, normalization: str, dtype: torch.dtype | None) -> tuple:
        """The captured work: forward (autocast without its weight cache, which a graph cannot hold), backward into
        fresh gradients, copied into one set of gradient buffers that every graph shares (so that the graphs hold
        one model's gradients between them, not one each)."""
        for param in self._params:
            param.grad = None
        autocast = nullcontext() if dtype is None else torch.autocast(self.root_device.type, dtype, cache_enabled=False)
        with autocast:
            loss, nll_sum, tokens = padded_loss(self.lightning_module.net, static, normalization)
        loss.backward()
        grads = [p.grad for p in self._params]
        used = [i for i, grad in enumerate(grads) if grad is not None]
        torch._foreach_copy_([self._shared[i] for i in used], [grads[i] for i in used])
        for param in self._params:
            param.grad = None
        shared = tuple(self._shared[i] if grads[i] is not None else None for i in range(len(grads)))
        return loss.detach(), nll_sum.detach(), tokens, shared

    def backward(self, closure_loss: Tensor, optimizer: Any, *args: Any, **kwargs: Any) -> Tensor:
        if self._grads is None:
            return super().backward(closure_loss, optimizer, *args, **kwargs)
        for param, grad in zip(self._params, self._grads, strict=True):
            param.grad = grad  # the captured step's static gradients; clipping and the update read them in place
        self._grads = None
        return closure_loss

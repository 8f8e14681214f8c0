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
bucket choice, the padding, the fallbacks and their warnings are tested on the CPU. The buckets, the backends and
the per-bucket cache are shared with the captured search step (:mod:`sarnmt.utils.graphs`).
"""

from __future__ import annotations

import logging
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from lightning.pytorch.strategies import SingleDeviceStrategy
from torch import Tensor

from sarnmt.data.loading.batching import Batch
from sarnmt.kernels.choice import captures
from sarnmt.training.loss import translation_loss
from sarnmt.utils.graphs import BucketedGraphs, Buckets, CudaGraphs, Eager, GraphBackend, Key  # noqa: F401

log = logging.getLogger("sarnmt")


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
    :param kernels: the run's ``kernels=`` choice; the capture runs where it :func:`~sarnmt.kernels.choice.captures`.
    :param max_graphs: at most this many captured buckets (trusted: checked where it enters,
        :func:`~sarnmt.training.settings.check_training`).  :param backend: :class:`CudaGraphs` by default.
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
        self.enabled = captures(kernels)
        self.buckets = Buckets.from_config(buckets) if self.enabled or buckets is not None else None
        assert max_graphs >= 1, "trainer.strategy.max_graphs reached the strategy unchecked (check_training)"
        self.max_graphs = max_graphs
        self.backend = backend
        self.graphs: BucketedGraphs | None = None
        self._grads: tuple[Tensor | None, ...] | None = None
        self._params: list[Tensor] = []
        self._shared: list[Tensor] = []
        self._other_batches = False  # a batch that is no translation batch was met (warned once)

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
        if not self.enabled:
            return super().training_step(*args, **kwargs)
        if not isinstance(batch, Batch):  # a language model's segments: only translation steps are captured
            if not self._other_batches:
                self._other_batches = True
                log.warning(
                    "captured training step: a batch of type %s is not a translation batch; its steps run eagerly "
                    "(this warning is shown once)",
                    type(batch).__name__,
                )
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
        replay = graphs.prepare(
            (batch.size, batch.src.size(1), batch.tgt.size(1)),
            lambda key: StaticBatch.empty(key, batch, self.root_device),
            lambda static: static.fill(batch, normalization),
            lambda static: self._body(static, normalization, AUTOCAST.get(precision)),
        )
        if replay is None:
            return super().training_step(*args, **kwargs)
        loss, nll_sum, tokens, grads = replay()
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

"""The fast implementations of the models' hot spots, and the choice among them, in one place.

:mod:`sarnmt.models` states each equation once, as the paper and its appendix write it, and calls its hot spots
through one :class:`~sarnmt.models.hot_spots.HotSpots` (the interface, owned by the models) that the model's
:class:`~sarnmt.kernels.choice.KernelChoice` resolves once per model call (from ``kernels=auto|fused|plain``, the
device and whether autograd records) and passes down. Every kernel here
computes the same equation as the model's own implementation (the tests compare them in float64); they differ in how
many kernels run and how much memory traffic there is (docs/performance.md). The table of which kernel replaces which
hot spot is :data:`sarnmt.kernels.registry.REGISTRY`:

- flag ``gru_update``, hot spot ``gru_update``: :func:`~sarnmt.kernels.gru.gru_update`, the GRU's gates and new
  state as one autograd node with a hand-written backward;
- ``loop_weights``, ``step_linear``: :class:`~sarnmt.kernels.loop_linear.LoopLinear`, a teacher-forced loop's
  per-step matrices with their weight gradients formed once after the loop;
- ``loop_weights``, ``step_attention``: :class:`~sarnmt.kernels.loop_attention.LoopAttention`, the loop's source
  attention with its source-side gradients formed once after the loop;
- ``chunked_attention``, ``attention_scores``: :func:`~sarnmt.kernels.attention.scores_in_chunks`, the search-time
  energies a few sentences at a time in a cache-sized buffer;
- ``unrolled_encoder``, ``bigru``: :func:`~sarnmt.kernels.encoder.unrolled_bigru`, the bi-GRU as one Python loop
  over both directions instead of PyTorch's packed GRU;
- ``fused_output``, ``output_nll``: :func:`~sarnmt.kernels.output.linear_nll`, the output layer and the
  cross-entropy as one operation;
- ``sigmoid_tanh``, no hot spot of its own: in the two kernels of the attention energies, tanh as 2σ(2x) − 1
  (:func:`~sarnmt.kernels.attention.tanh_`).

This package imports nothing from :mod:`sarnmt.models`: the model hands its own implementations in
(:data:`sarnmt.models.hot_spots.EQUATIONS`).
"""

from sarnmt.kernels.choice import CHOICES, KernelChoice, Kernels

__all__ = ["CHOICES", "KernelChoice", "Kernels"]

"""Training a translation model, around a plain ``nn.Module`` of the model factory.

- The LightningModule (:mod:`.lit_module`: training, validation and test steps, BLEU) and the loss it minimises
  (:mod:`.loss`: per-sentence or per-token NLL, the output layer and the cross-entropy fused).
- The optimiser (:mod:`.optim`: dl4mt's Adadelta, fused).
- Checkpoints during a run (what they hold, reading and writing them: :mod:`sarnmt.checkpoints`): Lightning's
  atomic writer and the resume checkpoint (:mod:`.resume`), a run's identity stored in them so that a resume of
  another run is refused (:mod:`.identity`), one run at a time in a run folder (:mod:`.run_lock`).
- Staying up: a checkpoint and a clean stop on a preemption signal (:mod:`.preemption`), updates with a non-finite
  loss or gradient skipped (:mod:`.nonfinite`).

The language models of Table 6 reuse the resume, identity and lock modules; their LightningModule is
:mod:`sarnmt.lm.module`. A training run is :func:`.run.train` (checkpoint averaging:
:mod:`sarnmt.checkpoints.averaging`), which ``sarnmt train`` (:mod:`sarnmt.cli.train`), the table sweep and the tests
call.
"""

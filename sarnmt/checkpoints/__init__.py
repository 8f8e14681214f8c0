"""Checkpoints, below training and everything that decodes: what a sarnmt checkpoint holds and how it is written
(:mod:`.writing`), reading one without unpickling code and rebuilding its model (:mod:`.reading`), the allow-list its
stored model config is checked against (:mod:`.stored_config`), checkpoints of earlier versions read as today's
(:mod:`.migration`), and the average of several (:mod:`.averaging`).

Training writes checkpoints through :mod:`.writing` and resumes from them (:mod:`sarnmt.training`); ``translate``,
``evaluate``, ``average``, the analyses and the sweeps read them through this package alone, so decoding a checkpoint
never depends on the training package (``.importlinter`` says so).
"""

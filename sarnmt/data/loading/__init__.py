"""Batches and the Lightning DataModules that serve them.

Padded batches and their collate function (:mod:`~sarnmt.data.loading.batching`), the token-budget sampler
(:mod:`~sarnmt.data.loading.sampler`), the base translation DataModule with the training filter
(:mod:`~sarnmt.data.loading.translation`), and the concrete ones: a described corpus prepared and cached on disk
(:mod:`~sarnmt.data.loading.prepared_corpus`) and text held in memory, the toy corpus or parallel files
(:mod:`~sarnmt.data.loading.in_memory`).
"""

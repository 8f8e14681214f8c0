"""Where corpora come from and how they are prepared.

The catalogue of described corpora (:mod:`~sarnmt.data.corpora.catalog`: downloads, archive layout, splits, line
counts), fetching their files (:mod:`~sarnmt.data.corpora.fetch`), preparing and caching them once with the paper's
pipeline (:mod:`~sarnmt.data.corpora.preparation`, the cache's :mod:`~sarnmt.data.corpora.manifest`), and the
synthetic toy corpus, generated (:mod:`~sarnmt.data.corpora.toy`) and read back
(:mod:`~sarnmt.data.corpora.toy_reading`).
"""

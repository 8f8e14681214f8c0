"""Turning text into ids and back, for one language side at a time.

Strict line reading (:mod:`~sarnmt.data.text.reading`) and WMT SGML test sets (:mod:`~sarnmt.data.text.sgml`); the
codec interface and the word codec with the vocabulary convention (:mod:`~sarnmt.data.text.codecs`); BPE
(:mod:`~sarnmt.data.text.subword`); the Moses truecaser (:mod:`~sarnmt.data.text.truecase`) and the paper's
preprocessing pipeline (:mod:`~sarnmt.data.text.pipeline`). Nothing here knows about corpora, batches or Lightning.
"""

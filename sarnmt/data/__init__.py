"""Corpora, text codecs, batching and DataModules."""

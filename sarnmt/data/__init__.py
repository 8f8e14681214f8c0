"""Everything between text on disk and batches of ids, in three layers, each depending only on those before it.

:mod:`sarnmt.data.text` turns text into ids and back (strict line reading, SGML, truecasing, BPE, the codecs, the
paper's Moses pipeline); :mod:`sarnmt.data.corpora` says where corpora come from and prepares them (the catalogue
of described corpora, downloads, the prepared cache and its manifest, the synthetic toy corpus);
:mod:`sarnmt.data.loading` batches them and holds the Lightning DataModules. No module of ``sarnmt.data`` imports
another inside a function, and the module-level imports form no circle (``tests/test_data_layout.py``).
"""

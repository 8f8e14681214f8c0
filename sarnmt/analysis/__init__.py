"""The paper's analysis (§8) and a probe beyond it, as functions and commands (``python -m sarnmt analyze``).

- :mod:`~sarnmt.decoding.attention_file` (below, as ``translate`` writes them too): the attention files of
  ``translate attention=…`` (read, write, checked).
- :mod:`~sarnmt.analysis.runs`: a checkpoint's attention over a test set (decoded, teacher-forced, or read from a
  file and checked to be that model's on that test set).
- :mod:`~sarnmt.analysis.positions`: Figure 2, where each prediction's target self-attention peaks (§8.1).
- :mod:`~sarnmt.analysis.heatmaps`: Figure 3, one sentence's attention matrices, one panel per model.
- :mod:`~sarnmt.analysis.trees`, :mod:`~sarnmt.analysis.parseval`, :mod:`~sarnmt.analysis.tree_report`,
  :mod:`~sarnmt.analysis.drawing`: Algorithm 1's trees scored with ParsEval against gold trees (§8.2, Figure 4).
- :mod:`~sarnmt.analysis.examples`: Table 7, sentences where one system beats the other by sentence BLEU (§8.3).
- :mod:`~sarnmt.analysis.agreement`: long-distance agreement of the toy corpus's final verb, per decoder.
"""


class AnalysisError(ValueError):
    """Bad input to an analysis (a file, a line, a key): the message names it; the commands print it as one line."""

"""The word-level recurrent language models of Table 6 (after Daniluk et al. 2017), everything they need in one
package beside the translation models.

- The model: one LSTM (:mod:`.model`) and its output layers (:mod:`.heads`: plain and residual; :mod:`.daniluk`:
  attention and N-gram), built by :func:`sarnmt.models.factory.build_language_model` from an ``lm_model=`` node.
- The data: a corpus folder or the mini English corpus prepared and cached (:mod:`.corpus`, :mod:`.mini`), its
  vocabulary and token-id streams (:mod:`.vocab`), the streams cut into segments of ``bptt`` words
  (:mod:`.segments`) and served by the DataModule (:mod:`.datamodule`).
- Training: the LightningModule (:mod:`.module`), fitted and tested by :func:`.run.train_lm`, which ``sarnmt lm``
  (:mod:`sarnmt.cli.lm`) and the table sweep call.
"""

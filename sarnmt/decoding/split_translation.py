"""A corpus split translated by a model: :func:`translate_split` decodes raw source lines (length-sorted batches,
:mod:`sarnmt.decoding.stream`) and pairs the translations, plain and tokenised, with their references in a
:class:`SplitOutput`, whose :meth:`~SplitOutput.scores` are the paper's BLEU forms and chrF.

``sarnmt evaluate`` (:mod:`sarnmt.cli.evaluate`) and the table sweep's jobs (:mod:`sarnmt.sweep.job`) call it.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import torch
from torch import nn
from tqdm import tqdm

from sarnmt.data.text.codecs import TextCodec
from sarnmt.decoding.input_limit import InputLimit
from sarnmt.decoding.search import Search
from sarnmt.decoding.stream import decode_stream
from sarnmt.evaluation.bleu import Score, corpus_bleu, corpus_chrf
from sarnmt.utils.precision import precision_context


@dataclass
class SplitOutput:
    """The translations of a split: ``plain`` (detokenised, detruecased), ``tokenized`` (the target codec's
    tokenised form), the references in both forms, and the decoding time in seconds."""

    plain: list[str]
    tokenized: list[str]
    references: list[str]
    references_tokenized: list[str]
    seconds: float
    bleu_tokenize: str = "13a"

    def scores(self) -> dict[str, Score]:
        """``bleu`` (13a on plain text against the raw references: NIST mteval-v13a style, Table 3), ``bleu_tok``
        and ``bleu_tok_lc`` (``tokenize=none`` on the tokenised text: multi-bleu.perl and its ``-lc``, Tables 1, 2,
        4) and ``chrf``."""
        return {
            "bleu": corpus_bleu(self.plain, self.references, tokenize=self.bleu_tokenize),
            "bleu_tok": corpus_bleu(self.tokenized, self.references_tokenized, tokenize="none"),
            "bleu_tok_lc": corpus_bleu(self.tokenized, self.references_tokenized, tokenize="none", lowercase=True),
            "chrf": corpus_chrf(self.plain, self.references),
        }


def translate_split(
    net: nn.Module,
    src_codec: TextCodec,
    tgt_codec: TextCodec,
    sources: list[str],
    references: list[str],
    search: Search,
    batch_size: int,
    device: torch.device,
    precision: str = "fp32",
    progress: bool = True,
    desc: str = "decode",
    bleu_tokenize: str = "13a",
    limit: InputLimit | None = None,
) -> SplitOutput:
    """Decode raw source lines (a blank line gives an empty translation) and pair them with their references.

    :param limit: the longest source decoded (:class:`~sarnmt.decoding.input_limit.InputLimit`); None: no limit."""
    if limit is not None:  # each line encoded from at most limit.max_chars characters
        encoded = [limit.encode(src_codec, line, line_no)[0] for line_no, line in enumerate(sources, 1)]
    else:
        encoded = [src_codec.encode(line) if line.strip() else [] for line in sources]
    start = time.perf_counter()
    with precision_context(device, precision):
        results = list(
            tqdm(
                decode_stream(net, search, encoded, batch_size, device),
                total=len(encoded),
                desc=desc,
                unit=" sent",
                disable=not progress,
                file=sys.stderr,
            )
        )
    seconds = time.perf_counter() - start
    return SplitOutput(
        plain=[tgt_codec.decode(r.tokens) if r.tokens else "" for r in results],
        tokenized=[tgt_codec.decode_tokenized(r.tokens) if r.tokens else "" for r in results],
        references=list(references),
        references_tokenized=[tgt_codec.tokenize(line) for line in references],
        seconds=seconds,
        bleu_tokenize=bleu_tokenize,
    )

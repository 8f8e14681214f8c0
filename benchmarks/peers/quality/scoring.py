"""Every system's test output scored one way, the way sarnmt's tables score its own.

A peer writes BPE pieces (``justific@@ ation``); :func:`postprocess` merges them (subword-nmt's rule,
:func:`sarnmt.data.text.subword.merge_bpe`) into the tokenised form, and detokenises that with the target side of
sarnmt's pipeline (detruecasing, Moses detokenisation: :meth:`sarnmt.data.text.pipeline.PipelineCodec.detokenize`),
exactly what sarnmt does with its own ids. Then (:func:`score`):

- ``bleu``: sacrebleu, ``13a`` tokenisation, on the detokenised output against the raw references (NIST mteval-v13a
  style, Table 3's form);
- ``bleu_tok``: sacrebleu, ``tokenize=none``, on the tokenised output against the tokenised, truecased references
  (multi-bleu.perl's form, Tables 1, 2, 4), the form sarnmt's mini records report beside it;

with the per-sentence statistics of both (:func:`sarnmt.sweep.stats.sentence_statistics`) for the seed-aware test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sarnmt.data.text.pipeline import Pipeline
from sarnmt.data.text.reading import read_lines
from sarnmt.data.text.subword import merge_bpe
from sarnmt.evaluation.bleu import corpus_bleu
from sarnmt.sweep.stats import sentence_statistics

METRICS = ("bleu", "bleu_tok")


class Scorer:
    """Scores outputs against the exported references of ``data`` (:mod:`benchmarks.peers.quality.data`)."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self._codec = None

    @property
    def codec(self):
        if self._codec is None:
            self._codec = Pipeline.load(self.data / "pipeline.json").codec("tgt")
        return self._codec

    def postprocess(self, bpe_lines: list[str]) -> tuple[list[str], list[str]]:
        """BPE pieces -> ``(plain, tokenised)`` lines."""
        tokenised = [" ".join(merge_bpe(line.strip()).split()) for line in bpe_lines]
        return [self.codec.detokenize(line) if line else "" for line in tokenised], tokenised

    def references(self, split: str) -> tuple[list[str], list[str]]:
        """``(raw, tokenised)`` references of ``split``."""
        return read_lines(self.data / f"{split}.raw.de"), read_lines(self.data / f"{split}.tok.de")

    def score(self, split: str, plain: list[str], tokenised: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(scores, per-sentence statistics)`` of one test set: :data:`METRICS`, each ``{score, signature,
        detail}``; the statistics ``{metric: [[hyp_len, ref_len, correct_1..4, total_1..4], ...]}``."""
        raw, tok = self.references(split)
        if len(plain) != len(raw):
            raise ValueError(f"{split}: {len(plain)} hypotheses for {len(raw)} references")
        pairs = {"bleu": (plain, raw, "13a"), "bleu_tok": (tokenised, tok, "none")}
        scores = {m: corpus_bleu(h, r, tokenize=t).as_dict() for m, (h, r, t) in pairs.items()}
        stats = {m: sentence_statistics(h, r, m) for m, (h, r, _) in pairs.items()}
        return scores, stats

    def dev_bleu_tok(self, bpe_lines: list[str]) -> float:
        """Tokenised BLEU of dev output in BPE pieces (a peer's validation hypotheses) against ``val.tok.de``."""
        _, tokenised = self.postprocess(bpe_lines)
        return corpus_bleu(tokenised, self.references("val")[1], tokenize="none").score

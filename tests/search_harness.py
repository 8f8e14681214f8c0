"""The search-equivalence harness: every system × search × batch × length penalty × n-best, on tiny random models.

Each case decodes one batch with :class:`~sarnmt.decoding.beam.BeamSearch` (or
:class:`~sarnmt.decoding.greedy.GreedySearch`) and reduces the result to plain JSON: every sentence's tokens, raw and
normalised scores, the n-best lists, and a SHA-256 of the attention rows' bytes. The scores are Python floats of the
float32 pool, which JSON writes and reads back exactly, so equal JSON means bit-identical hypotheses and scores.

``tests/fixtures/write_search_harness.py`` recorded every case from the search as it was before issue 40 (the
commit is in the fixture); ``tests/test_search_harness.py`` decodes them again with today's search and compares.

The axes (:func:`cases`):

- system: every (model, decoder, switch) of ``tests.conftest.SYSTEMS`` (24), float32, weights scaled so that the
  distributions are peaked and hypotheses end at different steps;
- search: greedy, and beam k = 1, 3, 5;
- batch: 1, 3 and 8 sentences of 1-9 source tokens (output limits 1.5·|src| + 5: up to 18 steps);
- length penalty (beam only): dl4mt's (alpha=1), none (alpha=0) and GNMT's (alpha=0.6, offset=5), the forms the
  ``decoding=`` configs and the docs name;
- n-best: 1 (with attention rows) and k (without them), for k > 1;
- and min_len = 3 once per system and beam size (batch 8, dl4mt's penalty).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from typing import Any

import torch

from sarnmt.data.loading.batching import pad_sequences
from sarnmt.decoding.beam import BeamSearch
from sarnmt.decoding.greedy import GreedySearch
from sarnmt.decoding.penalties import LengthPenalty
from tests import model_helpers
from tests.conftest import SYSTEM_IDS, SYSTEMS

PENALTIES = {"dl4mt": (1.0, 0.0), "none": (0.0, 0.0), "gnmt": (0.6, 5.0)}
SEARCHES = ("greedy", "beam1", "beam3", "beam5")
BATCHES = (1, 3, 8)
MAX_LEN_A, MAX_LEN_B = 1.5, 5


@dataclass(frozen=True)
class Case:
    """One decode of the harness: ``system`` indexes ``SYSTEMS``."""

    system: int
    search: str
    batch: int
    penalty: str
    nbest: int
    min_len: int = 0

    @property
    def beam_size(self) -> int:
        return 1 if self.search == "greedy" else int(self.search.removeprefix("beam"))

    @property
    def attention(self) -> bool:
        return self.nbest == 1

    @property
    def key(self) -> str:
        return f"{SYSTEM_IDS[self.system]}|{self.search}|b{self.batch}|{self.penalty}|n{self.nbest}|m{self.min_len}"

    @property
    def fast(self) -> bool:
        """In the default test run: batch 8, greedy and beam 5 (either n-best) with dl4mt's penalty."""
        return self.batch == 8 and self.penalty in ("dl4mt", "-") and self.search in ("greedy", "beam5")


def cases() -> list[Case]:
    """Every case, in a fixed order."""
    out = []
    for system in range(len(SYSTEMS)):
        for search in SEARCHES:
            for batch in BATCHES:
                if search == "greedy":
                    out.append(Case(system, search, batch, "-", 1))
                    continue
                k = int(search.removeprefix("beam"))
                for penalty in PENALTIES:
                    for nbest in sorted({1, k}):
                        out.append(Case(system, search, batch, penalty, nbest))
            if search != "greedy":
                out.append(Case(system, search, 8, "dl4mt", 1, min_len=3))
        out.append(Case(system, "greedy", 8, "-", 1, min_len=3))
    return out


@cache
def model(system: int) -> torch.nn.Module:
    """The tiny float32 model of one system (seeded by its index)."""
    name = SYSTEMS[system]
    return model_helpers.build_system(*name, seed=system, scale=6.0).float()


@cache
def sources(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch`` sentences of 1-9 tokens (seeded by the batch size)."""
    gen = torch.Generator().manual_seed(100 + batch)
    lengths = torch.randint(1, 10, (batch,), generator=gen).tolist()
    return pad_sequences([torch.randint(2, model_helpers.VOCAB, (n,), generator=gen).tolist() for n in lengths])


def search_of(case: Case):
    if case.search == "greedy":
        return GreedySearch(MAX_LEN_A, MAX_LEN_B, case.min_len)
    alpha, offset = PENALTIES[case.penalty]
    return BeamSearch(case.beam_size, LengthPenalty(alpha, offset), MAX_LEN_A, MAX_LEN_B, case.min_len)


def digest(tensors: list[torch.Tensor]) -> str:
    """SHA-256 of the tensors' shapes, dtypes and bytes."""
    h = hashlib.sha256()
    for tensor in tensors:
        h.update(f"{tuple(tensor.shape)}{tensor.dtype}".encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def run(case: Case) -> dict[str, Any]:
    """Decode one case; the result as plain JSON data."""
    src, src_mask = sources(case.batch)
    hyps = search_of(case)(model(case.system), src, src_mask, return_attention=case.attention, nbest=case.nbest)
    return {
        "tokens": hyps.tokens,
        "scores": hyps.scores,
        "normalized_scores": hyps.normalized_scores,
        "nbest": [[[e.tokens, e.score, e.normalized_score] for e in entries] for entries in hyps.nbest],
        "src_attention": digest(hyps.src_attention),
        "tgt_attention": digest(hyps.tgt_attention),
    }

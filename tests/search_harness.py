"""The search-equivalence harness: every system × search × batch × length penalty × n-best, on tiny random models.

Each case decodes one batch with :class:`~sarnmt.decoding.beam.BeamSearch` (or
:class:`~sarnmt.decoding.greedy.GreedySearch`) and reduces the result to plain JSON: every sentence's tokens, raw and
normalised scores, the n-best lists, three fixed projections of each sentence's attention rows (source and target
history) and a SHA-256 of the attention rows' bytes. The scores are Python floats of the float32 pool, which JSON
writes and reads back exactly.

``tests/fixtures/write_search_harness.py`` records every case, with each sentence's tolerance and its near ties
(:func:`sensitivity`); ``tests/test_search_harness.py`` decodes them again and compares within those tolerances, or
bit for bit on the fixture's kind of CPU with ``SARNMT_HARNESS_EXACT=1``.

The models' weights are drawn by NumPy (PCG64), not by torch: torch's CPU samplers take other code paths on other
instruction sets (ATen's ``normal_fill`` has an AVX2 form), so ``torch.randn`` under one seed gives weights that
differ by about 1e-8 between an AVX-512 and an AVX2 machine, and these peaked models carry such a change into the
scores at up to 1e-2. NumPy's generator gives the same float64 numbers everywhere, rounded once to float32.

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
import math
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
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
SCALE = 6.0  # the weights' standard deviation is 0.3 * SCALE: peaked distributions, hypotheses of many lengths
INIT_BOUND = 1 / math.sqrt(8)  # plus PyTorch's default recurrent init, U(-1/sqrt(hidden), 1/sqrt(hidden)), hidden 8
# the floors of the tolerances (see tests/fixtures/write_search_harness.py): float32 keeps 7 significant digits, and
# one product's summation order (other kernels on other instruction sets) moves a sum of 18 log-probabilities by a
# few units of the last digit; 1e-5 is about 80 float32 epsilons, and a score changed by 1e-3 is far outside it
SCORE_RTOL_FLOOR = 1e-5
ATTENTION_ATOL_FLOOR = 1e-5  # attention weights lie in [0, 1]: the same floor, absolute
PROJECTIONS = 3


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


def weights(system: int, perturbation: int = 0) -> dict[str, np.ndarray]:
    """Every parameter of one system's model as NumPy float64 arrays, the same on every machine (seeded by the
    system's index). ``perturbation`` > 0 multiplies each by ``1 ± 2**-23`` (signs drawn with that seed): a change of
    about one float32 rounding, the size of what another instruction set's kernels change."""
    net = model_helpers.build_system(*SYSTEMS[system], seed=system)
    rng = np.random.default_rng(system)
    out = {}
    for name, param in net.named_parameters():
        shape = tuple(param.shape)
        out[name] = rng.uniform(-INIT_BOUND, INIT_BOUND, shape) + rng.standard_normal(shape) * 0.3 * SCALE
    if perturbation:
        signs = np.random.default_rng([system, perturbation])
        out = {k: v * (1 + 2.0**-23 * signs.choice([-1.0, 1.0], np.shape(v))) for k, v in out.items()}
    return out


@cache
def model(system: int, perturbation: int = 0) -> torch.nn.Module:
    """The tiny float32 model of one system, in eval mode, its weights from :func:`weights`."""
    net = model_helpers.build_system(*SYSTEMS[system], seed=system).float()
    drawn = weights(system, perturbation)
    with torch.no_grad():
        for name, param in net.named_parameters():
            param.copy_(torch.from_numpy(np.asarray(drawn[name])))
    return net


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
    """SHA-256 of the tensors' shapes, dtypes and bytes (the bit-exact comparison's)."""
    h = hashlib.sha256()
    for tensor in tensors:
        h.update(f"{tuple(tensor.shape)}{tensor.dtype}".encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def projections(tensor: torch.Tensor) -> list[Any]:
    """One sentence's attention rows ``[steps, positions]`` as ``[shape, p_1, p_2, p_3]``: its shape and three sums
    of its weights times fixed cosine grids, in float64. A weight moved by d moves each sum by at most d."""
    rows = tensor.detach().cpu().double().numpy()
    rows = rows.reshape(rows.shape[0], -1) if rows.ndim else rows.reshape(1, 1)
    grid = np.add.outer(1.3 * np.arange(rows.shape[0]), 0.7 * np.arange(rows.shape[1]))
    return [list(tensor.shape), *(float((rows * np.cos(grid + phase)).sum()) for phase in range(PROJECTIONS))]


def run(case: Case, perturbation: int = 0, nbest: int | None = None) -> dict[str, Any]:
    """Decode one case; the result as plain JSON data. ``nbest`` asks for another n-best size than the case's (the
    writer's look at the runner-up)."""
    src, src_mask = sources(case.batch)
    hyps = search_of(case)(
        model(case.system, perturbation),
        src,
        src_mask,
        return_attention=case.attention,
        nbest=nbest or case.nbest,
    )
    return {
        "tokens": hyps.tokens,
        "scores": hyps.scores,
        "normalized_scores": hyps.normalized_scores,
        "nbest": [[[e.tokens, e.score, e.normalized_score] for e in entries] for entries in hyps.nbest],
        "src_attention": [projections(t) for t in hyps.src_attention],
        "tgt_attention": [projections(t) for t in hyps.tgt_attention],
        "src_attention_sha": digest(hyps.src_attention),
        "tgt_attention_sha": digest(hyps.tgt_attention),
    }


def sentence_scores(result: dict[str, Any], i: int) -> list[float]:
    """Every score of sentence ``i``: best raw and normalised, and each n-best entry's."""
    entries = result["nbest"][i] if result["nbest"] else []
    return [result["scores"][i], result["normalized_scores"][i], *(v for e in entries for v in e[1:])]


def sentence_tokens(result: dict[str, Any], i: int) -> list[list[int]]:
    """Every token list of sentence ``i``: the best and each n-best entry's."""
    return [result["tokens"][i], *(e[0] for e in (result["nbest"][i] if result["nbest"] else []))]


def sentence_attention(result: dict[str, Any], i: int) -> list[list[Any]]:
    """Sentence ``i``'s attention projections (source, then target history), where the case keeps them."""
    return [rows[i] for rows in (result["src_attention"], result["tgt_attention"]) if rows]


def spread(reference: dict[str, Any], others: list[dict[str, Any]], i: int) -> tuple[float, float, bool]:
    """How far sentence ``i`` moves between ``reference`` and each of ``others``: the largest relative change of a
    score, the largest absolute change of an attention projection, and whether any token list changed."""
    rel, att, moved = 0.0, 0.0, False
    want_scores, want_tokens = sentence_scores(reference, i), sentence_tokens(reference, i)
    for other in others:
        if sentence_tokens(other, i) != want_tokens:
            moved = True
            continue
        for got, want in zip(sentence_scores(other, i), want_scores, strict=True):
            rel = max(rel, abs(got - want) / max(abs(want), 1e-30))
        for got, want in zip(sentence_attention(other, i), sentence_attention(reference, i), strict=True):
            if got[0] != want[0]:
                moved = True
            else:
                att = max(att, *(abs(a - b) for a, b in zip(got[1:], want[1:], strict=True)))
    return rel, att, moved

"""The search-equivalence harness (:mod:`tests.search_harness`): today's search decodes every case as the fixture
(``tests/fixtures/search_harness.json.gz``) records it: the same tokens, the same n-best lists, and scores and
attention rows within each sentence's recorded tolerance. The default run takes batch 8's greedy and beam-5 cases of
every system; ``make test-full`` (``-m slow``) takes all of them.

Two comparisons, and which is which:

- **Across machines (the default).** The fixture was written on one CPU (named in it: ``cpu``); this test runs on
  any. Tokens must be equal, except in a sentence the fixture records as a near tie (its tokens moved under a
  one-rounding change of the weights or under another instruction set when the fixture was written, or its two best
  hypotheses lie within its tolerance): there another token list is reported as a warning, not failed. Scores are
  compared relatively, attention projections absolutely, within the sentence's tolerance: 1e-5 for most (about 80
  float32 epsilons: another summation order moves an 18-step score by a few units of its last digit), more where
  the fixture measured more (see ``tests/fixtures/write_search_harness.py``).
- **Bit for bit, on the fixture's kind of CPU** (``SARNMT_HARNESS_EXACT=1``): for a refactor of the search, every
  token, every score and the attention rows' SHA-256 must be identical. On a CPU whose instruction set is not the
  fixture's, this mode skips with the reason.
"""

from __future__ import annotations

import gzip
import json
import os
import warnings

import pytest
import torch

from tests import search_harness as h
from tests.conftest import ROOT

FIXTURE = json.loads(gzip.decompress((ROOT / "tests" / "fixtures" / "search_harness.json.gz").read_bytes()))
CASES = h.cases()
EXACT = os.environ.get("SARNMT_HARNESS_EXACT", "") not in ("", "0")


# the fixture was written on one thread: the same reduction order in every product
pytestmark = pytest.mark.usefixtures("one_torch_thread")


class NearTie(UserWarning):
    """A sentence the fixture records as a near tie decoded to other tokens on this machine."""


def test_the_fixture_holds_every_case_and_names_its_cpu():
    assert sorted(FIXTURE["cases"]) == sorted(case.key for case in CASES)
    assert sorted(FIXTURE["tolerances"]) == sorted(FIXTURE["cases"])
    assert len(CASES) == len({case.key for case in CASES})
    assert FIXTURE["cpu"]["model"] and FIXTURE["cpu"]["capability"]


def compare(key: str, got: dict, want: dict, tolerance: dict) -> list[str]:
    """The differences between a decode and the fixture's, within the fixture's tolerances; near ties are warned."""
    problems = []
    for i in range(len(want["tokens"])):
        same_tokens = h.sentence_tokens(got, i) == h.sentence_tokens(want, i)
        same_shapes = [a[0] for a in h.sentence_attention(got, i)] == [a[0] for a in h.sentence_attention(want, i)]
        if not (same_tokens and same_shapes):
            if i in tolerance["near_ties"]:
                message = f"{key}: sentence {i} is a recorded near tie and decodes to other tokens here"
                warnings.warn(message, NearTie, stacklevel=2)
            else:
                problems.append(f"sentence {i}: tokens {h.sentence_tokens(got, i)} != {h.sentence_tokens(want, i)}")
            continue
        rtol, atol = tolerance["score_rtol"][i], tolerance["attention_atol"][i]
        for a, b in zip(h.sentence_scores(got, i), h.sentence_scores(want, i), strict=True):
            if abs(a - b) > rtol * abs(b):
                problems.append(f"sentence {i}: score {a!r} != {b!r} (relative tolerance {rtol:g})")
        for rows_got, rows_want in zip(h.sentence_attention(got, i), h.sentence_attention(want, i), strict=True):
            for a, b in zip(rows_got[1:], rows_want[1:], strict=True):
                if abs(a - b) > atol:
                    problems.append(f"sentence {i}: attention projection {a!r} != {b!r} (tolerance {atol:g})")
    return problems


def check(case: h.Case) -> None:
    got = json.loads(json.dumps(h.run(case)))
    want = FIXTURE["cases"][case.key]
    if EXACT:
        here, there = torch.backends.cpu.get_cpu_capability(), FIXTURE["cpu"]["capability"]
        if here != there:
            pytest.skip(f"SARNMT_HARNESS_EXACT: the fixture was written on {there}, this CPU runs {here}")
        for field in want:
            assert got[field] == want[field], f"{case.key}: {field} differs (bit-exact mode)"
        return
    problems = compare(case.key, got, want, FIXTURE["tolerances"][case.key])
    assert not problems, f"{case.key}: " + "; ".join(problems[:5])


@pytest.mark.parametrize("case", [c for c in CASES if c.fast], ids=lambda c: c.key)
def test_search_decodes_as_before(case):
    check(case)


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in CASES if not c.fast], ids=lambda c: c.key)
def test_search_decodes_as_before_full(case):
    check(case)


def first_case_with(predicate) -> tuple[str, dict, dict]:
    for key, want in FIXTURE["cases"].items():
        tolerance = FIXTURE["tolerances"][key]
        for i in range(len(want["tokens"])):
            if predicate(want, tolerance, i):
                return key, want, tolerance
    raise AssertionError("no such case in the fixture")


def at_floor(want, tolerance, i):
    return i == 0 and 0 not in tolerance["near_ties"] and tolerance["score_rtol"][0] <= h.SCORE_RTOL_FLOOR


def test_a_score_moved_by_1e_3_or_a_changed_token_fails_the_comparison():
    key, want, tolerance = first_case_with(at_floor)
    assert compare(key, want, want, tolerance) == []
    moved = json.loads(json.dumps(want))
    moved["scores"][0] += 1e-3
    assert any("score" in p for p in compare(key, moved, want, tolerance))
    changed = json.loads(json.dumps(want))
    changed["tokens"][0] = [*changed["tokens"][0], 3]
    assert any("tokens" in p for p in compare(key, changed, want, tolerance))


def test_a_recorded_near_tie_is_reported_not_failed():
    key, want, tolerance = first_case_with(at_floor)
    other = json.loads(json.dumps(want))
    other["tokens"][0] = [*other["tokens"][0], 3]
    tied = {**tolerance, "near_ties": [0]}
    with pytest.warns(NearTie, match="sentence 0 is a recorded near tie"):
        assert compare(key, other, want, tied) == []

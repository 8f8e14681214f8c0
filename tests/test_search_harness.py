"""The search-equivalence harness (:mod:`tests.search_harness`): today's search decodes every case exactly as the
search before issue 40's rewrite did (``tests/fixtures/search_harness.json.gz``): the same tokens, the same float32
scores bit for bit, the same n-best lists and the same attention rows. The default run takes batch 8's greedy and
beam-5 cases of every system; ``make test-full`` (``-m slow``) takes all of them."""

from __future__ import annotations

import gzip
import json

import pytest

from tests import search_harness
from tests.conftest import ROOT

FIXTURE = json.loads(gzip.decompress((ROOT / "tests" / "fixtures" / "search_harness.json.gz").read_bytes()))
CASES = search_harness.cases()


# the fixture was written on one thread: the same reduction order in every product
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_the_fixture_holds_every_case():
    assert sorted(FIXTURE["cases"]) == sorted(case.key for case in CASES)
    assert len(CASES) == len({case.key for case in CASES})


def check(case: search_harness.Case) -> None:
    got = json.loads(json.dumps(search_harness.run(case)))
    want = FIXTURE["cases"][case.key]
    for field in want:
        assert got[field] == want[field], f"{case.key}: {field} differs"


@pytest.mark.parametrize("case", [c for c in CASES if c.fast], ids=lambda c: c.key)
def test_search_decodes_as_before(case):
    check(case)


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in CASES if not c.fast], ids=lambda c: c.key)
def test_search_decodes_as_before_full(case):
    check(case)

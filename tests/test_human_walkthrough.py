"""The human evaluation's walk-through on the toy corpus (docs/human-evaluation.md, "Try it on the toy corpus"),
followed command by command as a user would from a fresh checkout without ``../shared/data``: the toy test split
written as text, two systems trained (here one update each, tiny) and translating it, a task created, one annotator
ranking every item through the page's API, and Table 5 exported."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

from tests.cli_helpers import TINY, run_cli
from tests.human_helpers import running

QUICK = [*TINY, "trainer.max_epochs=1"]  # the toy corpus cut to 200 pairs: 3 updates


def _api(url: str, token: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, headers={"X-Annotator-Token": token}, method="POST" if data else "GET"
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def test_the_walkthrough_runs_on_the_toy_corpus(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    toy = tmp_path / "toy"
    assert run_cli(capsys, "analyze", ["toy_gold", "split=test", f"out_dir={toy}"]).code == 0
    source, reference = toy / "test.src", toy / "test.ref"
    assert len(source.read_text().splitlines()) == len(reference.read_text().splitlines()) > 10
    for name, decoder in (("baseline", "baseline"), ("sa", "self_attentive_content")):
        run = toy / "runs" / name
        outcome = run_cli(capsys, "train", [*QUICK, f"decoder={decoder}", f"hydra.run.dir={run}"])
        assert outcome.code == 0, outcome.err[-2000:]
        args = [f"ckpt_path={run / 'checkpoints' / 'last.ckpt'}", f"input={source}", f"output={toy / name}.txt"]
        outcome = run_cli(capsys, "translate", [*args, "progress=false"])
        assert outcome.code == 0, outcome.err[-2000:]
    db = toy / "human.sqlite"
    create = [
        f"db={db}",
        "pair=en_de",
        f"source={source}",
        f"ref={reference}",
        f"hyps=[{toy / 'baseline.txt'},{toy / 'sa.txt'}]",
        "names=[baseline,self_attentive_content]",
        "sample=10",
        "annotators=[ana]",
    ]
    outcome = run_cli(capsys, "human", ["create", *create])
    assert outcome.code == 0, outcome.err[-2000:]
    token = re.search(r"#token=(\S+)", outcome.out).group(1)
    with running(db) as server:
        url = server.url.rstrip("/")
        page = _api(f"{url}/api/next", token)
        while not page["done"]:
            _api(f"{url}/api/judgement", token, {"item": page["item"], "status": "ranked", "ranks": [1, 2]})
            page = _api(f"{url}/api/next", token)
    assert page["progress"]["ranked"] == 10
    outcome = run_cli(capsys, "human", ["export", f"db={db}", f"output_dir={toy / 'table5'}"])
    assert outcome.code == 0, outcome.err[-2000:]
    table = (toy / "table5" / "table5.md").read_text()
    assert "baseline" in table and "self_attentive_content" in table
    assert Path(toy / "table5" / "judgements.csv").read_text().count("\n") == 11  # a head and 10 judgements

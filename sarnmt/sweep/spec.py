"""What a table is and at which scale a sweep runs it: the table files ``tables/table<N>.yaml`` and the scale files
``scales/<scale>.yaml`` of the packaged specs (``sarnmt/sweep/specs``, :func:`sarnmt.utils.compose.specs_dir`: in
the checkout and in an installed wheel alike), read into plain dataclasses.

- A **table** has rows (a model: a key, a label, its train overrides, which seed list it runs) and columns (a
  language pair, a test set and a metric), the paper's numbers and the baseline row its significance markers
  compare with.
- A **scale** (``smoke``, ``mini``, ``paper``) says how big every job is (train overrides for all jobs), which
  corpus stands for each language pair (train overrides, and which split is each logical test set), and the seed
  lists.
- The **jobs** they describe (one training run per scale, pair, row and seed) are :mod:`sarnmt.sweep.plan`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from sarnmt.errors import UserError
from sarnmt.utils.compose import specs_dir

SPECS_DIR = specs_dir()
TABLES_DIR = SPECS_DIR / "tables"
SCALES_DIR = SPECS_DIR / "scales"
METRICS = {
    "bleu_tok": "BLEU (multi-bleu) on tokenised text, cased",
    "bleu_tok_lc": "BLEU (multi-bleu -lc) on tokenised text, lowercased",
    "bleu": "NIST BLEU (mteval-v13a tokenisation) on detokenised, de-truecased text, cased",
    "ppl": "perplexity (exp of the mean NLL per word, every word of the test text once; lower is better)",
}
# what a table's jobs are: the config they compose (sarnmt/conf/<name>.yaml) and train; the job runner of each is in
# sarnmt/sweep/job.py
TASKS = ("translation", "lm")


class SpecError(UserError, ValueError):
    """A table or scale file that is missing or malformed, or a name that is not defined; the message lists the
    valid ones."""


@dataclass(frozen=True)
class Row:
    """A model: its train overrides at every scale and, in ``by_scale``, at one scale only (Table 6's sizes);
    ``paper_d``: the size the paper gives for it, shown beside the run's (Table 6)."""

    key: str
    label: str
    train: tuple[str, ...]
    seeds: str
    paper_parameters: str | None = None
    task: str = "translation"
    by_scale: dict[str, tuple[str, ...]] = field(default_factory=dict)
    paper_d: int | None = None


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    pair: str
    test: str
    metric: str


@dataclass(frozen=True)
class Table:
    number: int
    title: str
    baseline: str
    rows: tuple[Row, ...]
    columns: tuple[Column, ...]
    paper: dict[str, dict[str, float]]
    path: str
    declared_baseline: str  # the table file's baseline; ``baseline`` is another row in a table ``compared_with`` it
    task: str = "translation"
    also_against: tuple[str, ...] = ()  # rows the paper ranks the others against too: rendered as table<N>.vs-<row>

    def row(self, key: str) -> Row:
        for row in self.rows:
            if row.key == key:
                return row
        raise SpecError(f"table {self.number} has no row {key!r}; its rows: {[r.key for r in self.rows]}")

    def compared_with(self, key: str) -> Table:
        """This table with every test, Δ and power line against row ``key`` instead of its file's baseline
        (``sarnmt tables baseline=<row>``: e.g. whether the self-attentive residual beats the mean residual)."""
        return replace(self, baseline=self.row(key).key)

    @property
    def against_other_row(self) -> bool:
        """Whether the tests compare with another row than the table file's baseline."""
        return self.baseline != self.declared_baseline

    @property
    def heading(self) -> str:
        """The title, naming the row the tests compare with when it is not the file's baseline."""
        return self.title + (f", against {self.row(self.baseline).label}" if self.against_other_row else "")

    @property
    def stem(self) -> str:
        """The rendered files' name: ``table<N>``, or ``table<N>.vs-<row>`` against another row than the file's."""
        return f"table{self.number}" + (f".vs-{self.baseline}" if self.against_other_row else "")


@dataclass(frozen=True)
class Pair:
    """A language pair at a scale: the corpus that stands for it and its test sets (logical test name, e.g.
    ``nt14`` → split of the corpus, e.g. ``test``). With ``same_as``, the pair's jobs are another pair's (trained
    once for both) and ``tests`` maps its test names to that pair's test names instead. ``ran``: where a corpus
    stands in for the paper's, what ran (corpus and direction, ``Multi30K En→De``), and ``test_names`` each test
    set's own name (``nt14: test2016``): the tables name such a column by them, the paper's column apart."""

    key: str
    label: str
    train: tuple[str, ...]
    tests: dict[str, str]
    note: str = ""
    same_as: str | None = None
    ran: str = ""
    test_names: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Scale:
    name: str
    description: str
    train: tuple[str, ...]
    seeds: dict[str, tuple[int, ...]]
    pairs: dict[str, Pair]
    path: str
    hardware: str = ""
    lm_train: tuple[str, ...] | None = None
    lm_description: str = ""
    data_order: str = "fixed"  # "per_seed": each translation job's batch order seeded by its seed (data.order_seed)
    seed_test: str = "shared"  # the seed-aware test its tables are rendered with (superseded mini8: "v_sent")

    def describe(self, task: str) -> str:
        return self.lm_description if task == "lm" and self.lm_description else self.description

    def train_for(self, task: str) -> tuple[str, ...]:
        """The overrides of every job of ``task`` at this scale (``train``, or ``lm_train`` for language models)."""
        if task == "translation":
            return self.train
        if self.lm_train is None:
            raise SpecError(f"{self.path}: scale {self.name} has no lm_train, which the language models' jobs need")
        return self.lm_train

    def job_pair(self, pair: str) -> str:
        """The pair whose jobs serve ``pair`` (itself, or its ``same_as``)."""
        if pair not in self.pairs:
            raise SpecError(f"scale {self.name} has no language pair {pair!r}; its pairs: {sorted(self.pairs)}")
        return self.pairs[pair].same_as or pair

    def job_test(self, pair: str, test: str) -> str:
        """The name, in the job's record, of ``pair``'s test set ``test``."""
        p = self.pairs[pair]
        if test not in p.tests:
            raise SpecError(f"{self.path}: pair {pair} has no test set {test!r}; its test sets: {sorted(p.tests)}")
        return p.tests[test] if p.same_as else test

    def ran(self, pair: str, test: str) -> str | None:
        """What ran for ``pair``'s test set ``test`` where a corpus stands in for the paper's: ``Multi30K En→De
        test2016`` (the corpus and direction of the pair whose jobs serve it, and the test set's own name); None
        where the scale does not say (its columns keep the paper's names)."""
        runs = self.pairs[self.job_pair(pair)]
        name = runs.test_names.get(self.job_test(pair, test))
        return f"{runs.ran} {name}" if runs.ran and name else None


def _load_yaml(path: Path, what: str, valid: list[str]) -> DictConfig:
    if not path.is_file():
        raise SpecError(f"no {what} file {path}; valid: {valid}")
    try:
        node = OmegaConf.load(path)
    except Exception as err:  # yaml's and OmegaConf's errors both name the line
        raise SpecError(f"{path}: not a valid YAML file: {err}") from err
    if not isinstance(node, DictConfig):
        raise SpecError(f"{path}: expected a mapping at the top level")
    return node


def _get(node: DictConfig, key: str, where: str) -> Any:
    if key not in node or node[key] is None:
        raise SpecError(f"{where}: missing key {key!r}")
    value = node[key]
    return OmegaConf.to_container(value) if isinstance(value, DictConfig | ListConfig) else value


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpecError(f"{where}: expected a list of overrides (strings), got {value!r}")
    return tuple(value)


def _none_in(folder: Path, what: str) -> SpecError:
    """The error of a specs folder without one file of its kind: where it looked and which sarnmt is installed (a
    wheel built without its package data, or a folder given by mistake), never an empty list of valid names."""
    import sarnmt

    state = "the folder has none" if folder.is_dir() else "no such folder"
    packaged = folder.resolve() in (TABLES_DIR.resolve(), SCALES_DIR.resolve())
    why = "this installation lacks its package data: reinstall sarnmt" if packaged else f"its own are in {SPECS_DIR}"
    return SpecError(
        f"no {what} files in {folder} ({state}); sarnmt {sarnmt.__version__} is installed at "
        f"{Path(sarnmt.__file__).resolve().parent}: {why}"
    )


def available_tables(tables_dir: Path = TABLES_DIR) -> list[int]:
    """The numbers of the table files ``table<N>.yaml`` in ``tables_dir``.  :raises SpecError: where there are none."""
    names = (p.stem.removeprefix("table") for p in tables_dir.glob("table*.yaml"))
    found = sorted(int(n) for n in names if n.isdigit())
    if not found:
        raise _none_in(tables_dir, "table (table<N>.yaml)")
    return found


def available_scales(scales_dir: Path = SCALES_DIR) -> list[str]:
    """The names of the scale files ``<scale>.yaml`` in ``scales_dir``.  :raises SpecError: where there are none."""
    found = sorted(p.stem for p in scales_dir.glob("*.yaml"))
    if not found:
        raise _none_in(scales_dir, "scale (<scale>.yaml)")
    return found


def load_table(number: int | str, tables_dir: Path = TABLES_DIR) -> Table:
    valid = available_tables(tables_dir)
    if not str(number).isdigit() or int(number) not in valid:
        raise SpecError(f"unknown table {str(number)!r}; valid tables: {valid} (the table files in {tables_dir})")
    path = tables_dir / f"table{int(number)}.yaml"
    node = _load_yaml(path, "table", valid)
    unknown = set(node) - {"title", "baseline", "also_against", "rows", "columns", "paper", "task"}
    if unknown:
        raise SpecError(f"{path}: unknown keys {sorted(unknown)}")
    task = str(node.get("task", "translation"))
    if task not in TASKS:
        raise SpecError(f"{path}: unknown task {task!r}; valid: {list(TASKS)}")
    rows, columns = [], []
    for k, item in enumerate(_get(node, "rows", str(path))):
        where = f"{path}: rows[{k}]"
        if not isinstance(item, dict):
            raise SpecError(f"{where}: expected a mapping")
        unknown = set(item) - {"key", "label", "train", "seeds", "paper_parameters", "by_scale", "paper_d"}
        if unknown:
            raise SpecError(f"{where}: unknown keys {sorted(unknown)}")
        by_scale = item.get("by_scale") or {}
        if not isinstance(by_scale, dict):
            raise SpecError(f"{where}.by_scale: expected a mapping of scale name to a list of overrides")
        rows.append(
            Row(
                key=str(_get(node.rows[k], "key", where)),
                label=str(_get(node.rows[k], "label", where)),
                train=_strings(item.get("train"), f"{where}.train"),
                seeds=str(_get(node.rows[k], "seeds", where)),
                paper_parameters=item.get("paper_parameters"),
                task=task,
                by_scale={str(k): _strings(v, f"{where}.by_scale.{k}") for k, v in by_scale.items()},
                paper_d=item.get("paper_d"),
            )
        )
    for k, item in enumerate(_get(node, "columns", str(path))):
        where = f"{path}: columns[{k}]"
        if not isinstance(item, dict):
            raise SpecError(f"{where}: expected a mapping")
        missing = {"key", "label", "pair", "test", "metric"} - set(item)
        if missing or set(item) - {"key", "label", "pair", "test", "metric"}:
            raise SpecError(f"{where}: needs exactly the keys key, label, pair, test, metric; got {sorted(item)}")
        if item["metric"] not in METRICS:
            raise SpecError(f"{where}: unknown metric {item['metric']!r}; valid: {sorted(METRICS)}")
        columns.append(Column(**{k2: str(v) for k2, v in item.items()}))
    keys = [r.key for r in rows]
    if len(set(keys)) != len(keys):
        raise SpecError(f"{path}: row keys repeat: {keys}")
    baseline = str(_get(node, "baseline", str(path)))
    if baseline not in keys:
        raise SpecError(f"{path}: baseline {baseline!r} is not a row; rows: {keys}")
    also = node.get("also_against") or []
    if not isinstance(also, ListConfig) or any(key not in keys or key == baseline for key in also):
        raise SpecError(f"{path}: also_against: expected a list of rows other than the baseline; rows: {keys}")
    paper = _get(node, "paper", str(path)) if "paper" in node else {}
    for row_key, cells in paper.items():
        if row_key not in keys or not set(cells) <= {c.key for c in columns}:
            raise SpecError(f"{path}: paper.{row_key} names a row or column the table does not have")
    title = str(_get(node, "title", str(path)))
    return Table(
        int(number), title, baseline, tuple(rows), tuple(columns), paper, str(path), baseline, task, tuple(also)
    )


def load_scale(name: str, scales_dir: Path = SCALES_DIR) -> Scale:
    valid = available_scales(scales_dir)
    if name not in valid:
        raise SpecError(f"unknown scale {name!r}; valid scales: {valid} (the scale files in {scales_dir})")
    path = scales_dir / f"{name}.yaml"
    node = _load_yaml(path, "scale", valid)
    seeds = _get(node, "seeds", str(path))
    if not isinstance(seeds, dict) or not all(isinstance(v, list) and v for v in seeds.values()):
        raise SpecError(f"{path}: seeds must map a list name to a non-empty list of ints, got {seeds!r}")
    pairs = {}
    for key, item in _get(node, "pairs", str(path)).items():
        where = f"{path}: pairs.{key}"
        if not isinstance(item, dict) or set(item) - {
            "label",
            "train",
            "tests",
            "note",
            "same_as",
            "ran",
            "test_names",
        }:
            raise SpecError(
                f"{where}: expected the keys label, train, tests, note, same_as, ran, test_names; got {item!r}"
            )
        tests = item.get("tests")
        if not isinstance(tests, dict) or not tests:
            raise SpecError(f"{where}.tests: expected a mapping of test name to split")
        names = item.get("test_names") or {}
        if not isinstance(names, dict) or set(names) - set(tests):
            raise SpecError(f"{where}.test_names: expected a mapping of the pair's test names to their own names")
        if item.get("same_as"):
            pairs[key] = Pair(
                key,
                str(item.get("label", key)),
                (),
                {str(k): str(v) for k, v in tests.items()},
                str(item.get("note", "")),
                str(item["same_as"]),
            )
            continue
        pairs[key] = Pair(
            key,
            str(item.get("label", key)),
            _strings(item.get("train"), f"{where}.train"),
            {str(k): str(v) for k, v in tests.items()},
            str(item.get("note", "")),
            ran=str(item.get("ran", "")),
            test_names={str(k): str(v) for k, v in names.items()},
        )
    data_order = str(node.get("data_order", "fixed"))
    if data_order not in ("fixed", "per_seed"):
        raise SpecError(f"{path}: data_order {data_order!r}: fixed (one batch order for every seed) or per_seed")
    seed_test = str(node.get("seed_test", "shared"))
    if seed_test not in ("shared", "v_sent"):
        raise SpecError(f"{path}: seed_test {seed_test!r}: shared (the tables' test) or v_sent (the earlier test)")
    return Scale(
        name,
        str(node.get("description", "")),
        _strings(_get(node, "train", str(path)), f"{path}: train"),
        {k: tuple(int(s) for s in v) for k, v in seeds.items()},
        pairs,
        str(path),
        str(node.get("hardware", "")),
        _strings(_get(node, "lm_train", str(path)), f"{path}: lm_train") if node.get("lm_train") is not None else None,
        str(node.get("lm_description", "")),
        data_order,
        seed_test,
    )

"""The analyses as pure functions of their configs (``sarnmt/conf/analyze/<name>.yaml``): files in, files out, a report
returned. :mod:`sarnmt.cli.analyze` is the command line over them; the tests call them directly.

Each returns ``{"report": str (printed by the command), "files": [paths written], ...}``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig

from sarnmt.analysis import AnalysisError, agreement, examples, heatmaps, positions, tree_report
from sarnmt.analysis.drawing import plot_trees
from sarnmt.analysis.runs import Run, load_runs, names_of, read_input
from sarnmt.analysis.trees import brackets
from sarnmt.checkpoints.reading import load_model
from sarnmt.checkpoints.stored_config import run_trust
from sarnmt.data.corpora.toy import generate_toy_corpus, target_tree
from sarnmt.data.corpora.toy_reading import parse_source
from sarnmt.data.loading.in_memory import check_toy_sizes
from sarnmt.decoding.search import build_search
from sarnmt.errors import check_range
from sarnmt.evaluation.bleu import check_tokenize
from sarnmt.kernels.choice import check_choice
from sarnmt.utils.device import pick_device

log = logging.getLogger("sarnmt")


def _out(cfg: DictConfig) -> Path:
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return out


def _with_self_attention(runs: list[Run], what: str) -> tuple[list[Run], list[str]]:
    """The runs whose decoder has a target self-attention, and a note for each other one.

    :raises AnalysisError: when none has one (naming the checkpoint when there is one)."""
    notes = [
        f"{r.name}: its decoder has no target self-attention (skipped in {what})" for r in runs if not r.self_attention
    ]
    kept = [r for r in runs if r.self_attention]
    if not kept:
        which = runs[0].path if len(runs) == 1 else ", ".join(r.path for r in runs)
        raise AnalysisError(
            f"{what} needs a target self-attention, and the decoder of {which} has none "
            f"(baseline and mean residual decoders do not attend over previous words)"
        )
    for note in notes:
        log.warning(note)
    return kept, notes


def toy_corpus(data: DictConfig) -> dict[str, tuple[list[str], list[str]]]:
    """The toy corpus a run with these ``data.*`` settings trained on, its split sizes checked first (their one
    check: :func:`~sarnmt.data.loading.in_memory.check_toy_sizes`)."""
    check_toy_sizes(data.n_train, data.n_dev, data.n_test)
    return generate_toy_corpus(data.seed, data.n_train, data.n_dev, data.n_test)


def toy_gold(cfg: DictConfig) -> dict[str, Any]:
    """One split of the toy corpus as files: ``<split>.src``, ``<split>.ref`` and ``<split>.trees`` (the references'
    constituency trees as the grammar derives them, Penn Treebank brackets), one sentence per line."""
    if not {"seed", "n_train", "n_dev", "n_test"} <= set(cfg.data):
        raise AnalysisError("toy_gold writes the toy corpus: data must be data=toy (with the data.* of the run)")
    corpus = toy_corpus(cfg.data)
    if cfg.split not in corpus:
        raise AnalysisError(f"split must be one of {sorted(corpus)}, got {cfg.split!r}")
    src, ref = corpus[cfg.split]
    out = _out(cfg)
    files = [out / f"{cfg.split}.{ext}" for ext in ("src", "ref", "trees")]
    trees = [target_tree(parse_source(line)) for line in src]
    for path, lines in zip(files, (src, ref, trees), strict=True):
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return {"report": f"toy {cfg.split} split, {len(src)} sentences: " + ", ".join(map(str, files)), "files": files}


def figure2(cfg: DictConfig) -> dict[str, Any]:
    """Figure 2: the distribution of the self-attention's peak over relative positions, one curve per model."""
    out = _out(cfg)
    runs, notes = _with_self_attention(load_runs(cfg, out, self_attention_only=True), "Figure 2")
    dists = {
        r.name: positions.distribution((rec.tgt_attention for rec in r.records if rec.rows), cfg.max_distance)
        for r in runs
    }
    files = [out / "figure2.csv"]
    positions.write_csv(files[0], dists)
    files += positions.plot(
        dists, out / "figure2", f"Figure 2: peaks of the target self-attention ({cfg.source})", cfg.log_scale
    )
    rows = [
        "| model | predictions | -1 | -2 | -3 | -4 | -5 and further | zero slot |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, dist in dists.items():
        near = " | ".join(f"{dist.percent[k]:.1f}" for k in range(1, 5))
        far = dist.percent[5:].sum()
        rows.append(f"| {name} | {dist.predictions:,} | {near} | {far:.1f} | {dist.start_percent:.1f} |")
    report = "% of predictions (each counted 1 / #previous words) by relative position\n\n" + "\n".join(rows)
    return {"report": "\n".join([report, *notes]), "files": files, "notes": notes, "distributions": dists}


def figure3(cfg: DictConfig) -> dict[str, Any]:
    """Figure 3: one sentence's target self-attention and source attention, one column per model."""
    out = _out(cfg)
    kinds = list(cfg.panels)
    if not kinds or any(k not in ("self", "source") for k in kinds):
        raise AnalysisError(f"panels must be a non-empty list of 'self' and 'source', got {kinds}")
    runs = load_runs(cfg, out)
    notes: list[str] = []
    if "self" in kinds:
        kept, notes = _with_self_attention(runs, "Figure 3's self-attention panel")
        if kinds == ["self"]:
            runs = kept
    index = cfg.sentence - 1
    if not 0 <= index < len(runs[0].records):
        raise AnalysisError(f"sentence={cfg.sentence}: the source has lines 1 to {len(runs[0].records)}")
    panels = []
    for run in runs:
        record = run.records[index]
        if not record.rows:
            raise AnalysisError(f"sentence={cfg.sentence}: {run.name}'s translation of it is empty")
        panels.append(
            heatmaps.Panel(
                run.name, list(record.source), list(record.target), record.tgt_attention, record.src_attention
            )
        )
    files = heatmaps.plot(
        panels,
        kinds,
        out / f"figure3_line{cfg.sentence}",
        f"Figure 3: attention of line {cfg.sentence} of {cfg.source}",
    )
    lines = [f"{p.name}: {' '.join(p.target)}" for p in panels]
    return {"report": "\n".join([*lines, *notes, *map(str, files)]), "files": files, "notes": notes}


def trees(cfg: DictConfig) -> dict[str, Any]:
    """Algorithm 1's trees (bracket files, drawings), ParsEval against ``gold`` beside the branching baselines."""
    out = _out(cfg)
    runs, notes = _with_self_attention(load_runs(cfg, out, self_attention_only=True), "Algorithm 1's trees")
    gold_lines = read_input(cfg.gold, "gold") if cfg.gold is not None else None
    files, scores, record = [], {}, {}
    for run in runs:
        sentences = [r.words for r in run.records]
        gold = tree_report.read_gold(gold_lines, cfg.gold, sentences) if gold_lines is not None else None
        ours = tree_report.build_trees(run.records, "algorithm1")
        path = out / f"{run.name}.algorithm1.trees"
        path.write_text("".join((brackets(t) if t is not None else "") + "\n" for t in ours), encoding="utf-8")
        files.append(path)
        for line in cfg.draw:
            if not 1 <= line <= len(ours) or ours[line - 1] is None:
                raise AnalysisError(f"draw: line {line} has no sentence to draw (lines 1 to {len(ours)})")
            panels = [(f"{run.name}: Algorithm 1", ours[line - 1])]
            if gold is not None:
                panels.append(("gold", gold[line - 1]))
            panels.append(
                (
                    "right-branching (footnote 4)",
                    tree_report.KINDS["right_branching"](run.records[line - 1].words, None),
                )
            )
            files += plot_trees(panels, out / f"{run.name}.tree_line{line}", f"line {line} of {cfg.source}")
        if gold is not None:
            scores[run.name] = tree_report.score_kinds(run.records, gold, list(tree_report.KINDS))
            record[run.name] = {
                k: {c: v.as_dict() for c, v in counts.items()} for k, counts in scores[run.name].items()
            }
    shared = all([r.words for r in run.records] == [r.words for r in runs[0].records] for run in runs)
    report = tree_report.markdown(scores, shared) if scores else "(no gold trees given: trees written, not scored)"
    if scores:
        (out / "parseval.md").write_text(report + "\n", encoding="utf-8")
        (out / "parseval.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        files += [out / "parseval.md", out / "parseval.json"]
    return {"report": "\n".join([report, *notes]), "files": files, "scores": scores, "notes": notes}


def table7(cfg: DictConfig) -> dict[str, Any]:
    """Table 7: sentences where the system beats the baseline by sentence BLEU, and where it loses."""
    check_tokenize(cfg.tokenize)
    hyps = list(cfg.hyps)
    if len(hyps) != 2:
        raise AnalysisError(f"hyps must name two files, [baseline,system], got {len(hyps)}")
    names = tuple(cfg.names) if cfg.names is not None else ("baseline", "system")
    if len(names) != 2:
        raise AnalysisError(f"names must have two entries, got {len(names)}")
    texts = {
        key: read_input(path, key)
        for key, path in (
            ("source", cfg.source),
            ("reference", cfg.reference),
            ("hyps[0]", hyps[0]),
            ("hyps[1]", hyps[1]),
        )
    }
    for key, lines in texts.items():
        if len(lines) != len(texts["reference"]):
            raise AnalysisError(
                f"{key} has {len(lines)} lines but reference {cfg.reference} has {len(texts['reference'])}"
            )
    selected = examples.select(
        texts["source"],
        texts["reference"],
        texts["hyps[1]"],
        texts["hyps[0]"],
        cfg.count,
        cfg.tokenize,
        cfg.lowercase,
        cfg.min_words,
        cfg.max_words,
    )
    out = _out(cfg)
    system_first = (names[1], names[0])
    md = examples.markdown(selected, system_first)
    files = [out / "table7.md", out / "table7.html"]
    files[0].write_text(md + "\n", encoding="utf-8")
    files[1].write_text(
        examples.html_page(selected, system_first, f"Table 7: {names[1]} vs {names[0]}"), encoding="utf-8"
    )
    return {"report": md, "files": files, "selected": selected}


def agreement_probe(cfg: DictConfig) -> dict[str, Any]:
    """The agreement probe: forced-choice and decoded agreement of the final verb per distance bin, per model.
    ``kernels`` and ``batch_size`` are checked first (their one check), before anything is read."""
    check_choice(cfg.kernels)
    check_range("batch_size", cfg.batch_size, 1, whole=True)
    if cfg.source is not None:
        lines, where = read_input(cfg.source, "source"), cfg.source
    else:
        lines = toy_corpus(cfg.data)["test"][0]
        where = f"toy test split (seed {cfg.data.seed}, {cfg.data.n_test} sentences)"
    items = agreement.probe_items(lines, where)
    distances = np.array([it.distance for it in items])
    edges, labels = list(cfg.bins), agreement.bin_labels(list(cfg.bins))
    paths = [str(p) for p in cfg.ckpts]
    names = names_of(paths, None if cfg.names is None else list(cfg.names))
    search, device, out = build_search(cfg.decoding), pick_device(cfg.device), _out(cfg)
    table: dict[str, dict[str, list[tuple[int, float]]]] = {}
    overall: dict[str, dict[str, float]] = {}
    for name, path in zip(names, paths, strict=True):
        loaded = load_model(path, device, cfg.kernels, run_trust(cfg))
        forced = agreement.forced_choice(loaded, items, cfg.batch_size)
        free, texts = agreement.decoded(loaded, items, search, cfg.batch_size)
        (out / f"{name}.agreement.hyp").write_text("".join(t + "\n" for t in texts), encoding="utf-8")
        table[name] = {
            "forced": agreement.by_bin(distances, forced, edges),
            "decoded": agreement.by_bin(distances, free, edges),
        }
        overall[name] = {"forced": float(forced.mean()), "decoded": float(free.mean())}
    files = agreement.write_outputs(table, overall, labels, out, f"final-verb agreement, {where}")
    return {
        "report": (out / "agreement.md").read_text(encoding="utf-8"),
        "files": files,
        "table": table,
        "overall": overall,
    }

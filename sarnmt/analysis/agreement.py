"""Beyond the paper: long-distance agreement on the toy corpus, per decoder, against the distance from the subject.

The toy target's last word is the main verb, and its suffix carries the class and number of the sentence subject,
the first noun of the target (:mod:`sarnmt.data.corpora.toy`); between them stand the subject's adjectives and relative
clause, the object and the PP. The distance of a sentence is the number of words from the subject noun (always
the second word) to the verb: ``len(reference) - 2``. The paper's hypothesis is that attention over previous
target words helps such long-range target dependencies; two measures, per distance bin:

- **forced choice** (the targeted evaluation of Linzen et al., 2016): the model reads the source and the reference
  up to the verb (teacher forcing) and is right when, among the six forms of the reference's verb (one per class
  and number; those outside its vocabulary left out), the correct one gets the highest probability. Lexical
  errors elsewhere cannot interfere.
- **decoded**: the model's own greedy translation is right when its last word is a verb form with the reference
  verb's agreement (any stem).
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from sarnmt.analysis import AnalysisError
from sarnmt.analysis.figures import pyplot, save
from sarnmt.checkpoints.reading import LoadedModel
from sarnmt.data.corpora.toy import realize_target
from sarnmt.data.corpora.toy_reading import parse_source, subject_agreement, verb_features, verb_forms
from sarnmt.data.loading.batching import pad_sequences
from sarnmt.data.text.codecs import UNK
from sarnmt.decoding.stream import decode_stream

MEASURES = {
    "forced": "forced choice among the verb's six forms (reference prefix)",
    "decoded": "greedy translation's final verb",
}


@dataclass(frozen=True)
class Item:
    """One probe sentence.  :param line: 1-based.  :param reference: the target words.  :param distance: words from
    the subject noun to the final verb.  :param forms: the verb's forms by agreement.  :param agreement: the
    subject's ``(class, plural)``."""

    line: int
    source: str
    reference: tuple[str, ...]
    distance: int
    forms: dict
    agreement: tuple[str, bool]


def probe_items(lines: Sequence[str], path: str) -> list[Item]:
    """The probe items of toy source lines.  :raises AnalysisError: naming the line that is not a toy sentence."""
    items = []
    for number, line in enumerate(lines, start=1):
        try:
            clause = parse_source(line)
        except ValueError as err:
            raise AnalysisError(f"{path} line {number}: not a toy-corpus source sentence ({err})") from err
        reference = tuple(realize_target(clause).split())
        items.append(
            Item(number, line, reference, len(reference) - 2, verb_forms(clause.verb), subject_agreement(clause))
        )
    return items


def forced_choice(loaded: LoadedModel, items: Sequence[Item], batch_size: int = 64) -> np.ndarray:
    """Per item, whether the correct verb form outscores the other forms after the reference prefix (bool array)."""
    net, src_codec, tgt_codec = loaded.net, loaded.src_codec, loaded.tgt_codec
    device = next(net.parameters()).device
    references = [tgt_codec.encode(" ".join(it.reference)) for it in items]
    known = sum(len(ids) == len(it.reference) and UNK not in ids for ids, it in zip(references, items, strict=True))
    if known < len(items) / 2:
        raise AnalysisError(
            f"checkpoint {loaded.path} does not know the toy corpus's words (one id each) in {len(items) - known} of "
            f"{len(items)} references: the agreement probe needs a model trained on data=toy"
        )
    right = np.zeros(len(items), dtype=bool)
    for start in range(0, len(items), batch_size):
        batch = items[start : start + batch_size]
        src, src_mask = pad_sequences([src_codec.encode(it.source) for it in batch])
        tgt, _ = pad_sequences(references[start : start + batch_size])
        with torch.inference_mode():
            logits = net(src.to(device), src_mask.to(device), tgt.to(device)).logits.float().cpu()
        for k, item in enumerate(batch):
            if len(references[start + k]) != len(item.reference):
                continue  # a word the codec splits: no single position to read
            ids = {key: tgt_codec.encode(form)[0] for key, form in item.forms.items()}
            ids = {key: i for key, i in ids.items() if i != UNK}
            if item.agreement not in ids:
                continue  # the correct form is unknown to the model: it cannot be right
            row = logits[k, len(item.reference) - 1]
            best = max(ids, key=lambda key: float(row[ids[key]]))
            right[start + k] = best == item.agreement
    return right


def decoded(loaded: LoadedModel, items: Sequence[Item], search, batch_size: int = 64) -> tuple[np.ndarray, list[str]]:
    """Per item, whether the model's translation ends in a verb with the reference verb's agreement; and the
    translations."""
    device = next(loaded.net.parameters()).device
    sources = [loaded.src_codec.encode(it.source) for it in items]
    results = list(decode_stream(loaded.net, search, sources, batch_size, device))
    texts = [loaded.tgt_codec.decode(r.tokens) if r.tokens else "" for r in results]
    right = np.zeros(len(items), dtype=bool)
    for k, (item, text) in enumerate(zip(items, texts, strict=True)):
        features = verb_features(text.split()[-1]) if text.split() else None
        right[k] = features is not None and features[1:] == item.agreement
    return right, texts


def bin_labels(edges: Sequence[int]) -> list[str]:
    """``[3, 6, 9]`` -> ``["3-5", "6-8", "9+"]``: bins start at each edge, the last is open."""
    return [f"{a}-{b - 1}" if b - 1 > a else str(a) for a, b in zip(edges, edges[1:], strict=False)] + [f"{edges[-1]}+"]


def by_bin(distances: np.ndarray, right: np.ndarray, edges: Sequence[int]) -> list[tuple[int, float]]:
    """Per distance bin: (sentences, accuracy); bins as :func:`bin_labels`, accuracy NaN for an empty bin."""
    which = np.searchsorted(np.asarray(edges), distances, side="right") - 1
    out = []
    for b in range(len(edges)):
        mask = which == b
        out.append((int(mask.sum()), float(right[mask].mean()) if mask.any() else float("nan")))
    return out


def write_outputs(
    table: dict[str, dict[str, list[tuple[int, float]]]],
    overall: dict[str, dict[str, float]],
    labels: list[str],
    out: Path,
    title: str,
) -> list[Path]:
    """``agreement.csv`` (model, measure, bin, sentences, accuracy), ``agreement.md`` (a table per measure) and the
    plot (``agreement.png``/``.svg``: accuracy against distance, a panel per measure, a line per model)."""
    files = [out / "agreement.csv", out / "agreement.md"]
    with open(files[0], "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["model", "measure", "distance", "sentences", "accuracy"])
        for name, measures in table.items():
            for measure, cells in measures.items():
                for label, (n, acc) in zip(labels, cells, strict=True):
                    writer.writerow([name, measure, label, n, "" if n == 0 else f"{acc:.4f}"])
    parts = []
    for measure in ("forced", "decoded"):
        counts = next(iter(table.values()))[measure]
        head = " | ".join(f"{label} ({n})" for label, (n, _) in zip(labels, counts, strict=True))
        lines = [
            f"**{MEASURES[measure]}**, accuracy by distance from the subject (words; sentences)\n",
            f"| model | all | {head} |",
            "|---|---:|" + "---:|" * len(labels),
        ]
        for name, measures in table.items():
            cells = " | ".join("–" if n == 0 else f"{acc:.3f}" for n, acc in measures[measure])
            lines.append(f"| {name} | {overall[name][measure]:.3f} | {cells} |")
        parts.append("\n".join(lines))
    files[1].write_text("\n\n".join(parts) + "\n", encoding="utf-8")
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    markers = "os^Dv<>p"
    for ax, measure in zip(axes, ("forced", "decoded"), strict=True):
        for i, (name, measures) in enumerate(table.items()):
            ys = [acc if n else np.nan for n, acc in measures[measure]]
            ax.plot(range(len(labels)), ys, marker=markers[i % len(markers)], label=name)
        ax.set_xticks(range(len(labels)), labels)
        ax.set_xlabel("distance from the subject noun to the final verb (words)")
        ax.set_title(MEASURES[measure], fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("agreement accuracy of the final verb")
    axes[1].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    return files + save(fig, out / "agreement")

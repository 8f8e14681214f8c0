"""A checkpoint's attention over a test set: decoded, teacher-forced on given target sentences, or read from an
attention file and checked to be that model's on that test set.

Every analysis that reads attention takes ``ckpts=[...]`` (the claimed models), ``source=FILE`` (the claimed test
set) and optionally ``attention=[...]`` (one file per checkpoint, from ``translate attention=``). A file is checked
before it is used, so a file of another test set or another model is named, not analysed:

1. its number of records against the source's number of lines;
2. each record's source pieces against the line as the checkpoint's codec splits it (another test set, or another
   model's vocabulary), and its target pieces against its ids in the checkpoint's vocabulary;
3. whether it has a target self-attention where the checkpoint's decoder has one, and the reverse;
4. the weights themselves: the checkpoint is run teacher-forced on the record's own output and must give the same
   source and target attention (to ``tolerance``): a model with the same vocabulary but other weights differs here.

Without a file the attention is computed here (``target=FILE``: teacher-forced on those sentences, e.g. the
references; otherwise decoded with the configured search) and written to ``<out_dir>/<name>.attention.jsonl`` in
``translate``'s format, so the next analysis can reuse it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from sarnmt.analysis import AnalysisError
from sarnmt.checkpoints.reading import LoadedModel, load_model
from sarnmt.checkpoints.stored_config import run_trust
from sarnmt.data.loading.batching import pad_sequences
from sarnmt.data.text.codecs import EOS_TOKEN, UNK
from sarnmt.data.text.reading import read_lines
from sarnmt.decoding.attention_file import (
    AttentionRecord,
    attention_record,
    read_attention,
    record_from_json,
    target_pieces,
    write_attention,
)
from sarnmt.decoding.search import build_search
from sarnmt.decoding.stream import decode_stream
from sarnmt.errors import check_range
from sarnmt.kernels.choice import check_choice
from sarnmt.utils.device import pick_device

log = logging.getLogger("sarnmt")


@dataclass
class Run:
    """One model's attention over the test set.  :param name: its display name.  :param path: the checkpoint.
    :param records: one per source line.  :param self_attention: whether its decoder has a target self-attention.
    :param loaded: the model."""

    name: str
    path: str
    records: list[AttentionRecord]
    self_attention: bool
    loaded: LoadedModel


def has_self_attention(net: torch.nn.Module) -> bool:
    """Whether the model's decoder exposes a target self-attention (its teacher-forced output's ``tgt_attention``
    is not None; the baseline's and the mean residual's is None) — asked of the model, not of its class name."""
    device = next(net.parameters()).device
    one = torch.full((1, 2), 2, dtype=torch.long, device=device)
    with torch.inference_mode():
        return net(one, torch.ones_like(one, dtype=torch.bool), one).tgt_attention is not None


def forced_records(
    loaded: LoadedModel,
    lines: list[str],
    targets: list[list[int]],
    batch_size: int = 32,
    pieces: list[list[str]] | None = None,
) -> list[AttentionRecord]:
    """Teacher-forced attention of ``targets`` (ids without EOS; EOS is appended and predicted) given the source
    ``lines`` (text, encoded with the checkpoint's codec). Blank lines give empty records, as in ``translate``.

    :param pieces: the target pieces to record (default: as ``translate`` labels them)."""
    net, device = loaded.net, next(loaded.net.parameters()).device
    src_codec, tgt_codec = loaded.src_codec, loaded.tgt_codec
    sources = [src_codec.encode(line) if line.strip() else [] for line in lines]
    out = [AttentionRecord(i, (), (), (), None, None) for i in range(len(lines))]
    order = [i for i in sorted(range(len(sources)), key=lambda i: -len(sources[i])) if sources[i]]
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        src, src_mask = pad_sequences([sources[i] for i in rows])
        tgt, tgt_mask = pad_sequences([targets[i] for i in rows])
        src, src_mask, tgt = src.to(device), src_mask.to(device), tgt.to(device)
        with torch.inference_mode():
            result = net(src, src_mask, tgt)
            logp = torch.log_softmax(result.logits.float(), dim=-1).gather(2, tgt.unsqueeze(2)).squeeze(2)
        for k, i in enumerate(rows):
            n, width = int(tgt_mask[k].sum()), int(src_mask[k].sum())
            score = float(logp[k, :n].sum())
            src_att, tgt_att = result.src_attention, result.tgt_attention
            out[i] = AttentionRecord(
                line=i,
                source=(*src_codec.tokens(lines[i]), EOS_TOKEN),
                target=(*(pieces[i] if pieces else target_pieces(tgt_codec, targets[i])), EOS_TOKEN),
                target_ids=tuple(targets[i]),
                src_attention=None if src_att is None else src_att[k, :n, :width].double().cpu().numpy(),
                tgt_attention=None if tgt_att is None else tgt_att[k, :n, :n].double().cpu().numpy(),
                score=score,
                normalized_score=score / n,
            )
    return out


def decoded_records(loaded: LoadedModel, lines: list[str], search, batch_size: int = 64) -> list[AttentionRecord]:
    """The attention of the model's own translations of ``lines`` with ``search`` (as ``translate`` writes it)."""
    src_codec, device = loaded.src_codec, next(loaded.net.parameters()).device
    sources = [src_codec.encode(line) if line.strip() else [] for line in lines]
    results = decode_stream(loaded.net, search, sources, batch_size, device, return_attention=True)
    return [
        record_from_json(
            attention_record(i, src_codec.tokens(lines[i]) if sources[i] else [], result, loaded.tgt_codec),
            f"translation of line {i + 1}",
        )
        for i, result in enumerate(results)
    ]


def check_records(
    records: list[AttentionRecord],
    path: str,
    lines: list[str],
    loaded: LoadedModel,
    source_path: str,
    tolerance: float = 0.01,
    targets: tuple[str, list[str]] | None = None,
) -> None:
    """Check that ``records`` (read from ``path``) are the attention of ``loaded`` on ``lines`` (read from
    ``source_path``); the checks are listed in the module docstring.

    :raises AnalysisError: naming the file, the line and what differs.
    """
    ckpt = loaded.path
    if len(records) != len(lines):
        raise AnalysisError(
            f"attention file {path} has {len(records)} records but source {source_path} has "
            f"{len(lines)} lines: it is the attention of another test set"
        )
    src_codec, tgt_codec = loaded.src_codec, loaded.tgt_codec
    self_attention = has_self_attention(loaded.net)
    for record, line in zip(records, lines, strict=True):
        where = f"attention file {path} line {record.line + 1}"
        expected = [*src_codec.tokens(line), EOS_TOKEN] if line.strip() else []
        if record.source and list(record.source) != expected or not record.source and line.strip() and record.target:
            raise AnalysisError(
                f"{where}: its source tokens {' '.join(record.source[:8])!r}... are not line "
                f"{record.line + 1} of {source_path} as {ckpt} splits it "
                f"({' '.join(expected[:8])!r}...): another test set, or another model's vocabulary"
            )
        if not _labels_fit(tgt_codec, list(record.target_ids), record.words):
            raise AnalysisError(
                f"{where}: its target ids do not give its target tokens in the vocabulary of {ckpt}: "
                f"written by another model"
            )
        if record.rows and (record.tgt_attention is not None) != self_attention:
            has = "has" if record.tgt_attention is not None else "has no"
            model = "has" if self_attention else "has none"
            raise AnalysisError(
                f"{where}: it {has} target self-attention, the decoder of {ckpt} {model}: written by another model"
            )
    if targets is not None:  # claimed to be teacher-forced on these sentences
        target_path, target_lines = targets
        for record, line in zip(records, target_lines, strict=True):
            if record.rows and list(record.target_ids) != tgt_codec.encode(line):
                raise AnalysisError(
                    f"attention file {path} line {record.line + 1}: its target is not line {record.line + 1} of "
                    f"target {target_path} (a translation, or the attention of other sentences)"
                )
    forced = forced_records(loaded, lines, [list(r.target_ids) for r in records])
    for record, again in zip(records, forced, strict=True):
        for key in ("src_attention", "tgt_attention"):
            ours, theirs = getattr(record, key), getattr(again, key)
            if ours is None or theirs is None:
                continue
            gap = float(np.abs(ours - theirs[: ours.shape[0], : ours.shape[1]]).max()) if ours.size else 0.0
            if gap > tolerance:
                raise AnalysisError(
                    f"attention file {path} line {record.line + 1}: its {key} differs from what "
                    f"{ckpt} gives on the same words (max |difference| {gap:.3f} > tolerance "
                    f"{tolerance}): written by another model"
                )


def names_of(paths: list[str], names: list[str] | None) -> list[str]:
    """Display names: ``names`` when given, else the checkpoint's run folder (``<run>/checkpoints/x.ckpt`` ->
    ``<run>``) or file stem."""
    if names is not None:
        if len(names) != len(paths):
            raise AnalysisError(f"names has {len(names)} entries but ckpts has {len(paths)}")
        return [str(n) for n in names]
    out = []
    for path in paths:
        p = Path(path)
        out.append(p.parent.parent.name if p.parent.name == "checkpoints" else p.stem)
    if len(set(out)) != len(out):
        raise AnalysisError(f"the checkpoints' names repeat ({', '.join(out)}): give names=[...]")
    return out


def load_runs(cfg, out_dir: Path, self_attention_only: bool = False) -> list[Run]:
    """The runs of ``cfg.ckpts`` on ``cfg.source`` (keys: ``ckpts``, ``names``, ``source``, ``target``,
    ``attention``, ``decoding``, ``batch_size``, ``device``, ``kernels``, ``tolerance``), attention files checked
    or computed and written to ``out_dir`` (see the module docstring).

    :param self_attention_only: a model without a target self-attention is not decoded (its run has no records).
    :raises InputError: for ``kernels`` or ``batch_size`` out of range, before anything is read (their one check)."""
    check_choice(cfg.kernels)
    check_range("batch_size", cfg.batch_size, 1, whole=True)
    paths = [str(p) for p in _as_list(cfg.ckpts, "ckpts")]
    names = names_of(paths, None if cfg.names is None else list(cfg.names))
    files = _as_list(cfg.attention, "attention") if cfg.attention is not None else None
    if files is not None and len(files) != len(paths):
        raise AnalysisError(f"attention has {len(files)} files but ckpts has {len(paths)} checkpoints (one each)")
    lines = read_input(cfg.source, "source")
    targets = read_input(cfg.target, "target") if cfg.target is not None else None
    if targets is not None and len(targets) != len(lines):
        raise AnalysisError(f"target {cfg.target} has {len(targets)} lines but source {cfg.source} has {len(lines)}")
    device, search = pick_device(cfg.device), build_search(cfg.decoding)  # its settings checked once, here
    runs = []
    for k, (name, path) in enumerate(zip(names, paths, strict=True)):
        loaded = load_model(path, device, cfg.kernels, run_trust(cfg))
        if loaded.src_codec is None or loaded.tgt_codec is None:
            raise AnalysisError(f"checkpoint {path} has no text codecs (saved without a datamodule)")
        self_attention = has_self_attention(loaded.net)
        if self_attention_only and not self_attention:
            records = []
        elif files is not None:
            records = read_attention(files[k])
            claimed = (cfg.target, targets) if targets is not None else None
            check_records(records, str(files[k]), lines, loaded, cfg.source, cfg.tolerance, claimed)
        else:
            if targets is not None:
                ids = [loaded.tgt_codec.encode(line) for line in targets]
                pieces = [_labels(loaded.tgt_codec, i, line) for i, line in zip(ids, targets, strict=True)]
                records = forced_records(loaded, lines, ids, cfg.batch_size, pieces)
            else:
                records = decoded_records(loaded, lines, search, cfg.batch_size)
            write_attention(out_dir / f"{name}.attention.jsonl", records)
            log.info("%s: attention of %d lines written to %s", name, len(records), out_dir / f"{name}.attention.jsonl")
        runs.append(Run(name, path, records, self_attention, loaded))
    return runs


def _labels_fit(codec, ids: list[int], words: list[str]) -> bool:
    """Whether ``words`` label ``ids`` in the codec's vocabulary, as ``translate`` writes them today
    (:func:`~sarnmt.decoding.attention_file.target_pieces`) or wrote them before (each id decoded alone); an unknown
    word (``<unk>`` id) may keep its own spelling."""
    if not all(0 <= i < codec.vocab_size for i in ids):
        return False
    for labels in (target_pieces(codec, ids), [codec.decode([i]) for i in ids]):
        if all(i == UNK or word == label for i, word, label in zip(ids, words, labels, strict=True)):
            return True
    return False


def _labels(codec, ids: list[int], line: str) -> list[str]:
    """Target labels as ``translate`` writes them (:func:`~sarnmt.decoding.attention_file.target_pieces`), except
    that a piece outside the vocabulary keeps its own spelling from the target text rather than ``<unk>``."""
    pieces = codec.tokens(line)
    return [
        piece if i == UNK else label for i, piece, label in zip(ids, pieces, target_pieces(codec, ids), strict=True)
    ]


def _as_list(value, key: str) -> list:
    if isinstance(value, str):
        return [value]
    items = list(value)
    if not items:
        raise AnalysisError(f"{key} is empty")
    return items


def read_input(path: str, key: str) -> list[str]:
    """The lines of the file that config key ``key`` names.  :raises AnalysisError: naming the key if it is missing."""
    try:
        return read_lines(path)
    except FileNotFoundError as err:
        raise AnalysisError(f"{key}: {err}") from err

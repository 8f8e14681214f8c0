"""Translate plain text with a trained model: ``python -m sarnmt translate ckpt_path=model.ckpt [input=in.txt]
[output=out.txt] [decoding=beam decoding.beam_size=5] [nbest=K] [attention=att.jsonl]``.

Input lines are encoded with the checkpoint's source codec (its preprocessing), decoded in length-sorted batches
(:mod:`sarnmt.decoding.stream`), and decoded with the target codec (its postprocessing), one output line per input
line, in order; an empty (or blank) input line gives an empty output line.

**Input** is read as :mod:`sarnmt.data.text.reading` reads files: lines end at ``\\n`` only (a CRLF line reads as LF;
NUL and other control characters stay inside their line), and bytes that are not UTF-8 stop the run with an error naming
the file (or ``<stdin>``) and the line. It is read as a stream (a file, a FIFO, a character device or stdin), one line
at a time with at most ``max_line_bytes`` of it in memory. A line longer than ``max_input_tokens`` source tokens is
translated from its first ``max_input_tokens`` tokens, with a warning naming it (``truncate_long_input=false``: refused
instead), which bounds decoding time and memory; only its first ``128 · max_input_tokens`` characters are encoded. A
line longer than ``max_line_bytes`` is cut there by the same rule and the rest of it skipped; one with no end in a
further GiB (``/dev/zero``, a binary file) is cut and ends the input (:mod:`sarnmt.decoding.input_limit`).

**Outputs** (:mod:`sarnmt.utils.atomic`): ``output=`` and ``attention=`` files are written together and atomically
(after an error neither is there, not even half-written); a symlink's target is replaced and the link kept; a FIFO or a
character device (``/dev/null``, ``/dev/stdout``) is written through, never replaced. ``output`` or ``attention`` equal
to ``input``, ``output`` equal to ``attention``, or both on stdout are refused before anything is decoded, as are a
closed stdin or stdout, a batch size below 1 and a ``device`` the machine lacks. Warnings (a truncated line; more than
``unknown_warning`` of the input's source tokens unknown to the model, :mod:`sarnmt.decoding.unknown_share`) go to
stderr, one line each (``sarnmt/conf/hydra/job_logging/stderr.yaml``).

**Record** (the log, stderr; information lines show with ``hydra.job_logging.loggers.sarnmt.level=INFO``): the
search and device it translates with, then, when done, the lines written and ``capture: {JSON}``, whether the
search's steps were replayed from captured graphs and if not why, the keys of ``evaluate``'s record
(:func:`sarnmt.decoding.captured.capture_record`: ``captured``, ``graphs``, ``eager_batches``, ``why``): a failed
capture shows there too, not only as a warning and no speed-up.

**Attention file** (``attention=PATH``), JSON Lines, one record per input line, in order::

    {"line": 0, "source": ["tok", ..., "</s>"], "target": ["tok", ..., "</s>"], "target_ids": [12, ...],
     "score": -3.2, "normalized_score": -0.8,
     "src_attention": [[...S floats...], ...n rows...],  "tgt_attention": [[...n floats...], ...n rows...] | null}

``source`` are the source codec's pieces plus the EOS the encoder reads (S = len + 1); ``target`` are the output
pieces in the same form (:func:`~sarnmt.decoding.attention_file.target_pieces`) plus ``</s>`` when the hypothesis
ended with EOS (n rows; without it the length limit stopped it). ``src_attention`` row t is α over the source at
output step t; ``tgt_attention`` row t is the variant's attention over its history items 0..t (item 0 is the zero
slot before the first word; entries above the diagonal are 0), null for variants without one (baseline). Empty lines
give empty lists and null matrices. A model without source attention (the fixed-context LSTM) gives
``src_attention: null``, and empty ``source``/``target`` unless its decoder has a target self-attention.

**N-best output** (``nbest=K``, 1 < K <= the beam size; Moses's n-best layout): K lines per input line, best
first, each ``LINE ||| TRANSLATION ||| SCORE ||| NORMALIZED``, with LINE the input line's 0-based index, SCORE the
summed log-probability (EOS included) and NORMALIZED the score the search ranked by (after the length penalty).
Fewer than K lines when fewer hypotheses finished; an empty input line gives one line with an empty translation.

This module parses and checks the command's settings and streams and writes the outputs; the records of the
attention file are made and read by :mod:`sarnmt.decoding.attention_file`, the translations by
:func:`sarnmt.decoding.stream.decode_stream`.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from typing import IO, Any, TextIO

import torch
from hydra.utils import to_absolute_path
from omegaconf import DictConfig
from tqdm import tqdm

from sarnmt.checkpoints.reading import CheckpointError, LoadedModel, load_model
from sarnmt.checkpoints.stored_config import run_trust
from sarnmt.data.text.codecs import TextCodec
from sarnmt.data.text.reading import Line, bounded_lines, check_file
from sarnmt.decoding.attention_file import attention_record
from sarnmt.decoding.captured import capture_record
from sarnmt.decoding.input_limit import InputLimit, check_max_line_bytes
from sarnmt.decoding.search import Search, build_search
from sarnmt.decoding.stream import Translation, decode_stream
from sarnmt.decoding.unknown_share import UnknownShare
from sarnmt.errors import InputError, check_flag, check_range, reported
from sarnmt.kernels.choice import check_choice
from sarnmt.utils.allocator import keep_freed_memory
from sarnmt.utils.atomic import AtomicFiles, atomic_files, check_output
from sarnmt.utils.compose import hydra_main
from sarnmt.utils.device import pick_device
from sarnmt.utils.precision import check_native_bf16, check_precision, precision_context
from sarnmt.utils.threads import apply_threads

log = logging.getLogger("sarnmt")
MAX_LINE_BYTES = 1 << 20  # translate.yaml's max_line_bytes


def nbest_line(index: int, text: str, score: float, normalized: float) -> str:
    """One line of the n-best output (format in the module docstring)."""
    return f"{index} ||| {text} ||| {score:.6f} ||| {normalized:.6f}\n"


STDIO = (None, "-")  # input=/output= values meaning stdin/stdout


def _same_file(a: str, b: str) -> bool:
    """Whether two paths name one file (links and hard links included; by resolved name when one is missing)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def check_streams(cfg: DictConfig, stdin: IO[Any] | None, stdout: TextIO | None) -> None:
    """Refuse, before any decoding: ``output`` equal to ``input`` (the source would be replaced by its
    translation), ``attention`` equal to ``input`` or ``output``, both on stdout, a closed stdin or stdout that is
    needed, and an input or output path that cannot be used (:func:`~sarnmt.utils.atomic.check_output`).

    :raises InputError: naming the keys and the file.
    """
    paths = {
        key: to_absolute_path(cfg[key])
        for key in ("input", "output", "attention")
        if cfg[key] not in STDIO and not (key == "attention" and not cfg[key])
    }
    _check_stdio(cfg, paths.get("input"), stdin, stdout)
    for key in ("output", "attention"):
        if key in paths and "input" in paths and _same_file(paths[key], paths["input"]):
            raise InputError(
                f"{key}={cfg[key]} is the input file {paths['input']}: writing it would replace the text being "
                "translated; give another file"
            )
    if "output" in paths and "attention" in paths and _same_file(paths["output"], paths["attention"]):
        raise InputError(f"output and attention are the same file ({cfg.output}); give attention another name")
    for key in ("output", "attention"):
        if key in paths:
            check_output(paths[key], key)


def _check_stdio(cfg: DictConfig, input_path: str | None, stdin: IO[Any] | None, stdout: TextIO | None) -> None:
    """Refuse output and attention both on stdout, an input file that cannot be read (``input_path``) or a closed
    stdin (no ``input_path``), and a closed stdout that is needed; :func:`check_streams` checks the rest."""
    if cfg.attention == "-" and cfg.output in STDIO:
        raise InputError(
            "output and attention=- both go to stdout, where translations and JSON would interleave; give "
            "attention=FILE or output=FILE"
        )
    if input_path is not None:
        check_file(input_path, "an input file", streams=True)
    elif (stdin if stdin is not None else sys.stdin) is None:
        raise InputError("standard input is closed: give input=FILE or pipe the text in")
    if cfg.output in STDIO and (stdout if stdout is not None else sys.stdout) is None:
        raise InputError("standard output is closed: give output=FILE")


def _open_output(path: str | None, files: AtomicFiles, default: TextIO | None, key: str) -> TextIO:
    """``default`` for None or ``-``, else the file: written atomically (complete, or not at all) with the other
    outputs, or through for a FIFO or character device (:mod:`sarnmt.utils.atomic`)."""
    if path in STDIO:
        assert default is not None  # check_streams refused a closed stdout
        return default
    return files.open(to_absolute_path(path), "w", key)


def _input_lines(
    path: str | None, stack: ExitStack, stdin: IO[Any] | None, max_bytes: int
) -> tuple[Iterator[Line], str]:
    """The input's lines (split on ``\\n`` only, strict UTF-8, at most ``max_bytes`` bytes each:
    :func:`sarnmt.data.text.reading.bounded_lines`) and its name for messages."""
    if path not in STDIO:
        name = to_absolute_path(path)
        handle = stack.enter_context(open(check_file(name, "an input file", streams=True), "rb"))
        return bounded_lines(handle, name, max_bytes), name
    stream = stdin if stdin is not None else sys.stdin
    if stream is None:
        raise InputError("standard input is closed: give input=FILE or pipe the text in")
    return bounded_lines(getattr(stream, "buffer", stream), "<stdin>", max_bytes), "<stdin>"


def translate(cfg: DictConfig, stdin: IO[Any] | None = None, stdout: TextIO | None = None) -> int:
    """Translate ``cfg.input`` into ``cfg.output``.  :returns: the number of lines written.

    :raises InputError: on a setting out of range, an input or output that cannot be used (before decoding), input
        that is not UTF-8, or a line longer than ``max_input_tokens`` with ``truncate_long_input=false`` (naming
        the line); an output file is then not written at all.
    """
    limit, unknown, search, device = check_settings(cfg, stdin, stdout)
    loaded = load_translator(cfg, device)
    log.info("translating with %s on %s (%s parameters)", search, device, f"{loaded.parameters:,}")
    with ExitStack() as stack:
        source, limit.name = _input_lines(cfg.input, stack, stdin, limit.max_line_bytes)
        files = stack.enter_context(atomic_files())
        target = _open_output(cfg.output, files, stdout or sys.stdout, "output")
        attention = _open_output(cfg.attention, files, sys.stdout, "attention") if cfg.attention else None
        pieces: list[list[str]] | None = [] if attention is not None else None  # of the lines read ahead
        encoded = _encoded(source, limit, loaded.src_codec, unknown, pieces)
        net, chunks = loaded.net, cfg.chunk_batches
        results = decode_stream(net, search, encoded, cfg.batch_size, device, attention is not None, chunks, cfg.nbest)
        stack.enter_context(precision_context(device, cfg.precision))
        count = 0
        for result in tqdm(results, desc="translate", unit=" lines", disable=not cfg.progress, file=sys.stderr):
            _write(count, result, loaded.tgt_codec, cfg.nbest, target, attention, pieces)
            count += 1
        target.flush()
    warning = unknown.warning(limit.name)
    if warning:
        log.warning(warning)
    log.info("wrote %d lines; capture: %s", count, json.dumps(capture_record(loaded.net, device)))
    return count


def check_settings(
    cfg: DictConfig, stdin: IO[Any] | None, stdout: TextIO | None
) -> tuple[InputLimit, UnknownShare, Search, torch.device]:
    """Every setting, the input and the outputs checked before the checkpoint is read (:func:`check_streams`): the
    input limit, the unknown-word share to warn at, the search and the device (on CPU with freed memory kept)."""
    check_precision(cfg.precision)
    max_line_bytes = cfg.get("max_line_bytes", MAX_LINE_BYTES)
    check_max_line_bytes(max_line_bytes)
    limit = InputLimit(cfg.max_input_tokens, cfg.truncate_long_input, max_line_bytes=max_line_bytes)
    unknown = UnknownShare(cfg.get("unknown_warning"))
    check_range("batch_size", cfg.batch_size, 1, whole=True)
    check_range("nbest", cfg.nbest, 1, whole=True)
    check_range("chunk_batches", cfg.chunk_batches, 1, whole=True)
    for key in ("truncate_long_input", "progress"):
        check_flag(key, cfg[key])
    apply_threads(cfg.get("threads"))
    check_choice(cfg.kernels)
    search = build_search(cfg.decoding, max_source_tokens=cfg.max_input_tokens)
    if cfg.nbest > search.beam_size:
        raise InputError(
            f"nbest={cfg.nbest}: must be at most the beam size, {search.beam_size} (decoding=beam "
            "decoding.beam_size=K for more)"
        )
    device = pick_device(cfg.device)
    check_native_bf16(device, cfg.precision)
    check_streams(cfg, stdin, stdout)
    if cfg.keep_freed_memory and device.type == "cpu":
        keep_freed_memory()
    return limit, unknown, search, device


def load_translator(cfg: DictConfig, device: torch.device) -> LoadedModel:
    """The checkpoint's model and codecs.  :raises CheckpointError: for a checkpoint saved without its codecs."""
    loaded = load_model(to_absolute_path(cfg.ckpt_path), device, cfg.kernels, run_trust(cfg))
    if loaded.src_codec is None or loaded.tgt_codec is None:
        raise CheckpointError(f"checkpoint {cfg.ckpt_path} has no text codecs (saved without a datamodule)")
    return loaded


def _encoded(
    source: Iterator[Line], limit: InputLimit, codec: TextCodec, unknown: UnknownShare, pieces: list | None
) -> Iterator[list[int]]:
    """The input lines' ids (each cut by ``limit``, counted by ``unknown``); their source pieces appended to
    ``pieces`` (for the attention file) unless it is None."""
    for line_no, line in enumerate(source, 1):
        ids, text = limit.encode(codec, line, line_no)
        unknown.add(ids)
        if pieces is not None:
            pieces.append(codec.tokens(text)[: len(ids)] if ids else [])
        yield ids


def _write(
    count: int,
    result: Translation,
    codec: TextCodec,
    nbest: int,
    target: TextIO,
    attention: TextIO | None,
    pieces: list[list[str]] | None,
) -> None:
    """Input line ``count``'s translation (its ``nbest`` list when above 1) and its attention record."""
    if nbest > 1:
        target.writelines(
            nbest_line(count, codec.decode(e.tokens) if e.tokens else "", e.score, e.normalized_score)
            for e in result.nbest
        )
    else:
        target.write((codec.decode(result.tokens) if result.tokens else "") + "\n")
    if attention is not None and pieces is not None:
        record = attention_record(count, pieces[count], result, codec)
        attention.write(json.dumps(record, ensure_ascii=False) + "\n")


@hydra_main("translate")
def main(cfg: DictConfig) -> None:
    with reported():
        translate(cfg)

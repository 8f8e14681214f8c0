"""Translate plain text with a trained model: ``python -m sarnmt.translate ckpt_path=model.ckpt [input=in.txt]
[output=out.txt] [decoding=beam decoding.beam_size=5] [nbest=K] [attention=att.jsonl]``.

Input lines are encoded with the checkpoint's source codec (its preprocessing), decoded in length-sorted batches
(:mod:`sarnmt.decoding.stream`), and decoded with the target codec (its postprocessing), one output line per input
line, in order; an empty (or blank) input line gives an empty output line.

**Input** is read as :mod:`sarnmt.data.text.reading` reads files: lines end at ``\\n`` only (a CRLF line reads as LF;
NUL and other control characters stay inside their line), and bytes that are not UTF-8 stop the run with an error naming
the file (or ``<stdin>``) and the line. A line longer than ``max_input_tokens`` source tokens is translated from its
first ``max_input_tokens`` tokens, with a warning naming it (``truncate_long_input=false``: refused instead), which
bounds decoding time and memory (:mod:`sarnmt.decoding.input_limit`). ``output=`` and ``attention=`` files are written
atomically: after an error there is no half-written file.

**Attention file** (``attention=PATH``), JSON Lines, one record per input line, in order::

    {"line": 0, "source": ["tok", ..., "</s>"], "target": ["tok", ..., "</s>"], "target_ids": [12, ...],
     "score": -3.2, "normalized_score": -0.8,
     "src_attention": [[...S floats...], ...n rows...],  "tgt_attention": [[...n floats...], ...n rows...] | null}

``source`` are the source codec's pieces plus the EOS the encoder reads (S = len + 1); ``target`` are the output
pieces in the same form (:func:`target_pieces`) plus ``</s>`` when the hypothesis ended with EOS (n rows; without it
the length limit stopped it). ``src_attention`` row t is α over the source at output step t; ``tgt_attention`` row t
is the variant's attention over its history items 0..t (item 0 is the zero slot before the first word; entries above
the diagonal are 0), null for variants without one (baseline). Empty lines give empty lists and null matrices. A model
without source attention (the fixed-context LSTM) gives ``src_attention: null``, and empty ``source``/``target``
unless its decoder has a target self-attention.

**N-best output** (``nbest=K``, 1 < K <= the beam size; Moses's n-best layout): K lines per input line, best
first, each ``LINE ||| TRANSLATION ||| SCORE ||| NORMALIZED``, with LINE the input line's 0-based index, SCORE the
summed log-probability (EOS included) and NORMALIZED the score the search ranked by (after the length penalty).
Fewer than K lines when fewer hypotheses finished; an empty input line gives one line with an empty translation.
"""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from typing import IO, Any, TextIO

import hydra
from hydra.utils import instantiate, to_absolute_path
from omegaconf import DictConfig
from tqdm import tqdm

from sarnmt.checkpoint import CheckpointError, load_model
from sarnmt.data.text.codecs import EOS_TOKEN
from sarnmt.data.text.reading import check_file, stream_lines
from sarnmt.decoding.input_limit import InputLimit
from sarnmt.decoding.stream import Translation, decode_stream
from sarnmt.errors import InputError, reported
from sarnmt.utils.allocator import keep_freed_memory
from sarnmt.utils.atomic import atomic_open
from sarnmt.utils.device import pick_device
from sarnmt.utils.precision import check_precision, precision_context

log = logging.getLogger("sarnmt")


def target_pieces(codec, ids: list[int]) -> list[str]:
    """Labels of output ids in the form of the source side's pieces: the codec's ``tokens`` of the translation (for
    a Moses pipeline the truecased ``@@`` pieces, not each piece postprocessed alone, which capitalises it), or,
    when encoding the translation again does not give the same ids back, each id's tokenised form alone."""
    if ids:
        text = codec.decode(ids)
        if codec.encode(text) == list(ids):
            return codec.tokens(text)
    return [codec.decode_tokenized([i]) for i in ids]


def attention_record(index: int, source_pieces: list[str], result: Translation, tgt_codec) -> dict[str, Any]:
    """One line of the attention file (format in the module docstring)."""
    matrix = result.src_attention if result.src_attention is not None else result.tgt_attention
    n = 0 if matrix is None else matrix.size(0)
    target = target_pieces(tgt_codec, result.tokens) + [EOS_TOKEN] * (n - len(result.tokens))
    return {
        "line": index,
        "source": source_pieces + [EOS_TOKEN] if n else [],
        "target": target if n else [],
        "target_ids": result.tokens,
        "score": result.score,
        "normalized_score": result.normalized_score,
        "src_attention": None if result.src_attention is None else result.src_attention.tolist(),
        "tgt_attention": None if result.tgt_attention is None else result.tgt_attention.tolist(),
    }


def nbest_line(index: int, text: str, score: float, normalized: float) -> str:
    """One line of the n-best output (format in the module docstring)."""
    return f"{index} ||| {text} ||| {score:.6f} ||| {normalized:.6f}\n"


def _open_output(path: str | None, stack: ExitStack, default: TextIO) -> TextIO:
    """``default`` for None or ``-``, else the file, written atomically (complete, or not at all)."""
    if path is None or path == "-":
        return default
    return stack.enter_context(atomic_open(to_absolute_path(path), "w"))


def _input_lines(path: str | None, stack: ExitStack, stdin: IO[Any] | None) -> tuple[Iterator[str], str]:
    """The input's lines (split on ``\\n`` only, strict UTF-8: :func:`sarnmt.data.text.reading.stream_lines`) and its
    name for messages."""
    if path is not None and path != "-":
        name = to_absolute_path(path)
        return stream_lines(stack.enter_context(open(check_file(name, "an input file"), "rb")), name), name
    stream = stdin if stdin is not None else sys.stdin
    binary = getattr(stream, "buffer", stream)
    if isinstance(binary, io.TextIOBase):  # already text (a StringIO)
        return (line.removesuffix("\n").removesuffix("\r") for line in binary), "<stdin>"
    return stream_lines(binary, "<stdin>"), "<stdin>"


def translate(cfg: DictConfig, stdin: IO[Any] | None = None, stdout: TextIO | None = None) -> int:
    """Translate ``cfg.input`` into ``cfg.output``.  :returns: the number of lines written.

    :raises InputError: on input that is not UTF-8, or a line longer than ``max_input_tokens`` with
        ``truncate_long_input=false`` (naming the line); an output file is then not written at all.
    """
    check_precision(cfg.precision)
    limit = InputLimit(cfg.max_input_tokens, cfg.truncate_long_input)
    device = pick_device(cfg.device)
    if cfg.keep_freed_memory and device.type == "cpu":
        keep_freed_memory()
    loaded = load_model(to_absolute_path(cfg.ckpt_path), device, cfg.kernels)
    if loaded.src_codec is None or loaded.tgt_codec is None:
        raise CheckpointError(f"checkpoint {cfg.ckpt_path} has no text codecs (saved without a datamodule)")
    search = instantiate(cfg.decoding)
    if not 1 <= cfg.nbest <= search.beam_size:
        raise InputError(
            f"nbest={cfg.nbest} must be between 1 and the beam size ({search.beam_size}; "
            f"decoding=beam decoding.beam_size=K for more)"
        )
    log.info("translating with %s on %s (%s parameters)", search, device, f"{loaded.parameters:,}")
    src_codec, tgt_codec = loaded.src_codec, loaded.tgt_codec
    with ExitStack() as stack:
        source, limit.name = _input_lines(cfg.input, stack, stdin)
        target = _open_output(cfg.output, stack, stdout or sys.stdout)
        attention = _open_output(cfg.attention, stack, sys.stdout) if cfg.attention else None
        pieces: list[list[str]] = []  # source pieces of the lines read ahead (attention output only)

        def encoded() -> Iterator[list[int]]:
            for line_no, line in enumerate(source, 1):
                ids = limit(src_codec.encode(line), line_no) if line.strip() else []
                if attention is not None:
                    pieces.append(src_codec.tokens(line)[: len(ids)] if ids else [])
                yield ids

        results = decode_stream(
            loaded.net, search, encoded(), cfg.batch_size, device, attention is not None, cfg.chunk_batches, cfg.nbest
        )
        stack.enter_context(precision_context(device, cfg.precision))
        count = 0
        for result in tqdm(results, desc="translate", unit=" lines", disable=not cfg.progress, file=sys.stderr):
            if cfg.nbest > 1:
                target.writelines(
                    nbest_line(count, tgt_codec.decode(e.tokens) if e.tokens else "", e.score, e.normalized_score)
                    for e in result.nbest
                )
            else:
                target.write((tgt_codec.decode(result.tokens) if result.tokens else "") + "\n")
            if attention is not None:
                record = attention_record(count, pieces[count], result, tgt_codec)
                attention.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
        target.flush()
    return count


@hydra.main(version_base="1.3", config_path="../conf", config_name="translate")
def main(cfg: DictConfig) -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="[%(levelname)s] %(message)s")
    with reported():
        count = translate(cfg)
    log.info("wrote %d lines", count)


if __name__ == "__main__":
    main()

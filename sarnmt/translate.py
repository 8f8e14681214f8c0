"""Translate plain text with a trained model: ``python -m sarnmt.translate ckpt_path=model.ckpt [input=in.txt]
[output=out.txt] [decoding=beam decoding.beam_size=5] [nbest=K] [attention=att.jsonl]``.

Input lines are encoded with the checkpoint's source codec (its preprocessing), decoded in length-sorted batches
(:mod:`sarnmt.decoding.stream`), and decoded with the target codec (its postprocessing), one output line per input
line, in order; an empty (or blank) input line gives an empty output line.

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

import json
import logging
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any, TextIO

import hydra
import torch
from hydra.utils import instantiate, to_absolute_path
from omegaconf import DictConfig
from tqdm import tqdm

from sarnmt.checkpoint import load_model
from sarnmt.data.codecs import EOS_TOKEN
from sarnmt.decoding.stream import Translation, decode_stream
from sarnmt.utils.allocator import keep_freed_memory
from sarnmt.utils.precision import check_precision, precision_context

log = logging.getLogger("sarnmt")


def pick_device(name: str) -> torch.device:
    """``auto``: CUDA when available, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


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
        "line": index, "source": source_pieces + [EOS_TOKEN] if n else [], "target": target if n else [],
        "target_ids": result.tokens, "score": result.score, "normalized_score": result.normalized_score,
        "src_attention": None if result.src_attention is None else result.src_attention.tolist(),
        "tgt_attention": None if result.tgt_attention is None else result.tgt_attention.tolist(),
    }  # fmt: skip


def nbest_line(index: int, text: str, score: float, normalized: float) -> str:
    """One line of the n-best output (format in the module docstring)."""
    return f"{index} ||| {text} ||| {score:.6f} ||| {normalized:.6f}\n"


def _open(path: str | None, mode: str, stack: ExitStack, default: TextIO) -> TextIO:
    if path is None or path == "-":
        return default
    return stack.enter_context(open(to_absolute_path(path), mode, encoding="utf-8", newline="\n"))


def translate(cfg: DictConfig, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """Translate ``cfg.input`` into ``cfg.output``.  :returns: the number of lines written."""
    check_precision(cfg.precision)
    device = pick_device(cfg.device)
    if cfg.keep_freed_memory and device.type == "cpu":
        keep_freed_memory()
    loaded = load_model(to_absolute_path(cfg.ckpt_path), device, cfg.kernels)
    if loaded.src_codec is None or loaded.tgt_codec is None:
        raise ValueError(f"checkpoint {cfg.ckpt_path} has no text codecs (saved without a datamodule)")
    search = instantiate(cfg.decoding)
    if not 1 <= cfg.nbest <= search.beam_size:
        raise ValueError(f"nbest={cfg.nbest} must be between 1 and the beam size ({search.beam_size}; "
                         f"decoding=beam decoding.beam_size=K for more)")  # fmt: skip
    log.info("translating with %s on %s (%s parameters)", search, device, f"{loaded.parameters:,}")
    src_codec, tgt_codec = loaded.src_codec, loaded.tgt_codec
    with ExitStack() as stack:
        source = _open(cfg.input, "r", stack, stdin or sys.stdin)
        target = _open(cfg.output, "w", stack, stdout or sys.stdout)
        attention = _open(cfg.attention, "w", stack, sys.stdout) if cfg.attention else None
        pieces: list[list[str]] = []  # source pieces of the lines read ahead (attention output only)

        def encoded() -> Iterator[list[int]]:
            for line in source:
                line = line.rstrip("\r\n")
                ids = src_codec.encode(line) if line.strip() else []
                if attention is not None:
                    pieces.append(src_codec.tokens(line) if ids else [])
                yield ids

        results = decode_stream(loaded.net, search, encoded(), cfg.batch_size, device, attention is not None,
                                cfg.chunk_batches, cfg.nbest)  # fmt: skip
        stack.enter_context(precision_context(device, cfg.precision))
        count = 0
        for result in tqdm(results, desc="translate", unit=" lines", disable=not cfg.progress, file=sys.stderr):
            if cfg.nbest > 1:
                target.writelines(nbest_line(count, tgt_codec.decode(e.tokens) if e.tokens else "", e.score,
                                             e.normalized_score) for e in result.nbest)  # fmt: skip
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
    count = translate(cfg)
    log.info("wrote %d lines", count)


if __name__ == "__main__":
    main()

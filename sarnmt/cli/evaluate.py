"""Evaluate a checkpoint on a corpus split: ``python -m sarnmt evaluate ckpt_path=model.ckpt data=multi30k_en_de
split=test [decoding=beam decoding.beam_size=12]``.

Decodes the raw source lines of the split with the checkpoint's codecs and model (the same search objects as
training's final test and ``translate``), then writes to ``output_dir``:

- ``hypotheses.<split>.txt``: the plain (detokenised, detruecased) translations, one per line;
- ``hypotheses.<split>.tok.txt``: their tokenised form (the target codec's ``decode_tokenized``);
- ``eval.<split>.json``: ``bleu`` (sacrebleu 13a on plain text against the raw references: NIST mteval-v13a
  style, Table 3), ``bleu_tokenized`` and ``bleu_tokenized_lc`` (``tokenize=none`` on the codec's tokenised
  hypotheses and references: multi-bleu.perl and its ``-lc``, Tables 1, 2, 4), ``chrf``, each with its signature,
  plus the decoding settings, checkpoint, parameter count, sentence count and speed, and the lines truncated to
  ``max_input_tokens`` (:mod:`sarnmt.decoding.input_limit`).

The three files are written together and atomically (temporary names, flushed, renamed once all are complete): an
interrupted or failed evaluation leaves the previous files or none, never a half-written one or a mix of old and new.
``output_dir``, the batch size, the decoding settings and the device are checked before anything is decoded; an empty
split is refused, naming it.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate, to_absolute_path
from omegaconf import DictConfig, OmegaConf
from torch import nn
from tqdm import tqdm

from sarnmt.data.text.codecs import TextCodec
from sarnmt.decoding.input_limit import InputLimit
from sarnmt.decoding.search import Search, build_search
from sarnmt.decoding.stream import decode_stream
from sarnmt.errors import InputError, check_range, reported
from sarnmt.evaluation.bleu import Score, corpus_bleu, corpus_chrf
from sarnmt.kernels.choice import check_choice
from sarnmt.training.checkpoint import load_model
from sarnmt.training.stored_config import run_trust
from sarnmt.utils.allocator import keep_freed_memory
from sarnmt.utils.atomic import atomic_files, check_folder
from sarnmt.utils.compose import hydra_main
from sarnmt.utils.device import pick_device
from sarnmt.utils.precision import check_precision, precision_context

log = logging.getLogger("sarnmt")


@dataclass
class SplitOutput:
    """The translations of a split: ``plain`` (detokenised, detruecased), ``tokenized`` (the target codec's
    tokenised form), the references in both forms, and the decoding time in seconds."""

    plain: list[str]
    tokenized: list[str]
    references: list[str]
    references_tokenized: list[str]
    seconds: float
    bleu_tokenize: str = "13a"

    def scores(self) -> dict[str, Score]:
        """``bleu`` (13a on plain text against the raw references: NIST mteval-v13a style, Table 3), ``bleu_tok``
        and ``bleu_tok_lc`` (``tokenize=none`` on the tokenised text: multi-bleu.perl and its ``-lc``, Tables 1, 2,
        4) and ``chrf``."""
        return {
            "bleu": corpus_bleu(self.plain, self.references, tokenize=self.bleu_tokenize),
            "bleu_tok": corpus_bleu(self.tokenized, self.references_tokenized, tokenize="none"),
            "bleu_tok_lc": corpus_bleu(self.tokenized, self.references_tokenized, tokenize="none", lowercase=True),
            "chrf": corpus_chrf(self.plain, self.references),
        }


def translate_split(
    net: nn.Module,
    src_codec: TextCodec,
    tgt_codec: TextCodec,
    sources: list[str],
    references: list[str],
    search: Search,
    batch_size: int,
    device: torch.device,
    precision: str = "fp32",
    progress: bool = True,
    desc: str = "decode",
    bleu_tokenize: str = "13a",
    limit: InputLimit | None = None,
) -> SplitOutput:
    """Decode raw source lines (a blank line gives an empty translation) and pair them with their references.

    :param limit: the longest source decoded (:class:`~sarnmt.decoding.input_limit.InputLimit`); None: no limit."""
    if limit is not None:  # each line encoded from at most limit.max_chars characters
        encoded = [limit.encode(src_codec, line, line_no)[0] for line_no, line in enumerate(sources, 1)]
    else:
        encoded = [src_codec.encode(line) if line.strip() else [] for line in sources]
    start = time.perf_counter()
    with precision_context(device, precision):
        results = list(
            tqdm(
                decode_stream(net, search, encoded, batch_size, device),
                total=len(encoded),
                desc=desc,
                unit=" sent",
                disable=not progress,
                file=sys.stderr,
            )
        )
    seconds = time.perf_counter() - start
    return SplitOutput(
        plain=[tgt_codec.decode(r.tokens) if r.tokens else "" for r in results],
        tokenized=[tgt_codec.decode_tokenized(r.tokens) if r.tokens else "" for r in results],
        references=list(references),
        references_tokenized=[tgt_codec.tokenize(line) for line in references],
        seconds=seconds,
        bleu_tokenize=bleu_tokenize,
    )


def evaluate(cfg: DictConfig) -> dict[str, Any]:
    """:returns: the JSON record (also written to ``output_dir/eval.<split>.json``).

    :raises InputError: for a setting out of range or an ``output_dir`` that cannot be a folder, before decoding."""
    check_precision(cfg.precision)
    check_choice(cfg.kernels)
    check_range("batch_size", cfg.batch_size, 1)
    check_folder(cfg.output_dir, "output_dir")
    search = build_search(cfg.decoding, max_source_tokens=cfg.max_input_tokens)
    device = pick_device(cfg.device)
    if cfg.keep_freed_memory and device.type == "cpu":
        keep_freed_memory()
    ckpt_path = to_absolute_path(cfg.ckpt_path)
    trust = run_trust(cfg)
    loaded = load_model(ckpt_path, device, cfg.kernels, trust)
    datamodule = instantiate(cfg.data)
    datamodule.prepare_data()
    datamodule.setup("test")
    src_codec = loaded.src_codec or datamodule.src_codec
    tgt_codec = loaded.tgt_codec or datamodule.tgt_codec
    sources, references = datamodule.sources(cfg.split), datamodule.references(cfg.split)
    if not sources:
        raise InputError(
            f"{datamodule.name}/{cfg.split} has no sentences, so there is nothing to evaluate "
            f"(read from {datamodule.origin(cfg.split)})"
        )
    limit = InputLimit(cfg.max_input_tokens, cfg.truncate_long_input, f"{datamodule.name}/{cfg.split}")
    log.info(
        "evaluating %s on %s/%s (%d sentences) with %s", ckpt_path, datamodule.name, cfg.split, len(sources), search
    )
    output = translate_split(
        loaded.net,
        src_codec,
        tgt_codec,
        sources,
        references,
        search,
        cfg.batch_size,
        device,
        cfg.precision,
        cfg.progress,
        desc=f"decode {cfg.split}",
        bleu_tokenize=datamodule.bleu_tokenize,
        limit=limit,
    )
    scores = output.scores()
    out = Path(cfg.output_dir)
    hyp_path, tok_path = out / f"hypotheses.{cfg.split}.txt", out / f"hypotheses.{cfg.split}.tok.txt"
    seconds = output.seconds
    record = {
        "checkpoint": ckpt_path,
        "trust_targets": list(trust),
        "global_step": loaded.global_step,
        "parameters": loaded.parameters,
        "data": datamodule.name,
        "split": cfg.split,
        "sentences": len(sources),
        "decoding": search.settings(),
        "precision": cfg.precision,
        "device": str(device),
        "seconds": round(seconds, 3),
        "sentences_per_second": round(len(sources) / seconds, 2) if seconds > 0 else None,
        "bleu": scores["bleu"].as_dict(),
        "bleu_tokenized": scores["bleu_tok"].as_dict(),
        "bleu_tokenized_lc": scores["bleu_tok_lc"].as_dict(),
        "chrf": scores["chrf"].as_dict(),
        "max_input_tokens": limit.max_tokens,
        "truncated_lines": limit.truncated,
        "hypotheses": str(hyp_path),
        "hypotheses_tokenized": str(tok_path),
        "model": OmegaConf.to_container(OmegaConf.create(loaded.net_config), resolve=True),
    }
    with atomic_files() as files:  # the three files together, or none of them
        files.open(hyp_path, "w").writelines(line + "\n" for line in output.plain)
        files.open(tok_path, "w").writelines(line + "\n" for line in output.tokenized)
        text = json.dumps(record, indent=1, ensure_ascii=False) + "\n"
        files.open(out / f"eval.{cfg.split}.json", "w").write(text)
    return record


def summary(record: dict[str, Any]) -> str:
    """The lines printed at the end."""
    return "\n".join(
        [
            f"{record['data']}/{record['split']}: {record['sentences']} sentences, {record['decoding']}",
            f"BLEU (13a, detokenised) = {record['bleu']['score']:.2f}  ({record['bleu']['signature']})",
            f"BLEU (tokenised) = {record['bleu_tokenized']['score']:.2f}, lowercased = "
            f"{record['bleu_tokenized_lc']['score']:.2f}",
            f"chrF = {record['chrf']['score']:.2f}  ({record['chrf']['signature']})",
            f"hypotheses: {record['hypotheses']}",
        ]
    )


@hydra_main("evaluate")
def main(cfg: DictConfig) -> None:
    with reported():
        print(summary(evaluate(cfg)), flush=True)

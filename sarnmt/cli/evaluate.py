"""Evaluate a checkpoint on a corpus split: ``python -m sarnmt evaluate ckpt_path=model.ckpt data=multi30k_en_de
split=test [decoding=beam decoding.beam_size=12]``.

Decodes the raw source lines of the split with the checkpoint's codecs and model (the same search objects as
training's final test and ``translate``), then writes to ``output_dir``:

- ``hypotheses.<split>.txt``: the plain (detokenised, detruecased) translations, one per line;
- ``hypotheses.<split>.tok.txt``: their tokenised form (the target codec's ``decode_tokenized``);
- ``eval.<split>.json``: ``bleu`` (sacrebleu 13a on plain text against the raw references: NIST mteval-v13a
  style, Table 3), ``bleu_tokenized`` and ``bleu_tokenized_lc`` (``tokenize=none`` on the codec's tokenised
  hypotheses and references: multi-bleu.perl and its ``-lc``, Tables 1, 2, 4), ``chrf``, each with its signature,
  plus the decoding settings, checkpoint, parameter count, sentence count and speed, the lines truncated to
  ``max_input_tokens`` (:mod:`sarnmt.decoding.input_limit`) and ``capture``: whether the search's steps were
  replayed from captured graphs, and if not why (:func:`sarnmt.decoding.captured.capture_record`: a failed capture
  shows here, not only as a warning and no speed-up).

The three files are written together and atomically (temporary names, flushed, renamed once all are complete): an
interrupted or failed evaluation leaves the previous files or none, never a half-written one or a mix of old and new.
``output_dir``, the batch size, the decoding settings and the device are checked before anything is decoded; an empty
split is refused, naming it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate, to_absolute_path
from omegaconf import DictConfig, OmegaConf

from sarnmt.checkpoints.reading import LoadedModel, load_model
from sarnmt.checkpoints.stored_config import run_trust
from sarnmt.decoding.captured import capture_record
from sarnmt.decoding.input_limit import InputLimit
from sarnmt.decoding.search import Search, build_search
from sarnmt.decoding.split_translation import SplitOutput, translate_split
from sarnmt.errors import InputError, check_flag, check_range, reported
from sarnmt.kernels.choice import check_choice
from sarnmt.utils.allocator import keep_freed_memory
from sarnmt.utils.atomic import atomic_files, check_folder
from sarnmt.utils.compose import hydra_main
from sarnmt.utils.device import pick_device
from sarnmt.utils.precision import check_native_bf16, check_precision
from sarnmt.utils.threads import apply_threads

log = logging.getLogger("sarnmt")


def evaluate(cfg: DictConfig) -> dict[str, Any]:
    """:returns: the JSON record (also written to ``output_dir/eval.<split>.json``).

    :raises InputError: for a setting out of range or an ``output_dir`` that cannot be a folder, before decoding."""
    search, device = check_settings(cfg)
    loaded = load_model(to_absolute_path(cfg.ckpt_path), device, cfg.kernels, run_trust(cfg))
    datamodule = instantiate(cfg.data)
    datamodule.prepare_data()
    datamodule.setup("test")
    output, limit = decode_split(cfg, loaded, datamodule, search, device)
    record = eval_record(cfg, loaded, datamodule.name, search, device, output, limit)
    write_outputs(Path(cfg.output_dir), cfg.split, output, record)
    return record


def check_settings(cfg: DictConfig) -> tuple[Search, torch.device]:
    """The settings checked before the checkpoint is read: precision, kernels, batch size, ``output_dir``, the search
    (returned) and the device (returned; on CPU freed memory kept, ``keep_freed_memory``)."""
    check_precision(cfg.precision)
    check_choice(cfg.kernels)
    check_range("batch_size", cfg.batch_size, 1, whole=True)
    for key in ("truncate_long_input", "progress"):
        check_flag(key, cfg[key])
    apply_threads(cfg.get("threads"))
    check_folder(cfg.output_dir, "output_dir")
    search = build_search(cfg.decoding, max_source_tokens=cfg.max_input_tokens)
    device = pick_device(cfg.device)
    check_native_bf16(device, cfg.precision)
    if cfg.keep_freed_memory and device.type == "cpu":
        keep_freed_memory()
    return search, device


def decode_split(
    cfg: DictConfig, loaded: LoadedModel, datamodule, search: Search, device: torch.device
) -> tuple[SplitOutput, InputLimit]:
    """``cfg.split`` of the data translated by the checkpoint's codecs (the data's where it has none) and model, and
    the input limit that cut its long lines.  :raises InputError: for an empty split, naming it."""
    sources, references = datamodule.sources(cfg.split), datamodule.references(cfg.split)
    if not sources:
        raise InputError(
            f"{datamodule.name}/{cfg.split} has no sentences, so there is nothing to evaluate "
            f"(read from {datamodule.origin(cfg.split)})"
        )
    limit = InputLimit(cfg.max_input_tokens, cfg.truncate_long_input, f"{datamodule.name}/{cfg.split}")
    ckpt_path, count = to_absolute_path(cfg.ckpt_path), len(sources)
    log.info("evaluating %s on %s/%s (%d sentences) with %s", ckpt_path, datamodule.name, cfg.split, count, search)
    codecs = (loaded.src_codec or datamodule.src_codec, loaded.tgt_codec or datamodule.tgt_codec)
    output = translate_split(
        loaded.net,
        *codecs,
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
    return output, limit


def eval_record(
    cfg: DictConfig,
    loaded: LoadedModel,
    data: str,
    search: Search,
    device: torch.device,
    output: SplitOutput,
    limit: InputLimit,
) -> dict[str, Any]:
    """The record of ``eval.<split>.json`` (its keys in the module docstring)."""
    record = {
        "checkpoint": to_absolute_path(cfg.ckpt_path),
        "trust_targets": list(run_trust(cfg)),
        "global_step": loaded.global_step,
        "parameters": loaded.parameters,
        "data": data,
        "split": cfg.split,
        "sentences": len(output.plain),
        "decoding": search.settings(),
        "precision": cfg.precision,
        "device": str(device),
        "capture": capture_record(loaded.net, device),
    }
    record.update(results(cfg, output, limit))
    record["model"] = OmegaConf.to_container(OmegaConf.create(loaded.net_config), resolve=True)
    return record


def results(cfg: DictConfig, output: SplitOutput, limit: InputLimit) -> dict[str, Any]:
    """The record's speed, scores, truncated lines and hypothesis files."""
    scores, seconds = output.scores(), output.seconds
    plain, tokenized = hypothesis_paths(Path(cfg.output_dir), cfg.split)
    return {
        "seconds": round(seconds, 3),
        "sentences_per_second": round(len(output.plain) / seconds, 2) if seconds > 0 else None,
        "bleu": scores["bleu"].as_dict(),
        "bleu_tokenized": scores["bleu_tok"].as_dict(),
        "bleu_tokenized_lc": scores["bleu_tok_lc"].as_dict(),
        "chrf": scores["chrf"].as_dict(),
        "max_input_tokens": limit.max_tokens,
        "truncated_lines": limit.truncated,
        "hypotheses": str(plain),
        "hypotheses_tokenized": str(tokenized),
    }


def hypothesis_paths(out: Path, split: str) -> tuple[Path, Path]:
    """Where the plain and the tokenised hypotheses of ``split`` are written in the folder ``out``."""
    return out / f"hypotheses.{split}.txt", out / f"hypotheses.{split}.tok.txt"


def write_outputs(out: Path, split: str, output: SplitOutput, record: dict[str, Any]) -> None:
    """The hypotheses (plain and tokenised) and the record, written together, or none of them."""
    plain, tokenized = hypothesis_paths(out, split)
    with atomic_files() as files:
        files.open(plain, "w").writelines(line + "\n" for line in output.plain)
        files.open(tokenized, "w").writelines(line + "\n" for line in output.tokenized)
        text = json.dumps(record, indent=1, ensure_ascii=False) + "\n"
        files.open(out / f"eval.{split}.json", "w").write(text)


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

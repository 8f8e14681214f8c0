"""The evaluation of a language model's job (Table 6): the selected checkpoint (lowest valid perplexity) scored on
every test split of its corpus, every word once, and the per-line statistics the significance tests need.

A line's statistics are its words' summed NLL and its word count (``<eos>`` included); perplexity is exp(Σ NLL / Σ
words) over the split (:class:`sarnmt.sweep.stats.Perplexity`). Words outside the vocabulary are ``<unk>`` and
counted; the record says how many.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from tqdm.auto import tqdm

from sarnmt.checkpoints.reading import CheckpointError, load_language_model
from sarnmt.checkpoints.stored_config import run_trust
from sarnmt.data.text.codecs import EOS
from sarnmt.sweep.plan import Job
from sarnmt.sweep.publish import publish_record
from sarnmt.sweep.stats import corpus_score
from sarnmt.utils.device import pick_device


@torch.inference_mode()
def line_statistics(net, datamodule, split: str, device: torch.device, progress: bool = False) -> np.ndarray:
    """Per line of ``split``: ``[summed NLL, words]``, float64 array (lines, 2), the lines in corpus order.

    The evaluation loader's columns are contiguous pieces of the stream; their mask-True targets, column by column,
    are the split's words in order, each once (:mod:`sarnmt.lm.datamodule`)."""
    nlls, masks, targets, state = [], [], [], None
    for batch in tqdm(datamodule.eval_dataloader(split), desc=f"perplexity {split}", disable=not progress):
        batch = batch.to(device)
        nll, state = net.nll(batch.inputs, batch.targets, batch.mask, None if batch.first else state)
        nlls.append(nll.double().cpu())
        masks.append(batch.mask.cpu())
        targets.append(batch.targets.cpu())
    mask = torch.cat(masks, dim=1).flatten()
    nll = torch.cat(nlls, dim=1).flatten()[mask].numpy()
    words = torch.cat(targets, dim=1).flatten()[mask].numpy()
    expected = datamodule.stream(split)
    if not np.array_equal(words, expected):
        raise RuntimeError(f"the {split} loader's targets are not the split's stream ({len(words)} vs {len(expected)})")
    line = np.concatenate([[0], np.cumsum(words[:-1] == EOS)])  # the line of each word: a line ends with <eos>
    return np.stack([np.bincount(line, weights=nll), np.bincount(line).astype(np.float64)], axis=1)


def finish_lm_job(
    job: Job, cfg: DictConfig, digest: str, fit: dict[str, Any], loggers: list, settings, code: dict[str, Any]
) -> dict[str, Any]:
    """Score the selected checkpoint on every test split, write the statistics, log the scores, write the record
    (``code``: the code that ran, :func:`sarnmt.sweep.code.code_identity`)."""
    start = time.perf_counter()
    device = pick_device(settings.device)
    net, vocab = load_language_model(fit["best_model_path"], device, trust=run_trust(cfg))  # what cfg names
    datamodule = instantiate(cfg.data)
    datamodule.prepare_data()
    datamodule.setup("test")
    if vocab is not None and list(vocab) != list(datamodule.vocab):
        raise CheckpointError(
            f"checkpoint {fit['best_model_path']} was trained with another vocabulary than "
            f"the corpus {cfg.data.get('corpus')} now gives"
        )
    counts = datamodule.report.get("splits", {})
    tests, stats = {}, {}
    for name, split in job.tests.items():
        began = time.perf_counter()
        lines = line_statistics(net, datamodule, split, device, settings.progress)
        nll, words = lines.sum(axis=0)
        tests[name] = {
            "split": split,
            "lines": len(lines),
            "words": int(words),
            "unknown_words": counts.get(split, {}).get("unk_oov"),
            "seconds": round(time.perf_counter() - began, 1),
            "scores": {"ppl": {"score": corpus_score(lines, "ppl"), "nll_per_word": float(nll / words)}},
        }
        stats[name] = {"ppl": lines.tolist()}
    seconds = round(time.perf_counter() - start, 1)
    name = f"lm-{cfg.data.get('corpus')}"
    path = settings.record_path(job)
    return publish_record(job, cfg, digest, fit, loggers, path, name, tests, stats, seconds, {}, code)

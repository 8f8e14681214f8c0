"""Train a model: ``python -m sarnmt.train [data=...] [model=...] [decoder=...] [key=value ...]``.

:func:`sarnmt.training.run.train` fits and tests, a pure function of the composed config (the sweep and the tests
call it directly); :func:`main` is the Hydra entry, which runs it and prints its :func:`report`.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from sarnmt.errors import reported
from sarnmt.training.run import train
from sarnmt.utils.compose import hydra_main


def report(result: dict[str, Any]) -> str:
    """The lines printed at the end of a run."""
    lines = []
    if result.get("test_bleu") is not None:
        lines.append(f"test BLEU = {result['test_bleu']:.2f}  ({result['bleu_signature']})")
    if result.get("val/bleu") is not None:
        lines.append(f"last val BLEU = {result['val/bleu']:.2f}")
    lines.append(f"best checkpoint: {result['best_model_path'] or '(none saved)'}")
    if result.get("test_average/bleu") is not None:
        lines.append(
            f"test BLEU of the averaged checkpoint = {result['test_average/bleu']:.2f}  "
            f"({result['average_model_path']})"
        )
    return "\n".join(lines)


@hydra_main("train")
def main(cfg: DictConfig) -> float | None:
    with reported():  # bad input, a model= / decoder= pair that does not go together, a stop: one line, no traceback
        result = train(cfg)
    print(report(result), flush=True)
    return result.get("val/bleu")

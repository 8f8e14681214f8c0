"""Train a word-level language model (Table 6): ``python -m sarnmt lm [lm_model=...] [lm_data=...] [key=value ...]``.

:func:`sarnmt.lm.run.train_lm` is a pure function of the composed config (tests and the table sweep call it);
:func:`main` is the Hydra entry, which runs it and prints its :func:`report`. The run ends with the test perplexity
of the selected checkpoint (lowest valid perplexity), every test word counted once.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from sarnmt.errors import reported
from sarnmt.lm.run import train_lm
from sarnmt.utils.compose import hydra_main


def report(result: dict[str, Any]) -> str:
    """The lines printed at the end of a run."""
    lines = []
    if result.get("test/ppl") is not None:
        unknown = (result.get("report") or {}).get("splits", {}).get("test", {}).get("unk_oov")
        note = f", {unknown:,} of them <unk>" if unknown is not None else ""
        lines.append(f"test perplexity = {result['test/ppl']:.2f}  ({int(result['test/words']):,} words{note})")
    if result.get("val/ppl") is not None:
        lines.append(f"last valid perplexity = {result['val/ppl']:.2f}")
    lines.append(f"best checkpoint: {result['best_model_path'] or '(none saved)'}")
    return "\n".join(lines)


@hydra_main("lm")
def main(cfg: DictConfig) -> float | None:
    with reported():
        result = train_lm(cfg)
    print(report(result), flush=True)
    return result.get("val/ppl")

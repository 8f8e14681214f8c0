"""``sarnmt bench-lm [scale=mini|paper|smoke] [threads=N] [steps=K] [warmup=K] [repeats=R]``: training speed of
Table 6's language models (:func:`sarnmt.bench.lm.bench_lm`), its Markdown table printed."""

from __future__ import annotations

from omegaconf import DictConfig

from sarnmt.bench.lm import bench_lm
from sarnmt.errors import reported
from sarnmt.utils.compose import hydra_main


@hydra_main("bench_lm")
def main(cfg: DictConfig) -> None:
    with reported():
        print(bench_lm(cfg.scale, cfg.threads, cfg.steps, cfg.warmup, cfg.repeats), flush=True)

"""The steps of ``benchmarks/gpu_check.py`` that need torch and sarnmt, each run by it in its own process:

    python benchmarks/gpu_steps.py env RECORD.json
    python benchmarks/gpu_steps.py train RECORD.json WORKDIR SECONDS [override ...]

``env``: the machine (``nvidia-smi``, the devices, Python, torch, CUDA, cuDNN, Triton and the packages' versions,
which of sarnmt's imports work, a large bf16 matrix product's rate on the GPU). ``train``: ``sarnmt.train``'s main
job (the self-attentive residual decoder on the toy corpus) with the overrides given (``trainer=gpu`` for the
check), at most SECONDS of training, run through :func:`sarnmt.training.run.train` with a callback that times every
training batch: target tokens/s (after the first batches, which compile), steps, epochs, dev BLEU after each
validation, test BLEU, peak GPU memory. Each writes its JSON record to RECORD.json.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import lightning as L
import torch

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = [
    "torch",
    "triton",
    "lightning",
    "pytorch-lightning",
    "torchmetrics",
    "sacrebleu",
    "tokenizers",
    "numpy",
    "hydra-core",
    "omegaconf",
    "antlr4-python3-runtime",
    "sacremoses",
    "PyYAML",
    "pytest",
]
IMPORTS = ["hydra", "omegaconf", "sacremoses", "sarnmt.training.run", "sarnmt.cli.bench"]
WARM_BATCHES = 20  # training batches left out of the steady rate (compilation, cuDNN's and the allocator's warm-up)


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _nvidia_smi() -> dict[str, Any]:
    out: dict[str, Any] = {}
    query = "name,driver_version,memory.total,power.limit,clocks.max.sm,pci.bus_id"
    for key, args in {"query": [f"--query-gpu={query}", "--format=csv"], "text": []}.items():
        try:
            done = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=30)
            out[key] = (done.stdout + done.stderr).strip()
        except (OSError, subprocess.TimeoutExpired) as err:
            out[key] = f"{type(err).__name__}: {err}"
    return out


def _matmul_tflops(device: torch.device) -> float:
    """bf16 TFLOP/s of a 8192³ matrix product (median of 10): what the device gives large products."""
    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    times = []
    for _ in range(10):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        end.record()
        torch.cuda.synchronize(device)
        times.append(start.elapsed_time(end) / 1e3)
    return 2 * 8192**3 / sorted(times)[len(times) // 2] / 1e12


def env() -> dict[str, Any]:
    info: dict[str, Any] = {
        "python": sys.version,
        "executable": sys.executable,
        "platform": platform.platform(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "cuda_available": torch.cuda.is_available(),
        "packages": {name: _version(name) for name in PACKAGES},
        "nvidia_smi": _nvidia_smi(),
    }
    imports = {}
    for module in IMPORTS:
        try:
            importlib.import_module(module)
            imports[module] = "ok"
        except Exception as err:  # noqa: BLE001 - recorded: which import fails, and why
            imports[module] = f"{type(err).__name__}: {err}"
    info["imports"] = imports
    if torch.cuda.is_available():
        device = torch.device("cuda")
        info["devices"] = [
            {
                "name": props.name,
                "capability": f"{props.major}.{props.minor}",
                "memory_gib": round(props.total_memory / 2**30, 1),
                "multiprocessors": props.multi_processor_count,
            }
            for props in map(torch.cuda.get_device_properties, range(torch.cuda.device_count()))
        ]
        info["bf16_native"] = torch.cuda.is_bf16_supported(including_emulation=False)
        info["matmul_bf16_tflops"] = _matmul_tflops(device)
    return info


class TokenRate(L.Callback):
    """Times every training batch (synchronised with the device) and keeps each validation's metrics."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, float]] = []  # (target tokens, seconds)
        self.validations: list[dict[str, float]] = []
        self._start = 0.0

    @staticmethod
    def _sync(module: L.LightningModule) -> None:
        if module.device.type == "cuda":
            torch.cuda.synchronize(module.device)

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        self._sync(module)
        self._start = time.perf_counter()

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        self._sync(module)
        self.batches.append((int(batch.tgt_mask.sum()), time.perf_counter() - self._start))

    def on_validation_end(self, trainer, module) -> None:
        if not trainer.sanity_checking:
            metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
            self.validations.append({"step": trainer.global_step, "epoch": trainer.current_epoch, **metrics})


def train(workdir: str, seconds: float, overrides: list[str]) -> dict[str, Any]:
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf, open_dict

    from sarnmt.training import run as train_module
    from sarnmt.training.optim import adadelta_update
    from sarnmt.utils.compose import config_dir

    minutes, secs = divmod(int(seconds), 60)
    overrides = [f"trainer.max_time=00:00:{minutes:02d}:{secs:02d}", *overrides]
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = compose(config_name="train", overrides=overrides)
    with open_dict(cfg):
        cfg.paths.output_dir = workdir
        cfg.callbacks.token_rate = {"_target_": f"{__name__}.TokenRate"}  # this script's module: __main__
    found: dict[str, Any] = {}

    def after(trainer, result) -> dict[str, Any]:
        found["trainer"] = trainer
        return {}

    cuda = torch.cuda.is_available() and cfg.trainer.accelerator in ("gpu", "cuda", "auto")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    result = train_module.train(cfg, after=after)
    wall = time.perf_counter() - start
    trainer = found["trainer"]
    rate = next(cb for cb in trainer.callbacks if isinstance(cb, TokenRate))
    steady = rate.batches[WARM_BATCHES:] or rate.batches
    tokens = sum(t for t, _ in rate.batches)
    record: dict[str, Any] = {
        "overrides": overrides,
        "model": OmegaConf.to_container(cfg.model, resolve=True),
        "decoder": OmegaConf.to_container(cfg.decoder, resolve=True),
        "optimizer": type(trainer.optimizers[0]).__module__ + "." + type(trainer.optimizers[0]).__name__,
        # sarnmt's Adadelta: False when torch.compile failed and the eager update ran (its warning is in the log)
        "optimizer_compiled": getattr(trainer.optimizers[0], "_update", None) not in (None, adadelta_update),
        "precision": str(cfg.trainer.precision),
        "accelerator": str(cfg.trainer.accelerator),
        "device": torch.cuda.get_device_name() if cuda else platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "lightning": _version("lightning"),
        "max_tokens": cfg.data.get("max_tokens"),
        "steps": trainer.global_step,
        "epochs": trainer.current_epoch,
        "batches_timed": len(rate.batches),
        "target_tokens": tokens,
        "batch_seconds": sum(s for _, s in rate.batches),
        "target_tok_s": tokens / max(sum(s for _, s in rate.batches), 1e-9),
        "steady_target_tok_s": sum(t for t, _ in steady) / max(sum(s for _, s in steady), 1e-9),
        "steady_from_batch": WARM_BATCHES if len(rate.batches) > WARM_BATCHES else 0,
        "wall_seconds": wall,
        "validations": rate.validations,
        "result": {k: v for k, v in result.items() if isinstance(v, int | float | str) or v is None},
    }
    if cuda:
        record["peak_mib"] = torch.cuda.max_memory_allocated() / 2**20
    return record


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "env":
        record = env()
    elif len(argv) >= 4 and argv[0] == "train":
        record = train(argv[2], float(argv[3]), argv[4:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    Path(argv[1]).write_text(json.dumps(record, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""One training update of a peer timed and profiled in the peer's own venv (``<venv>/bin/python profile_update.py
SPEC OUT``); :mod:`benchmarks.peers.quality.profile` runs it and reads ``OUT``. It imports only the standard library
and torch at the top (and the tool inside its builder), so that any venv with torch can run it as a file.

``SPEC`` (JSON): ``tool`` (``joeynmt`` or ``fairseq``), ``config`` (the harness's configuration of the tool:
:meth:`benchmarks.peers.quality.systems.JoeyNMT.config`'s dict, or fairseq-train's argument list), ``data`` (the
exported text), ``indices`` (the 0-based lines of the training text that form the batch), ``repeats``, ``seed`` and
``work`` (a scratch folder). Each builder makes the model, the loss, the clipping and the optimizer the way the tool's
training does, and the batch of ``indices`` through the tool's own vocabulary and collation; :func:`measure` then
times the update's four phases (:data:`PHASES`) and profiles it. The sarnmt column uses :func:`measure` in-process.

An update is the tool's, outside its training loop (no logging, checkpointing or scheduling around it):

- JoeyNMT (``TrainManager._train_step`` and its loop): forward = ``model.zero_grad()``, ``batch.sort_by_src_length()``,
  ``model(return_type="loss", ...)`` (the summed cross entropy) divided by the sentences (``normalization: batch``);
  backward; clipping = ``clip_grad_norm_`` at 1.0; optimizer = ``torch.optim.Adam``'s step.
- fairseq (``Trainer.train_step``): forward = ``optimizer.zero_grad()``, the criterion (summed cross entropy, the
  sample size its target tokens); backward; clipping = ``multiply_grads(1 / sample_size)`` (the per-token
  normalisation fairseq applies to the gradients) and its ``clip_grad_norm`` at 1.0; optimizer = fairseq's own Adam
  (``fairseq.optim.adam``, a Python loop over the parameters on a CPU).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

PHASES = ("forward", "backward", "clipping", "optimizer")
# a phase reads and writes the update's state (the loss, the sample size) through a dict
Phase = Callable[[dict[str, Any]], None]


def measure(update: dict[str, Phase], repeats: int, warmup: int = 1) -> dict[str, Any]:
    """Time and profile ``update`` (a phase name of :data:`PHASES` -> its function), on the threads already set.

    - ``phases_ms``: the median over ``repeats`` updates of each phase's CPU time (the calling thread's: with one
      intra-op thread every operator, the backward's included, runs on it), no profiler running; ``update_ms`` the
      median of their sums; ``phases_wall_ms`` and ``update_wall_ms`` the same in wall time, which on a shared
      machine also counts the time the thread waited for a core;
    - ``flops``: the floating-point operations ``torch.utils.flop_counter.FlopCounterMode`` counts in one update
      (the matrix products of forward and backward: 2·m·n·k each);
    - ``ops``: {ATen operator: [self milliseconds, calls]} per update, over ``repeats`` updates under
      ``torch.profiler`` (CPU activities), with ``profiled_ms`` and ``profiled_cpu_ms``, the wall and CPU time per
      update of that pass.

    The parameters change with every update (each is a real Adam step); the timings do not depend on their values."""

    def run() -> list[tuple[float, float]]:
        state: dict[str, Any] = {}
        marks = [(time.thread_time(), time.perf_counter())]
        for name in PHASES:
            update[name](state)
            marks.append((time.thread_time(), time.perf_counter()))
        return [(b[0] - a[0], b[1] - a[1]) for a, b in zip(marks, marks[1:], strict=False)]

    for _ in range(warmup):
        run()
    samples = [run() for _ in range(repeats)]
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        run()
    from torch.profiler import ProfilerActivity, profile

    cpu, wall = time.thread_time(), time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(repeats):
            run()
    cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    ops: dict[str, list[float]] = {}
    for event in prof.key_averages():
        if event.key.startswith("aten::"):
            ops[event.key] = [event.self_cpu_time_total / 1e3 / repeats, event.count / repeats]

    def medians(clock: int) -> tuple[dict[str, float], float]:
        phases = {name: 1e3 * statistics.median(s[k][clock] for s in samples) for k, name in enumerate(PHASES)}
        return phases, 1e3 * statistics.median(sum(p[clock] for p in s) for s in samples)

    (phases_cpu, update_cpu), (phases_wall, update_wall) = medians(0), medians(1)
    return {
        "phases_ms": phases_cpu,
        "update_ms": update_cpu,
        "phases_wall_ms": phases_wall,
        "update_wall_ms": update_wall,
        "flops": int(counter.get_total_flops()),
        "ops": ops,
        "profiled_ms": 1e3 * wall / repeats,
        "profiled_cpu_ms": 1e3 * cpu / repeats,
        "repeats": repeats,
    }


def parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def read_lines(path: Path, indices: list[int]) -> list[str]:
    wanted, lines = set(indices), {}
    with open(path, encoding="utf-8") as f:
        for k, line in enumerate(f):
            if k in wanted:
                lines[k] = line.rstrip("\n")
    return [lines[i] for i in indices]


# -------------------------------------------------------------------------------------------------------- JoeyNMT


def joeynmt_update(spec: dict[str, Any]) -> tuple[dict[str, Phase], dict[str, Any]]:
    """The update of JoeyNMT 2.3.0 as ``joeynmt train`` configures it (``parse_global_args``, ``load_data``: the
    vocabularies built from the training text, ``build_model``, its loss function, ``build_gradient_clipper``,
    ``build_optimizer``) on the training pairs ``indices`` collated by its dataset."""
    from joeynmt.builders import build_gradient_clipper, build_optimizer
    from joeynmt.config import parse_global_args
    from joeynmt.data import load_data
    from joeynmt.model import build_model

    cfg = json.loads(json.dumps(spec["config"]))
    cfg["model_dir"] = str(Path(spec["work"]) / "joeynmt-model")
    args = parse_global_args(cfg, rank=0, mode="train")
    src_vocab, trg_vocab, train_data, _, _ = load_data(cfg=args.data, datasets=["train"])
    torch.manual_seed(spec["seed"])
    model = build_model(args.model, src_vocab=src_vocab, trg_vocab=trg_vocab)
    model.loss_function = (args.train.loss, args.train.label_smoothing)
    clip = build_gradient_clipper(cfg=args.train._asdict())
    optimizer = build_optimizer(cfg=args.train._asdict(), parameters=model.parameters())
    batch = train_data.collate_fn(
        [train_data[i] for i in spec["indices"]], pad_index=model.pad_index, eos_index=model.eos_index
    )
    model.train()

    def forward(state: dict[str, Any]) -> None:
        model.zero_grad()
        batch.sort_by_src_length()
        loss, _, _, _ = model(return_type="loss", **vars(batch))
        state["loss"] = batch.normalize(loss, normalization=args.train.normalization, n_gpu=0, n_accumulation=1)

    info = {
        "parameters": parameters(model),
        "vocab": {"src": len(src_vocab), "tgt": len(trg_vocab)},
        "src_tokens": int(batch.src_length.sum()),
        "tgt_tokens": int(batch.ntokens),
        "sentences": int(batch.nseqs),
    }
    return {
        "forward": forward,
        "backward": lambda state: state["loss"].backward(),
        "clipping": lambda state: clip(parameters=model.parameters()),
        "optimizer": lambda state: optimizer.step(),
    }, info


# -------------------------------------------------------------------------------------------------------- fairseq


def fairseq_update(spec: dict[str, Any]) -> tuple[dict[str, Phase], dict[str, Any]]:
    """The update of fairseq 0.12.2 as ``fairseq-train`` configures it (its training parser on the harness's
    arguments, ``setup_task``, ``build_model``, ``build_criterion``, ``build_optimizer``). The dictionaries are
    fairseq-preprocess's (``build_dictionary`` over the training text, every piece, padded to a multiple of 8), read
    from the binarised folder where it exists, else built into ``work``; the sample is the translation task's
    (``LanguagePairDataset``'s collater: sources left-padded, targets shifted)."""
    from fairseq import optim, options, tasks
    from fairseq.data import LanguagePairDataset
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.tasks.translation import TranslationTask

    data = Path(spec["data"])
    binarised = data / "fairseq-bin"
    if (binarised / "done").is_file():
        folder = binarised
    else:
        folder = Path(spec["work"]) / "fairseq-dict"
        folder.mkdir(parents=True, exist_ok=True)
        for lang in ("en", "de"):
            built = TranslationTask.build_dictionary(
                [str(data / f"train.bpe.{lang}")], workers=1, threshold=0, nwords=-1, padding_factor=8
            )
            built.save(str(folder / f"dict.{lang}.txt"))
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [str(folder), *spec["config"], "--source-lang=en", "--target-lang=de"])
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    torch.manual_seed(spec["seed"])
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = optim.build_optimizer(cfg.optimizer, params)
    src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
    encode = lambda d, line: d.encode_line(line, add_if_not_exist=False, append_eos=True).long()  # noqa: E731
    src = [encode(src_dict, line) for line in read_lines(data / "train.bpe.en", spec["indices"])]
    tgt = [encode(tgt_dict, line) for line in read_lines(data / "train.bpe.de", spec["indices"])]
    dataset = LanguagePairDataset(
        src,
        [len(s) for s in src],
        src_dict,
        tgt,
        [len(t) for t in tgt],
        tgt_dict,
        left_pad_source=cfg.task.left_pad_source,
        left_pad_target=cfg.task.left_pad_target,
    )
    sample = dataset.collater([dataset[i] for i in range(len(src))])
    model.train()
    criterion.train()
    clip_norm = cfg.optimization.clip_norm

    def forward(state: dict[str, Any]) -> None:
        optimizer.zero_grad()
        state["loss"], state["sample_size"], _ = criterion(model, sample)

    def clipping(state: dict[str, Any]) -> None:
        optimizer.multiply_grads(1.0 / (state["sample_size"] or 1.0))
        optimizer.clip_grad_norm(clip_norm)

    unknown = sum(int((s == src_dict.unk()).sum()) for s in src) + sum(int((t == tgt_dict.unk()).sum()) for t in tgt)
    info = {
        "parameters": parameters(model),
        "vocab": {"src": len(src_dict), "tgt": len(tgt_dict)},
        "src_tokens": sum(len(s) for s in src),
        "tgt_tokens": int(sample["ntokens"]),
        "sentences": int(sample["nsentences"]),
        "unknown_tokens": unknown,
        "optimizer": type(optimizer._optimizer).__module__ + "." + type(optimizer._optimizer).__name__,
    }
    return {
        "forward": forward,
        "backward": lambda state: optimizer.backward(state["loss"]),
        "clipping": clipping,
        "optimizer": lambda state: optimizer.step(),
    }, info


BUILDERS = {"joeynmt": joeynmt_update, "fairseq": fairseq_update}


def main(argv: list[str]) -> int:
    spec_path, out_path = (Path(a) for a in argv)
    spec = json.loads(spec_path.read_text())
    torch.set_num_threads(1)
    update, info = BUILDERS[spec["tool"]](spec)
    result = {
        **info,
        **measure(update, spec["repeats"]),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
    }
    out_path.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

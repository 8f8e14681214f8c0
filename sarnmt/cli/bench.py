"""``sarnmt bench [key=value ...]`` (``python -m sarnmt bench``): the speed benchmark (see :mod:`sarnmt.bench.run`).

Not a Hydra application: each system it times is a composition of its own (the ``train`` config with that decoder or
model), and one benchmark run is one process timing them all, not a job per config; ``sarnmt/conf/bench.yaml`` is
composed by Hydra (overrides as for every command: :func:`sarnmt.bench.compose.compose_bench`) and errors are
reported as every command's (:func:`sarnmt.errors.reported`: one ``error:`` line, exit status 2)."""

from __future__ import annotations

import time
from pathlib import Path

from sarnmt.bench.compose import compose_bench
from sarnmt.bench.report import markdown, write
from sarnmt.bench.run import bench
from sarnmt.errors import InputError, UserError, reported
from sarnmt.utils.compose import check_user_configs, group_options
from sarnmt.utils.runtime import quiet_known_warnings

USAGE = """usage: {prog} [key=value ...]        (sarnmt/conf/bench.yaml has every option)

Times every decoder variant in one process, on each workload (a set of sentence lengths): training target tokens/s
(forward, loss, backward, clipping, optimizer step), matrix-product FLOPs and activation memory, and greedy / beam
decoding sentences/s, for sarnmt and for the peers the config names (peers.<name>._target_), on the same batches and
weights. The package has no peer; from a checkout, `make bench` adds the model as a competent PyTorch user writes it
(benchmarks/peers/plain.py) and `make bench-full` also a textbook implementation that recomputes everything at every
step (tests/oracle.py), through hydra.searchpath=[file://<checkout>/benchmarks/conf]. Prints a Markdown table per
workload with the targets checked, plots training tokens/s against sentence length and batch size, and writes
<out_dir>/bench-<time>.json, .md and .png.

  model=small|paper|tiny         model size (model=paper with vocab=50000 on a GPU)
  workloads=[multi30k,wmt]       which sentence lengths: multi30k (mean 12), wmt (news, up to 50, mean 21), peers
                                 (the fairseq side-by-side's corpus, 5-40, mean 17); synthetic when a corpus is absent
  decoders=[baseline,memory_rnn] which variants (default: all six)
  systems=[lstm_input_feeding_small]  other models, each with its own default decoder (default: the three LSTM
                                 systems at the small size; systems=[] for none); timed without the peers
  device=cpu|cuda|auto           threads=N           precision=fp32|bf16
  batch_size=64  train_batches=3  repeats=5          peers=quick|full|null (with the checkout's folder above)
  hydra.searchpath=[file://DIR]  configs of one's own: DIR/decoder/mine.yaml is decoders=[mine]
  plot=false                     skip the throughput-against-length plot
  profile=[baseline]             also attribute a training step's time (phases; matrix products and their rate,
                                 copies, reductions, elementwise work, framework overhead) for these systems
Decoders: {decoders}

Examples (python -m sarnmt bench is the same command):
  sarnmt bench workloads=[multi30k] decoders=[baseline,self_attentive_content] systems=[]
  sarnmt bench model=paper vocab=50000 device=cuda precision=bf16
"""


def main(argv: list[str], prog: str = "sarnmt bench") -> int:
    """``prog``: how the command was run, for its usage line."""
    if any(arg in ("-h", "--help") for arg in argv):
        print(USAGE.format(prog=prog, decoders=", ".join(group_options("decoder"))))
        return 0
    quiet_known_warnings()
    try:
        with reported():  # one error: line, exit status 2, as for every command
            try:
                check_user_configs(argv)
                cfg, systems = compose_bench(argv)
                record = bench(cfg, systems)
            except ValueError as err:  # compose_bench's refusals; ModelConfigError and InputError are UserErrors
                if isinstance(err, UserError):
                    raise
                raise InputError(str(err)) from err
    except SystemExit as exit_:
        return int(exit_.code)
    paths = write(record, Path(cfg.out_dir) / time.strftime("bench-%Y%m%d-%H%M%S"))
    print(markdown(record))
    print("\nwrote " + ", ".join(str(p) for p in paths))
    return 0

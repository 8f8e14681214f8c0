"""``sarnmt bench [key=value ...]`` (``python -m sarnmt bench``): the speed benchmark (see :mod:`sarnmt.bench.run`).

Not a Hydra application: each system it times is a composition of its own (the ``train`` config with that decoder or
model), and one benchmark run is one process timing them all, not a job per config; ``sarnmt/conf/bench.yaml`` is
composed by Hydra (overrides as for every command) and errors are reported as every command's
(:func:`sarnmt.errors.reported`: one ``error:`` line, exit status 2)."""

from __future__ import annotations

import time
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig

from sarnmt.bench.peer import Peer
from sarnmt.bench.report import markdown, write
from sarnmt.bench.run import System, bench
from sarnmt.errors import InputError, UserError, reported
from sarnmt.models.factory import check_model
from sarnmt.utils.compose import SEARCHPATH_KEYS, check_user_configs, config_dir, group_options
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


def peers_of(cfg: DictConfig, model: DictConfig, decoder: DictConfig) -> dict[str, Peer]:
    """The peers of ``cfg.peers`` that implement the system of ``model`` and ``decoder`` (:mod:`sarnmt.bench.peer`).

    :raises InputError: naming a peer whose ``_target_`` cannot be built (not importable: run from the checkout)."""
    peers = {}
    for name, node in cfg.peers.items():
        try:
            peer = instantiate(node, _partial_=True)(model=model, decoder=decoder)
        except InstantiationException as err:
            reason = str(err).strip().splitlines()[0].split(", set env var HYDRA_FULL_ERROR")[0].rstrip(".")
            raise InputError(
                f"bench: peers.{name}: {node.get('_target_')!r} cannot be built ({reason}); a checkout's peers "
                "import from its root: make bench there"
            ) from err
        if peer.implements:
            peers[name] = peer
    return peers


def compose_bench(overrides: list[str]) -> tuple[DictConfig, dict[str, System]]:
    """The bench config and what it times: each of ``decoders`` on ``model``, then each model of ``systems`` with its
    own default decoder; each with the peers that implement it. The config folders ``overrides`` add (``hydra.
    searchpath``) are searched for these too: a decoder of one's own is timed as the packaged ones are."""
    searchpath = [arg for arg in overrides if arg.startswith(SEARCHPATH_KEYS)]
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = compose(config_name="bench", overrides=overrides)
        decoders = group_options("decoder", overrides)
        unknown = [name for name in cfg.decoders if name not in decoders]
        if unknown:
            raise InputError(f"bench: unknown decoders {unknown}; choose from {decoders}")
        models = group_options("model", overrides)
        unknown = [name for name in cfg.profile if name not in [*cfg.decoders, *cfg.systems]]
        if unknown:
            raise ValueError(
                f"bench: profile names {unknown}, which are not timed; choose from decoders/systems "
                f"{[*cfg.decoders, *cfg.systems]}"
            )
        unknown = [name for name in cfg.workloads if name not in cfg.lengths]
        if unknown:
            raise ValueError(f"bench: unknown workloads {unknown}; choose from {list(cfg.lengths)}")
        unknown = [name for name in cfg.systems if name not in models]
        if unknown:
            raise ValueError(f"bench: unknown systems {unknown}; choose from the model= options {models}")
        pairs = {
            name: (cfg.model, compose(config_name="train", overrides=[*searchpath, f"decoder={name}"]).decoder)
            for name in cfg.decoders
        }
        for name in cfg.systems:
            composed = compose(config_name="train", overrides=[*searchpath, f"model={name}"])
            pairs[name] = (composed.model, composed.decoder)
    for model, decoder in pairs.values():
        check_model(model, decoder)
    systems = {name: System(model, decoder, peers_of(cfg, model, decoder)) for name, (model, decoder) in pairs.items()}
    return cfg, systems


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


if __name__ == "__main__":  # python -m sarnmt.bench: an alias of sarnmt bench
    from sarnmt.utils.hydra_app import run_as_module

    run_as_module("python -m sarnmt.bench", main, hydra=False)

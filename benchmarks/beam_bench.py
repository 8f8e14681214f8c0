"""Decoding speed: sentences per second for beam 1 and 5 at batch sizes 1 and 64 (CPU, and GPU when available).

    .venv/bin/python benchmarks/beam_bench.py [--sentences 64] [--single 16] [--vocab 8000] [--threads 1]
        [--devices cpu cuda]

A ``model=small``-sized model (e = 256, d = 512, self-attentive residual decoder) with random weights and V_src =
V_tgt = ``--vocab``. Random weights rarely emit EOS, so every hypothesis runs to the length limit
``max_len_a·|src| + max_len_b`` (the same work per sentence at every batch size, which keeps the comparison fair).
Sources are random ids of 10 to 20 tokens. Prints a Markdown table and the batched-vs-single speed-up. Not a test.
"""

from __future__ import annotations

import argparse
import time

import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from sarnmt.data.batching import pad_sequences
from sarnmt.decoding.beam import BeamSearch
from sarnmt.decoding.greedy import GreedySearch
from sarnmt.decoding.penalties import LengthPenalty

MODEL = {"_target_": "sarnmt.models.seq2seq.Seq2Seq", "emb_dim": 256, "hidden_dim": 512, "init_std": 0.1}
DECODER = {"_target_": "sarnmt.models.variants.self_attentive_residual.SelfAttentiveResidual", "_partial_": True}


def build_model(vocab: int, device: torch.device) -> torch.nn.Module:
    torch.manual_seed(0)
    variant = instantiate(OmegaConf.create(DECODER))
    return instantiate(OmegaConf.create(MODEL), src_vocab_size=vocab, tgt_vocab_size=vocab, variant=variant).to(
        device
    ).eval()


def sentences_per_second(model, search, sources: list[list[int]], batch_size: int, device: torch.device) -> float:
    """Decode ``sources`` in batches of ``batch_size`` (after one warm-up batch)."""
    batches = [pad_sequences(sources[i : i + batch_size]) for i in range(0, len(sources), batch_size)]
    search(model, batches[0][0].to(device), batches[0][1].to(device))  # warm-up
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for src, mask in batches:
        search(model, src.to(device), mask.to(device))
    if device.type == "cuda":
        torch.cuda.synchronize()
    return len(sources) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=64, help="sentences decoded at batch size 64")
    parser.add_argument("--single", type=int, default=16, help="sentences decoded one at a time")
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--max-len-a", type=float, default=1.0)
    parser.add_argument("--max-len-b", type=int, default=5)
    parser.add_argument("--devices", nargs="*", default=None, help="default: cpu, and cuda when available")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads (on a shared machine use 1: busy OpenMP threads spin and stall)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    devices = args.devices or (["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])
    gen = torch.Generator().manual_seed(1)
    sources = [torch.randint(2, args.vocab, (int(n),), generator=gen).tolist()
               for n in torch.randint(10, 21, (args.sentences,), generator=gen)]  # fmt: skip
    rows, speedups = [], []
    for name in devices:
        device = torch.device(name)
        model = build_model(args.vocab, device)
        for beam in (1, 5):
            search = (GreedySearch(args.max_len_a, args.max_len_b) if beam == 1 else
                      BeamSearch(beam, LengthPenalty(), args.max_len_a, args.max_len_b))  # fmt: skip
            beam1 = BeamSearch(1, LengthPenalty(), args.max_len_a, args.max_len_b)
            for label, s in ((f"{beam} ({'greedy' if beam == 1 else 'beam'})", search),) + (
                (("1 (beam code)", beam1),) if beam == 1 else ()
            ):
                single = sentences_per_second(model, s, sources[: args.single], 1, device)
                batched = sentences_per_second(model, s, sources, 64, device)
                rows.append((name, label, single, batched))
                speedups.append((name, label, batched / single))
    print(f"model: e=256 d=512 V={args.vocab} self-attentive residual, random weights; "
          f"{args.sentences} sentences of 10-20 tokens; max length {args.max_len_a}·|src|+{args.max_len_b}; "
          f"torch threads {torch.get_num_threads()}\n")  # fmt: skip
    print("| device | beam | batch 1 (sent/s) | batch 64 (sent/s) | speed-up per sentence |")
    print("|---|---|---|---|---|")
    for (name, label, single, batched), (_, _, speedup) in zip(rows, speedups, strict=True):
        print(f"| {name} | {label} | {single:.1f} | {batched:.1f} | {speedup:.1f}× |")


if __name__ == "__main__":
    main()

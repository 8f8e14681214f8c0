"""sarnmt and its plain peer on a word-level parallel corpus, as fairseq trains and decodes it: the sarnmt side of the
side-by-side with fairseq (``benchmarks/peers/side_by_side.py``, docs/performance.md).

``benchmarks/peers/driver.py train --impl sarnmt|plain --data DIR --out RUN`` trains ``model`` (default
``model=small decoder=baseline``: e = 256, d = 512) with Adam on ``DIR/train.{src,tgt}`` and times steps
``warmup+1 .. warmup+steps``; ``decode --ckpt RUN/model.pt`` decodes ``DIR/test.src`` with beam search
(``--min-len N --max-len N+1``: every output N words and EOS, the same work as fairseq's at equal lengths). Each prints
one JSON line (sentences/s, tokens/s, peak RSS) that the side-by-side script collects.

The batches are fairseq's with ``--batch-size N`` and no token limit: the training pairs in a seeded random order,
stably sorted by target then source length, cut into batches of N sentences, the batch order shuffled each epoch.
Both implementations see the same batches in the same order (the same seed). The vocabulary is the N most frequent
words of each side (fairseq's ``--nwordssrc/--nwordstgt``), the rest UNK. ``--impl plain`` runs the plain peer
(``benchmarks/peers/plain.py``) on the same model (its loss over every padded position, its plain beam search) and
PyTorch's Adam; ``--impl sarnmt`` runs sarnmt's model, loss and search.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import time
from collections import Counter
from pathlib import Path

if __package__ in (None, ""):  # run as a script (side_by_side.py does): the checkout's root, for benchmarks.peers
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch

from benchmarks.peers.plain import plain_beam, plain_nll
from sarnmt.data.loading.batching import pad_sequences
from sarnmt.data.text.codecs import EOS, UNK
from sarnmt.data.text.reading import read_lines, read_parallel
from sarnmt.decoding.beam import beam_decode
from sarnmt.decoding.penalties import LengthPenalty
from sarnmt.models.factory import build_model, count_parameters
from sarnmt.utils.compose import compose


def build_vocab(lines: list[str], size: int) -> dict[str, int]:
    """The ``size`` − 2 most frequent words (ties by first appearance) -> ids 2.. (0 is EOS, 1 UNK)."""
    counts = Counter(word for line in lines for word in line.split())
    return {word: i + 2 for i, (word, _) in enumerate(counts.most_common(size - 2))}


def encode(line: str, vocab: dict[str, int]) -> list[int]:
    return [vocab.get(word, UNK) for word in line.split()]


def fairseq_batches(pairs: list[tuple[list[int], list[int]]], batch_size: int, seed: int) -> list[list[int]]:
    """Indices of ``pairs`` in batches as fairseq forms them for ``--batch-size`` (see the module docstring)."""
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    order.sort(key=lambda i: (len(pairs[i][1]), len(pairs[i][0])))
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def train(args: argparse.Namespace) -> dict:
    torch.manual_seed(args.seed)
    src_lines, tgt_lines = read_parallel(args.data / "train.src", args.data / "train.tgt")
    src_vocab, tgt_vocab = build_vocab(src_lines, args.vocab), build_vocab(tgt_lines, args.vocab)
    pairs = [(encode(s, src_vocab), encode(t, tgt_vocab)) for s, t in zip(src_lines, tgt_lines, strict=True)]
    cfg = compose("train", args.overrides)
    model = build_model(cfg.model, cfg.decoder, args.vocab, args.vocab).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    batches, epoch, position = fairseq_batches(pairs, args.batch_size, args.seed), 0, 0
    epoch_order = list(range(len(batches)))
    random.Random(args.seed).shuffle(epoch_order)
    sentences = tokens = 0
    start = time.perf_counter()
    for step in range(1, args.warmup + args.steps + 1):
        if position == len(batches):
            epoch, position = epoch + 1, 0
            random.Random(args.seed + epoch).shuffle(epoch_order)
        ids = batches[epoch_order[position]]
        position += 1
        src, src_mask = pad_sequences([pairs[i][0] for i in ids])
        tgt, tgt_mask = pad_sequences([pairs[i][1] for i in ids])
        if step == args.warmup + 1:
            sentences = tokens = 0
            start = time.perf_counter()
        if args.impl == "plain":
            nll = plain_nll(model, src, src_mask, tgt, tgt_mask)
        else:
            nll = model.nll(src, src_mask, tgt, tgt_mask)
        optimizer.zero_grad(set_to_none=True)
        (nll.sum() / len(ids)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        optimizer.step()
        sentences, tokens = sentences + len(ids), tokens + int(tgt_mask.sum())
    seconds = time.perf_counter() - start
    args.out.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "model": model.state_dict(),
            "src_vocab": src_vocab,
            "tgt_vocab": tgt_vocab,
            "overrides": args.overrides,
            "vocab": args.vocab,
        },
        args.out / "model.pt",
    )
    return {
        "system": f"sarnmt-{args.impl}",
        "mode": "train",
        "steps": args.steps,
        "parameters": count_parameters(model),
        "sentences_s": sentences / seconds,
        "tgt_tokens_s": tokens / seconds,
        "ms_per_step": 1e3 * seconds / args.steps,
        "peak_rss_mib": peak_rss_mib(),
        "threads": torch.get_num_threads(),
    }


@torch.no_grad()
def decode(args: argparse.Namespace) -> dict:
    saved = torch.load(args.ckpt, weights_only=True)
    cfg = compose("train", saved["overrides"])
    model = build_model(cfg.model, cfg.decoder, saved["vocab"], saved["vocab"])
    model.load_state_dict(saved["model"])
    model.eval()
    lines = read_lines(args.data / "test.src")[: args.sentences]
    sources = [encode(line, saved["src_vocab"]) for line in lines]
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    words = {i: w for w, i in saved["tgt_vocab"].items()} | {UNK: "<unk>"}
    hyps: list[list[int]] = [[] for _ in sources]
    start = time.perf_counter()
    for k in range(0, len(order), args.batch_size):
        ids = order[k : k + args.batch_size]
        src, src_mask = pad_sequences([sources[i] for i in ids])
        if args.impl == "plain":
            out = plain_beam(model, src, src_mask, args.beam, 0.0, args.max_len, args.min_len)
        else:
            out = beam_decode(
                model, src, src_mask, args.beam, LengthPenalty(), 0.0, args.max_len, min_len=args.min_len
            ).tokens
        for i, tokens in zip(ids, out, strict=True):
            hyps[i] = tokens
    seconds = time.perf_counter() - start
    (args.out or args.ckpt.parent).joinpath(f"test.{args.impl}.beam{args.beam}.txt").write_text(
        "".join(" ".join(words[t] for t in h if t != EOS) + "\n" for h in hyps), encoding="utf-8"
    )
    # EOS included, as fairseq-generate counts; a hypothesis cut at the limit has no EOS: one token per step
    output_tokens = sum(min(len(h) + 1, args.max_len) for h in hyps)
    return {
        "system": f"sarnmt-{args.impl}",
        "mode": "decode",
        "beam": args.beam,
        "sentences": len(hyps),
        "sentences_s": len(hyps) / seconds,
        "output_tokens_s": output_tokens / seconds,
        "mean_output_len": output_tokens / len(hyps),
        "min_len": args.min_len,
        "max_len": args.max_len,
        "peak_rss_mib": peak_rss_mib(),
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="benchmarks/peers/driver.py",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Examples:\n"
        "  benchmarks/peers/driver.py train --impl sarnmt --data peers/data --out peers/sarnmt model=small "
        "decoder=baseline\n"
        "  benchmarks/peers/driver.py decode --impl plain --data peers/data --ckpt peers/plain/model.pt --min-len 20",
    )
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train and time steps warmup+1 .. warmup+steps")
    d = sub.add_parser("decode", help="decode DATA/test.src with beam search")
    for q in (t, d):
        q.add_argument("--impl", choices=["sarnmt", "plain"], default="sarnmt")
        q.add_argument("--data", type=Path, required=True, help="folder with train.src/tgt and test.src")
        q.add_argument("--threads", type=int, default=2)
    t.add_argument("--out", type=Path, required=True, help="run folder (model.pt is written there)")
    t.add_argument("--vocab", type=int, default=8000)
    t.add_argument("--batch-size", type=int, default=64)
    t.add_argument("--steps", type=int, default=150)
    t.add_argument("--warmup", type=int, default=50)
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--clip", type=float, default=1.0)
    t.add_argument("--seed", type=int, default=1)
    t.add_argument(
        "overrides",
        nargs="*",
        default=["model=small", "decoder=baseline"],
        help="train config overrides for the model (default: model=small decoder=baseline)",
    )
    d.add_argument("--ckpt", type=Path, required=True)
    d.add_argument("--out", type=Path, default=None, help="where the hypotheses go (default: beside the checkpoint)")
    d.add_argument("--beam", type=int, default=5)
    d.add_argument("--batch-size", type=int, default=64)
    d.add_argument("--max-len", type=int, default=100, help="at most this many output tokens, EOS included")
    d.add_argument(
        "--min-len",
        type=int,
        default=0,
        help="no EOS before this many tokens (fairseq's --min-len); --min-len N --max-len N+1: every sentence N "
        "words and EOS, as fairseq-generate --min-len N --max-len-a 0 --max-len-b N",
    )
    d.add_argument("--sentences", type=int, default=500)
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    torch.set_num_threads(args.threads)
    try:
        record = train(args) if args.command == "train" else decode(args)
    except (OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

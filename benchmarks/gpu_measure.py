"""sarnmt's GPU figures at paper size (speed and GPU-busy fraction), in one prepared script that fits one device call.

    python benchmarks/gpu_measure.py --out DIR [--before HASH --cache DIR] [--batch 256] [--repeats 20]
                                     [--budget 420] [--dry-run]

On one CUDA device, at paper size (``model=paper``, V = 50,000, bf16 autocast), the baseline decoder, one batch of
``--batch`` synthetic WMT-length sentence pairs (5-50 tokens, mean 21, sorted), it times, each part ``--repeats``
(>= 20) times after ``--warmup`` untimed calls between CUDA events (:mod:`sarnmt.bench.device_timing`):

- ``beam5`` and ``greedy``: one batched search (sentences/s; a·|src| + b = 1.0·|src| + 5, as the bench: random
  weights rarely emit EOS), its steps replayed from a CUDA graph (:mod:`sarnmt.decoding.captured`);
  ``beam5_eager`` and ``greedy_eager``: the same searches with every step launched from Python;
- ``train``: one eager training step (forward, the paper's loss, backward, clipping at 1, Adadelta): target
  tokens/s; ``train_captured``: the same step with the forward and backward passes replayed as a CUDA graph
  (:mod:`sarnmt.training.capture`; its capture error is recorded where the model still syncs);

each with its median, quartiles and relative spread, and the GPU-busy fraction of one profiled call; then
``beam5_by_batch``: beam-5 sentences/s at each batch size of ``--sweep`` (5 repeats each: a curve, to see where it
stops rising, i.e. where decoding turns GPU-bound; a size that runs out of memory is halved with a warning and the
size that ran is recorded). The record's ``capture`` says whether the searches' steps were replayed from captured
graphs, and if not why (:func:`sarnmt.decoding.captured.capture_record`: a failed capture shows there, not only as a
warning and no speed-up). With
``--before HASH`` the same parts run, interleaved part by part, for sarnmt at that commit on the same weights
(``benchmarks/peers/commit.py``'s twin; its package copied beforehand under ``--cache``, since a device copy has no
git history), and the record gives now ÷ before. The record names the code that ran by the hash of the imported
package files (``code.source_hash``). A part that would start past ``--budget`` seconds is skipped, and a part that
fails is recorded with its error: the record is written after every part (``DIR/measure.json``), so a call cut
short still leaves what it measured.

``--dry-run``: the same on the CPU at ``model=tiny`` sizes, 2 repeats (tests/test_gpu_measure.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from contextlib import nullcontext
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)] if str(ROOT) not in sys.path else []

import torch  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402

from sarnmt.bench.device_timing import Spread, busy_fraction, event_seconds, imported_source_hash, ratio_lines, ratios  # noqa: E402
from sarnmt.bench.workload import sorted_batches, synthetic_workload  # noqa: E402
from sarnmt.decoding.beam import BeamSearch, beam_decode  # noqa: E402
from sarnmt.decoding.captured import capture_record  # noqa: E402
from sarnmt.decoding.greedy import GreedySearch  # noqa: E402
from sarnmt.decoding.penalties import LengthPenalty  # noqa: E402
from sarnmt.decoding.schedule import STATIC  # noqa: E402
from sarnmt.errors import InputError, check_range  # noqa: E402
from sarnmt.models.factory import build_model  # noqa: E402
from sarnmt.training.capture import CudaGraphs, Eager, StaticBatch, padded_loss  # noqa: E402
from sarnmt.training.loss import translation_loss  # noqa: E402
from sarnmt.training.optim import Adadelta  # noqa: E402
from sarnmt.utils.compose import config_dir  # noqa: E402
from sarnmt.utils.oom import halve_on_oom  # noqa: E402

MAX_LEN_A, MAX_LEN_B, CLIP = 1.0, 5, 1.0


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--before", default=None, help="full hash of the commit to time beside (its copy in --cache)")
    parser.add_argument("--cache", default=str(ROOT / ".cache" / "bench-commits"))
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--budget", type=float, default=420.0, help="seconds; no part starts after this")
    parser.add_argument("--sweep", default="64,128,256,512,1024", help="beam-5 batch sizes (dry run: 2,4,8)")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    try:
        check_range("--repeats", args.repeats, 2, whole=True)  # a spread needs two
        check_range("--batch", args.batch, 1, whole=True)
    except InputError as err:
        parser.error(str(err))
    return args


def setup(args: argparse.Namespace) -> tuple[torch.device, Any, torch.nn.Module, Any, int]:
    device = torch.device("cpu" if args.dry_run else "cuda")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("error: no CUDA device (run with --dry-run on a CPU)")
    size = ["model=tiny", "model.emb_dim=16", "model.hidden_dim=32"] if args.dry_run else ["model=paper"]
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = compose(config_name="train", overrides=[*size, "decoder=baseline"])
    vocab = 100 if args.dry_run else 50_000
    torch.manual_seed(1)
    net = build_model(cfg.model, cfg.decoder, vocab, vocab, "auto").to(device)
    pairs = synthetic_workload(args.batch, vocab, (5, 50, 21), seed=1).pairs
    (batch,) = sorted_batches(pairs, args.batch, 1)
    return device, cfg, net, batch.to(device), vocab


def autocast(device: torch.device):
    return torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else nullcontext()


def parts(args, device, cfg, net, batch, errors: dict[str, str]) -> dict[str, dict[str, tuple[Any, float]]]:
    """{part: {contender: (the call, what one call does: sentences or target tokens)}}; the earlier tree's parts
    are left out, the reason in ``errors["before"]``, when it cannot be loaded (sarnmt now is measured all the same)."""
    sentences, tokens = float(batch.src.size(0)), float(batch.tgt_mask.sum())
    src, src_mask = batch.src, batch.src_mask
    beam, greedy = BeamSearch(5, LengthPenalty(), MAX_LEN_A, MAX_LEN_B), GreedySearch(MAX_LEN_A, MAX_LEN_B)
    optimizer = Adadelta(net.parameters(), rho=0.95, eps=1e-6, compiled=device.type == "cuda")

    def search(fn, model):
        def call():
            with torch.no_grad(), autocast(device):
                fn(model, src, src_mask)

        return call

    def train_step(nll, opt):
        def call():
            opt.zero_grad(set_to_none=True)
            with autocast(device):
                loss = translation_loss(nll(batch), batch.tgt_mask, "sentence")
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), CLIP)
            opt.step()

        return call

    out: dict[str, dict[str, tuple[Any, float]]] = {
        "beam5": {"now": (search(beam, net), sentences)},
        "greedy": {"now": (search(greedy, net), sentences)},
        "train": {"now": (train_step(lambda b: net.nll(b.src, b.src_mask, b.tgt, b.tgt_mask), optimizer), tokens)},
        "train_captured": {"now": (captured_step(net, batch, device, optimizer), tokens)},
        # the same searches with every step launched from Python (the loop the captured step replays); last, so
        # that a short budget skips them first
        "beam5_eager": {"now": (search(eager_search(5, LengthPenalty()), net), sentences)},
        "greedy_eager": {"now": (search(eager_search(1, LengthPenalty(0.0)), net), sentences)},
    }
    if args.before:
        sys.path.insert(0, str(ROOT))
        from benchmarks.peers.commit import CommitPeer

        try:
            peer = CommitPeer(cfg.model, cfg.decoder, args.before, args.cache)
        except Exception as err:  # noqa: BLE001 - no copy and no git here: measure now alone, say why
            errors["before"] = f"{type(err).__name__}: {err} (make gpu-prepare BEFORE=... and carry its folder)"
            print(f"before: not loaded: {errors['before']}", flush=True)
            return out
        old = peer.searches(MAX_LEN_A, MAX_LEN_B, 5)
        old_optim = old_adadelta(peer)
        old_optimizer = old_optim(net.parameters(), rho=0.95, eps=1e-6, compiled=device.type == "cuda")
        out["beam5"]["before"] = (search(old["beam5"], net), sentences)
        out["greedy"]["before"] = (search(old["greedy"], net), sentences)
        out["train"]["before"] = (train_step(lambda b: peer.nll(net, b), old_optimizer), tokens)
    return out


def eager_search(beam_size: int, penalty: LengthPenalty):
    """Beam search under the uncaptured static schedule (greedy: beam 1, no length normalisation)."""

    def run(model, src, src_mask):
        return beam_decode(model, src, src_mask, beam_size, penalty, MAX_LEN_A, MAX_LEN_B, schedule=STATIC)

    return run


def old_adadelta(peer) -> type:
    """The earlier tree's Adadelta: ``training.optim`` (since the packages by concept), ``optim`` before."""
    for path in ("training.optim", "optim"):
        try:
            return peer._module(path).Adadelta
        except (ImportError, AttributeError):
            continue
    return torch.optim.Adadelta


def captured_step(net, batch, device, optimizer):
    """The training step with its forward and backward passes as one CUDA graph (Eager off CUDA); captured at the
    first call (inside the warm-up)."""
    key = (batch.src.size(0), batch.src.size(1), batch.tgt.size(1))
    static = StaticBatch.empty(key, batch, device)
    static.fill(batch, "sentence")
    params = [p for p in net.parameters() if p.requires_grad]
    backend = CudaGraphs() if device.type == "cuda" else Eager()
    replay = None

    def body():
        for param in params:
            param.grad = None
        with (
            torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False)
            if device.type == "cuda"
            else nullcontext()
        ):
            loss, _, _ = padded_loss(net, static, "sentence")
        loss.backward()
        return loss

    def call():
        nonlocal replay
        if replay is None:
            replay = backend.capture(body)
        replay()
        torch.nn.utils.clip_grad_norm_(params, CLIP)
        optimizer.step()

    return call


def beam_by_batch(args, device, net, vocab: int) -> list[dict[str, Any]]:
    """Beam-5 sentences/s against batch size (module docstring)."""
    sizes = [2, 4, 8] if args.dry_run else [int(n) for n in args.sweep.split(",")]
    pairs = synthetic_workload(max(sizes), vocab, (5, 50, 21), seed=2).pairs
    beam = BeamSearch(5, LengthPenalty(), MAX_LEN_A, MAX_LEN_B)
    points = []
    for asked in sizes:

        def rate(size: int) -> dict[str, Any]:
            (batch,) = sorted_batches(pairs, size, 1)
            src, mask = batch.src.to(device), batch.src_mask.to(device)

            def call():
                with torch.no_grad(), autocast(device):
                    beam(net, src, mask)

            spread = Spread.of(event_seconds(call, device, repeats=5, warmup=1))
            return {"sent_s": size / spread.median, "relative_spread": spread.relative}

        size, point = halve_on_oom(rate, asked, what="beam-5 batch size")
        points.append({"asked": asked, "batch": size, **point})
        print(f"beam5 at batch {size}: {point['sent_s']:,.1f} sentences/s", flush=True)
    return points


def measure(fn, amount: float, device: torch.device, repeats: int, warmup: int) -> dict[str, Any]:
    times = event_seconds(fn, device, repeats, warmup)
    spread = Spread.of(times)
    busy, how = busy_fraction(fn, device)
    return {
        "rate": amount / spread.median,
        "amount": amount,
        "seconds": spread.as_dict(),
        "busy": busy,
        "busy_how": how,
    }


def main(argv: list[str]) -> int:
    args = parse(argv)
    start = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    device, cfg, net, batch, vocab = setup(args)
    record: dict[str, Any] = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "settings": {
            "model": "tiny" if args.dry_run else "paper",
            "vocab": vocab,
            "precision": "bf16" if device.type == "cuda" else "fp32",
            "batch": args.batch,
            "src_tokens": int(batch.src_mask.sum()),
            "tgt_tokens": int(batch.tgt_mask.sum()),
            "repeats": args.repeats,
            "warmup": args.warmup,
            "timing": "CUDA events" if device.type == "cuda" else "host clock (dry run)",
            "before": args.before,
        },
        "figures": {},
        "errors": {},
        "skipped": [],
    }
    path = args.out / "measure.json"
    for name, contenders in parts(args, device, cfg, net, batch, record["errors"]).items():
        for who, (fn, amount) in contenders.items():
            label = f"{name}/{who}"
            if time.perf_counter() - start > args.budget:
                record["skipped"].append(label)
                continue
            try:
                record["figures"][label] = measure(fn, amount, device, args.repeats, args.warmup)
                fig = record["figures"][label]
                busy = "-" if fig["busy"] is None else f"{fig['busy']:.2f}"
                print(
                    f"{label}: {fig['rate']:,.1f}/s (spread {fig['seconds']['relative']:.3f}, busy {busy})", flush=True
                )
            except Exception as err:  # noqa: BLE001 - recorded, and the next part runs
                record["errors"][label] = f"{type(err).__name__}: {err}\n{traceback.format_exc()[-2000:]}"
                print(f"{label}: failed: {type(err).__name__}: {err}", flush=True)
            record["capture"] = capture_record(net, device)  # were beam5's and greedy's steps replayed, or why not
            record["code"] = imported_source_hash()
            record["seconds"] = time.perf_counter() - start
            path.write_text(json.dumps(record, indent=1))
    if time.perf_counter() - start < args.budget:
        try:
            record["beam5_by_batch"] = beam_by_batch(args, device, net, vocab)
        except Exception as err:  # noqa: BLE001 - recorded
            record["errors"]["beam5_by_batch"] = f"{type(err).__name__}: {err}"
    else:
        record["skipped"].append("beam5_by_batch")
    rates = {label: fig["rate"] for label, fig in record["figures"].items()}
    now = {label.split("/")[0]: rate for label, rate in rates.items() if label.endswith("/now")}
    before = {label.split("/")[0]: rate for label, rate in rates.items() if label.endswith("/before")}
    record["now_over_before"] = ratios(now, before)
    record["code"] = imported_source_hash()
    path.write_text(json.dumps(record, indent=1))
    for line in ratio_lines(now, before, (args.before or "")[:12] or "before"):
        print(line)
    print(f"code {record['code']['source_hash']} ({record['code']['files']} files); record {path}")
    return 1 if record["errors"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

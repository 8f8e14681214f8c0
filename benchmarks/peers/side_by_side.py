#!/usr/bin/env python3
"""sarnmt beside fairseq's LSTM and the plain PyTorch loop, on one machine, in one sitting (``make peers``).

Every system trains on the same word-level corpus with batches of 64 sentences (fairseq's ``--batch-size 64``; sarnmt
and the plain loop form the same batches the same way: ``benchmarks/peers/driver.py``), Adam at 1e-3, gradient norm
clipped at 1, dropout as configured, for ``--warmup`` + ``--steps`` updates; the figures are over the last
``--steps``. Then each decodes the first 500 test sentences with beam 5, batches of 64, at equal work: every system's
every output is exactly ``--length`` words and EOS (default 30: EOS is forbidden before, and forced after, as
fairseq-generate's ``--min-len N --max-len-a 0 --max-len-b N`` does; ``--length 0``: free lengths up to 100 tokens),
so that decoding sentences/s, the headline decoding figure, compares the same number of beam steps per sentence.
The systems run one after another and the whole round ``--runs`` times (alternating, so that a slow moment of a shared
machine does not fall on one system only); the table gives every run. Peak RSS is each process's own (``wait4``).

- **fairseq** 0.12.2 ``--arch lstm``: bi-LSTM encoder and LSTM decoder, e = 256, d = 512, dot-product attention
  (installed in its own venv by ``benchmarks/peers/install_fairseq.sh``; without it the fairseq rows are left out and
  the script says how to install it);
- **plain**: sarnmt's model (bi-GRU encoder, conditional GRU decoder with MLP attention, e = 256, d = 512) as a
  competent PyTorch user writes it (``benchmarks/peers/plain.py``), with PyTorch's Adam;
- **sarnmt**: ``model=small decoder=baseline`` (and any other decoder given with ``--decoders``).

Corpora (``--corpus``): ``wmt`` (default: the 10k-pair tokenised WMT news sample under ``--data-root``, pairs of 1-50
tokens; the last 500 pairs are the test set), ``multi30k`` (Multi30K En-De, Moses-tokenised and lowercased here;
test2016), or ``synthetic`` (needs no files: 20,000 random-word pairs of 5-40 words, mean 17, the target a
word-by-word mapping of the source with local reordering).

Writes WORK/side_by_side.{json,md} and prints the table. usage: benchmarks/peers/side_by_side.py [--work DIR] ...
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def read_gz(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def write_split(out: Path, name: str, pairs: list[tuple[str, str]]) -> None:
    for side, index in (("src", 0), ("tgt", 1)):
        (out / f"{name}.{side}").write_text("".join(p[index] + "\n" for p in pairs), encoding="utf-8")


def synthetic_pairs(count: int, rng: random.Random) -> list[tuple[str, str]]:
    """Zipf-distributed words of a 12,000-word lexicon, lengths triangular over 5-40 with mean 17; the target maps
    each word to its own target word and swaps adjacent word pairs at random (local reordering)."""
    words = [f"w{i}" for i in range(12000)]
    weights = [1 / (i + 1) for i in range(len(words))]
    pairs = []
    for _ in range(count):
        src = rng.choices(words, weights, k=round(rng.triangular(5, 40, 6)))
        tgt = [f"t{w[1:]}" for w in src]
        for i in range(0, len(tgt) - 1, 2):
            if rng.random() < 0.3:
                tgt[i], tgt[i + 1] = tgt[i + 1], tgt[i]
        pairs.append((" ".join(src), " ".join(tgt)))
    return pairs


def make_corpus(kind: str, data_root: Path, out: Path) -> str:
    """Write train/dev/test .src/.tgt under ``out``.  :returns: a one-line description."""
    out.mkdir(parents=True, exist_ok=True)
    if kind == "synthetic":
        rng = random.Random(1234)
        write_split(out, "train", synthetic_pairs(20000, rng))
        write_split(out, "dev", synthetic_pairs(500, rng))
        write_split(out, "test", synthetic_pairs(500, rng))
        return "synthetic: 20,000 random-word pairs, 5-40 words (mean 17)"
    if kind == "wmt":
        folder = data_root / "en-de"
        src, tgt = (read_gz(folder / f"wmt-sample-opennmt.tok.{lang}.gz") for lang in ("en", "de"))
        pairs = [(s, t) for s, t in zip(src, tgt, strict=True) if 0 < len(s.split()) <= 50 and 0 < len(t.split()) <= 50]
        write_split(out, "train", pairs[:-1000])
        write_split(out, "dev", pairs[-1000:-500])
        write_split(out, "test", pairs[-500:])
        return f"WMT news En-De sample, tokenised: {len(pairs) - 1000:,} training pairs of 1-50 tokens"
    from sacremoses import MosesTokenizer  # multi30k: raw text, tokenised here

    folder = data_root / "multi30k-en-de"
    tok = {lang: MosesTokenizer(lang) for lang in ("en", "de")}

    def split(name: str) -> list[tuple[str, str]]:
        sides = [
            [
                tok[lang].tokenize(line.lower(), return_str=True, escape=False)
                for line in read_gz(folder / f"{name}.{lang}.gz")
            ]
            for lang in ("en", "de")
        ]
        return list(zip(*sides, strict=True))

    write_split(out, "train", split("train"))
    write_split(out, "dev", split("val"))
    write_split(out, "test", split("test_2016_flickr"))
    return "Multi30K En-De, Moses-tokenised, lowercased: 29,000 training pairs"


def run(cmd: list[str], log: Path, env: dict[str, str]) -> tuple[str, float]:
    """Run ``cmd`` with its output in ``log``.  :returns: the output and the child's peak RSS in MiB.
    :raises SystemExit: if it fails, with the log's last lines."""
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    text = log.read_text(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        tail = "\n".join(text.splitlines()[-15:])
        raise SystemExit(f"side_by_side: {' '.join(cmd[:3])} ... failed (log {log}):\n{tail}")
    return text, usage.ru_maxrss / 1024


FAIRSEQ_MODEL = [
    "--arch",
    "lstm",
    "--encoder-embed-dim",
    "256",
    "--encoder-hidden-size",
    "512",
    "--encoder-layers",
    "1",
    "--encoder-bidirectional",
    "--decoder-embed-dim",
    "256",
    "--decoder-hidden-size",
    "512",
    "--decoder-layers",
    "1",
    "--decoder-out-embed-dim",
    "256",
    "--decoder-attention",
    "True",
]


def fairseq_train(venv: Path, binary: Path, ckpt: Path, args, env, log: Path) -> dict:
    cmd = [
        str(venv / "bin/fairseq-train"),
        str(binary),
        "--task",
        "translation",
        "--source-lang",
        "src",
        "--target-lang",
        "tgt",
        *FAIRSEQ_MODEL,
        "--dropout",
        str(args.dropout),
        "--optimizer",
        "adam",
        "--lr",
        "0.001",
        "--clip-norm",
        "1.0",
        "--criterion",
        "cross_entropy",
        "--batch-size",
        "64",
        "--max-update",
        str(args.warmup + args.steps),
        "--log-interval",
        str(args.warmup),
        "--log-format",
        "simple",
        "--disable-validation",
        "--cpu",
        "--num-workers",
        "0",
        "--seed",
        "1",
        "--save-dir",
        str(ckpt),
        "--no-epoch-checkpoints",
    ]
    text, rss = run(cmd, log, env)
    # train_inner lines every `warmup` updates: wps (target words/s), wpb (words per batch) and bsz (sentences per
    # batch) of that interval; its time is interval·wpb/wps (wps has one decimal, ups only two: the finer clock)
    seconds = sentences = 0.0
    for line in text.splitlines():
        m = re.search(r"\bwps=([\d.]+),.*\bwpb=([\d.]+), bsz=([\d.]+), num_updates=(\d+)", line)
        if m and int(m.group(4)) > args.warmup:
            wps, wpb, bsz = float(m.group(1)), float(m.group(2)), float(m.group(3))
            seconds += args.warmup * wpb / wps
            sentences += args.warmup * bsz
    if not seconds:
        raise SystemExit(f"side_by_side: no train_inner lines after update {args.warmup} in {log}")
    return {"sentences_s": sentences / seconds, "peak_rss_mib": rss}


def length_args(length: int) -> tuple[list[str], list[str]]:
    """fairseq-generate's and driver.py decode's length options: every output ``length`` words and EOS (the
    same beam steps for every system), or with ``length`` 0 free lengths up to 100 tokens."""
    if length <= 0:
        return ["--max-len-a", "0", "--max-len-b", "100"], ["--max-len", "101"]
    # fairseq: no EOS at steps < --min-len, EOS forced at step --max-len-b (0-based); sarnmt: no EOS before
    # --min-len tokens, at most --max-len tokens with EOS
    n = str(length)
    return ["--min-len", n, "--max-len-a", "0", "--max-len-b", n], ["--min-len", n, "--max-len", str(length + 1)]


def fairseq_decode(venv: Path, binary: Path, ckpt: Path, length: int, env, log: Path) -> dict:
    cmd = [
        str(venv / "bin/fairseq-generate"),
        str(binary),
        "--source-lang",
        "src",
        "--target-lang",
        "tgt",
        "--path",
        str(ckpt / "checkpoint_last.pt"),
        "--gen-subset",
        "test",
        "--beam",
        "5",
        "--batch-size",
        "64",
        *length_args(length)[0],
        "--cpu",
        "--num-workers",
        "0",
    ]
    text, rss = run(cmd, log, env)
    m = re.search(
        r"Translated ([\d,]+) sentences \(([\d,]+) tokens\) in [\d.]+s \(([\d.]+) sentences/s, ([\d.]+) "
        r"tokens/s\)",
        text,
    )
    if not m:
        raise SystemExit(f"side_by_side: no 'Translated ... sentences' line in {log}")
    sentences, tokens = (int(m.group(i).replace(",", "")) for i in (1, 2))
    return {
        "sentences_s": float(m.group(3)),
        "output_tokens_s": float(m.group(4)),
        "mean_output_len": tokens / sentences,
        "peak_rss_mib": rss,
    }


def sarnmt_cmd(*args: str) -> list[str]:
    return [sys.executable, str(HERE / "driver.py"), *args]


def table(results: dict, description: str, machine: str, length: int = 0) -> str:
    systems = list(results)
    runs = max(len(r["train"]) for r in results.values())

    def cells(system: str, phase: str, key: str, spec: str = ",.1f") -> str:
        values = [r.get(key) for r in results[system][phase]]
        return " / ".join("–" if v is None else format(v, spec) for v in values) or "–"

    outputs = f"every output {length} words and EOS" if length > 0 else "free output lengths up to 100 tokens"
    lines = [
        f"{machine}; corpus: {description}; batches of 64 sentences; {runs} run(s) each, alternating; beam-5 "
        f"decoding of 500 test sentences, {outputs}",
        "",
        "| | " + " | ".join(systems) + " |",
        "|---|" + "---:|" * len(systems),
    ]
    rows = [
        ("train sentences/s", "train", "sentences_s"),
        ("beam-5 sentences/s", "decode", "sentences_s"),
        ("beam-5 output tokens/s", "decode", "output_tokens_s"),
        ("mean output tokens (EOS included)", "decode", "mean_output_len"),
        ("peak RSS training, MiB", "train", "peak_rss_mib"),
    ]
    for label, phase, key in rows:
        lines.append(f"| {label} | " + " | ".join(cells(s, phase, key) for s in systems) + " |")
    if "fairseq" in results and results["fairseq"]["train"]:
        lines.append("")
        base = {
            phase: median(results["fairseq"][phase], key)
            for phase, key in (("train", "sentences_s"), ("decode", "sentences_s"))
        }
        for s in systems:
            if s != "fairseq":
                train = median(results[s]["train"], "sentences_s") / base["train"]
                decode = median(results[s]["decode"], "sentences_s") / base["decode"]
                lines.append(
                    f"- {s}: trains {train:.2f}× fairseq's sentences/s, decodes {decode:.2f}× its beam-5 "
                    f"sentences/s ({'at equal output lengths' if length > 0 else 'at free output lengths'}; "
                    "medians over runs)"
                )
    return "\n".join(lines)


def median(rows: list[dict], key: str) -> float:
    values = sorted(r[key] for r in rows)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, default=ROOT / "outputs/peers", help="scratch folder (corpus, runs, tables)")
    p.add_argument("--corpus", choices=["wmt", "multi30k", "synthetic"], default="wmt")
    p.add_argument("--data-root", type=Path, default=ROOT.parent / "shared/data")
    p.add_argument("--fairseq", type=Path, default=None, help="fairseq's venv (default WORK/fairseq)")
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--dropout", type=float, default=0.2, help="fairseq's --dropout (sarnmt: model=small's own)")
    p.add_argument("--decoders", nargs="*", default=["baseline"], help="sarnmt decoders to time (model=small)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument(
        "--length",
        type=int,
        default=30,
        help="every decoded output this many words and EOS, for every system (equal work); 0: free lengths",
    )
    args = p.parse_args()
    work = args.work.resolve()
    venv = (args.fairseq or work / "fairseq").resolve()
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    data = work / f"data-{args.corpus}"
    try:
        description = make_corpus(args.corpus, args.data_root, data)
    except FileNotFoundError as err:
        print(
            f"error: {err.filename} not found: --corpus {args.corpus} reads it under --data-root {args.data_root} "
            "(or use --corpus synthetic)",
            file=sys.stderr,
        )
        return 2
    have_fairseq = (venv / "bin/fairseq-train").exists()
    if not have_fairseq:
        print(
            f"fairseq is not installed in {venv}: run benchmarks/peers/install_fairseq.sh {venv} (a few minutes, "
            "from PyPI); timing sarnmt and the plain loop only",
            file=sys.stderr,
        )
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    binary = work / f"bin-{args.corpus}"
    if have_fairseq and not (binary / "dict.tgt.txt").exists():
        run(
            [
                str(venv / "bin/fairseq-preprocess"),
                "--source-lang",
                "src",
                "--target-lang",
                "tgt",
                "--trainpref",
                str(data / "train"),
                "--validpref",
                str(data / "dev"),
                "--testpref",
                str(data / "test"),
                "--destdir",
                str(binary),
                "--nwordssrc",
                "8000",
                "--nwordstgt",
                "8000",
                "--workers",
                "1",
            ],
            logs / "preprocess.log",
            env,
        )
    systems = (["fairseq"] if have_fairseq else []) + ["plain"] + [f"sarnmt-{d}" for d in args.decoders]
    results: dict = {s: {"train": [], "decode": []} for s in systems}
    for round_ in range(1, args.runs + 1):
        for system in systems:
            tag = f"{system}.run{round_}"
            print(f"[{time.strftime('%H:%M:%S')}] {tag}: train", file=sys.stderr, flush=True)
            run_dir = work / "runs" / args.corpus / tag
            shutil.rmtree(run_dir, ignore_errors=True)  # fairseq-train would resume from an earlier run's checkpoint
            if system == "fairseq":
                trained = fairseq_train(venv, binary, run_dir, args, env, logs / f"{tag}.train.log")
                results[system]["train"].append(trained)
                print(f"[{time.strftime('%H:%M:%S')}] {tag}: decode", file=sys.stderr, flush=True)
                decoded = fairseq_decode(venv, binary, run_dir, args.length, env, logs / f"{tag}.decode.log")
                results[system]["decode"].append(decoded)
                continue
            impl = "plain" if system == "plain" else "sarnmt"
            model = ["model=small", f"decoder={'baseline' if system == 'plain' else system.split('-', 1)[1]}"]
            for phase, extra in (
                ("train", ["--out", str(run_dir), "--steps", str(args.steps), "--warmup", str(args.warmup), *model]),
                ("decode", ["--ckpt", str(run_dir / "model.pt"), *length_args(args.length)[1]]),
            ):
                if phase == "decode":
                    print(f"[{time.strftime('%H:%M:%S')}] {tag}: decode", file=sys.stderr, flush=True)
                text, rss = run(
                    sarnmt_cmd(phase, "--impl", impl, "--data", str(data), "--threads", str(args.threads), *extra),
                    logs / f"{tag}.{phase}.log",
                    env,
                )
                record = json.loads(text.strip().splitlines()[-1])
                results[system][phase].append({**record, "peak_rss_mib": rss})
    machine = f"{os.cpu_count()} CPUs ({platform_cpu()}), {args.threads} threads"
    md = table(results, description, machine, args.length)
    (work / "side_by_side.json").write_text(
        json.dumps(
            {
                "machine": machine,
                "corpus": description,
                "args": {k: str(v) for k, v in vars(args).items()},
                "results": results,
            },
            indent=2,
        )
    )
    (work / "side_by_side.md").write_text(md + "\n")
    print(md)
    return 0


def platform_cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


if __name__ == "__main__":
    sys.exit(main())

"""The systems of the quality comparison: for each, its configuration (sizes matched to sarnmt's ``model=tiny``, the
mini scale's e = 128, d = 256), its training command with its own resume, what its log lines mean, which checkpoint
its own rule selects, and its own test command.

===================  ==============================================================================================
``sarnmt_fp32``      the mini scale's baseline (cGRU, dl4mt's conditional GRU decoder), the mini job's overrides
``sarnmt_bf16``      the same, ``trainer.precision=bf16-mixed`` (training only; decoding fp32); only on a CPU with
                     AVX-512 BF16 or AMX (:func:`sarnmt.utils.precision.bf16_missing`)
``joeynmt``          JoeyNMT 2.3.0, recurrent: bi-GRU encoder, Bahdanau attention, GRU decoder with input feeding
``fairseq``          fairseq 0.12.2 ``--arch lstm``: bi-LSTM encoder, LSTM decoder with its dot-product attention
===================  ==============================================================================================

Common to all: the exported text (:mod:`benchmarks.peers.quality.data`), Adam at 1e-3, gradient norm clipped at 1,
dropout 0.2, batches of about 4,096 tokens, dev every 100 updates, each tool's own early stopping on dev (at most 60
epochs), beam 5 at test with scores divided by the length, one thread. A :class:`Scale` shortens the run
(``smoke``: a few dozen updates, for checking the harness end to end).
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from benchmarks.peers.quality.clock import PREFIX
from sarnmt.utils.compose import specs_dir

ROOT = Path(__file__).resolve().parents[3]
PEERS = ROOT / "outputs" / "peers"
STEP_IN_NAME = re.compile(r"step[=_-]?(\d+)")


@dataclass(frozen=True)
class Scale:
    """How long runs train: ``max_updates`` None trains to the tool's own early stopping; dev every ``valid_every``
    updates; early stopping after ``patience`` validations without a lower dev cost; ``max_epochs`` a guard."""

    name: str
    max_updates: int | None
    valid_every: int
    patience: int
    max_epochs: int
    description: str


SCALES = {
    "full": Scale("full", None, 100, 4, 60, "to each tool's early stopping on dev (dev every 100 updates)"),
    "smoke": Scale("smoke", 30, 10, 4, 60, "30 updates, dev every 10: the harness end to end, no early stopping"),
}


@dataclass
class Event:
    """What a log line said: ``valid`` (a validation at ``step``), ``end`` (training ended), ``resumed`` (restored
    from its checkpoint at ``step``), ``params``, ``best`` (the tool's selected update so far), ``saved``
    (a checkpoint file written: ``path``)."""

    kind: str
    step: int | None = None
    dev_loss: float | None = None
    dev_bleu: float | None = None
    value: Any = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class Job:
    """One run: ``system`` at ``seed`` and ``scale``, on the exported text ``data``, in the folder ``work``."""

    system: System
    seed: int
    scale: Scale
    data: Path
    work: Path
    state: dict[str, Any] = field(default_factory=dict)  # the parser's memory within one attempt

    @property
    def id(self) -> str:
        return f"{self.system.name}.s{self.seed}"


def attempt_dir(job: Job, n: int) -> Path:
    return job.work / f"attempt-{n}"


class System:
    """A system of the table. Subclasses fill in every method."""

    name = ""
    label = ""
    tool = ""
    dev_bleu_variant = ""
    # how the tool's checkpoint selection breaks ties between equal dev costs: the first or the last
    tie = "first"

    def unavailable(self) -> str | None:
        """Why it cannot run here (one line), or None."""
        return None

    def version(self) -> dict[str, str]:
        raise NotImplementedError

    def config(self, job: Job) -> dict[str, Any]:
        """Everything that defines the run (its identity: another config is another run)."""
        raise NotImplementedError

    def prepare(self, job: Job) -> None:
        """Work shared by the seeds or done once before training (binarised data)."""

    def resume_point(self, job: Job, attempts: int) -> tuple[int, Path] | None:
        """``(update, checkpoint)`` the tool's own resume would continue from, None to start from scratch."""
        raise NotImplementedError

    def train_command(self, job: Job, attempt: int, resume: tuple[int, Path] | None) -> list[str]:
        raise NotImplementedError

    def parse(self, job: Job, line: str) -> list[Event]:
        raise NotImplementedError

    def selected(self, job: Job, valid: dict[int, float]) -> tuple[int, Path]:
        """The update and checkpoint file the tool's own rule selected (``valid``: update -> dev cost)."""
        raise NotImplementedError

    def test_command(self, job: Job, checkpoint: Path, split: str, out: Path) -> list[str]:
        raise NotImplementedError

    def test_output(self, out: Path, split: str, log: str) -> tuple[dict[str, list[str]], float | None]:
        """``({"bpe": lines} or {"plain": lines, "tokenised": lines}, decoding seconds the tool reported)``."""
        raise NotImplementedError

    def on_event(self, job: Job, event: Event) -> None:
        """Housekeeping after an event (pruning checkpoints the tool would otherwise keep)."""

    def dev_bleu(self, job: Job, point: dict[str, Any], scorer: Any) -> float | None:
        """Dev BLEU of a validation whose log line had none (from the tool's dev output), or None."""
        return None


def first_or_last_min(valid: dict[int, float], tie: str) -> int:
    best = min(valid.values())
    steps = [s for s in sorted(valid) if valid[s] == best]
    return steps[0] if tie == "first" else steps[-1]


# --------------------------------------------------------------------------------------------------------- sarnmt


def mini_overrides(seed: int) -> list[str]:
    """The mini scale's En->De baseline job's overrides, as the sweep composes them (``sweeps/results/mini``'s
    records list the same)."""
    spec = yaml.safe_load((specs_dir() / "scales" / "mini.yaml").read_text())
    return [*spec["train"], *spec["pairs"]["en_de"]["train"], "decoder=baseline", f"seed={seed}"]


class Sarnmt(System):
    tool = "sarnmt"
    dev_bleu_variant = "greedy, sacrebleu 13a on detokenised text v. raw references (sarnmt's val/bleu)"
    tie = "first"

    def __init__(self, precision: str) -> None:
        self.precision = precision
        self.name = f"sarnmt_{precision}"
        self.label = f"sarnmt baseline ({precision})"

    def unavailable(self) -> str | None:
        if self.precision != "bf16":
            return None
        import torch

        from sarnmt.utils.precision import bf16_missing

        missing = bf16_missing(torch.device("cpu"))
        return None if missing is None else f"not run: CPU lacks bf16 ({missing})"

    def version(self) -> dict[str, str]:
        import torch

        from sarnmt.sweep.code import code_identity

        code = code_identity()
        return {"sarnmt": code.get("commit") or "?", "source_hash": code["source_hash"], "torch": torch.__version__}

    def overrides(self, job: Job) -> list[str]:
        extra = ["trainer.precision=bf16-mixed"] if self.precision == "bf16" else []
        if job.scale.max_updates is not None:
            extra += [
                f"trainer.max_steps={job.scale.max_updates}",
                f"trainer.val_check_interval={job.scale.valid_every}",
            ]
        return [*mini_overrides(job.seed), *extra]

    def config(self, job: Job) -> dict[str, Any]:
        from omegaconf import OmegaConf

        from sarnmt.utils.compose import compose

        cfg = OmegaConf.to_container(compose("train", [*self.overrides(job), "paths.output_dir=RUN"]), resolve=True)
        keep = ("data", "model", "decoder", "optim", "trainer", "validation", "val_decoding", "decoding", "loss")
        return {
            "overrides": self.overrides(job),
            **{k: cfg[k] for k in keep},
            "early_stopping": cfg["callbacks"]["early_stopping"],
        }

    def run_dir(self, job: Job) -> Path:
        return job.work / "run"

    def resume_point(self, job: Job, attempts: int) -> tuple[int, Path] | None:
        last = self.run_dir(job) / "checkpoints" / "last.ckpt"
        if not last.is_file():
            return None
        import torch

        return int(torch.load(last, map_location="cpu", weights_only=True)["global_step"]), last

    def train_command(self, job: Job, attempt: int, resume: tuple[int, Path] | None) -> list[str]:
        run = self.run_dir(job).resolve()
        return [
            sys.executable,
            "-m",
            "sarnmt",
            "train",
            *self.overrides(job),
            "threads=1",
            "test=false",
            "logger=csv",
            f"paths.output_dir={run}",
            "trainer.enable_progress_bar=false",
            "callbacks.progress_bar=null",
            "+callbacks.peers_clock._target_=benchmarks.peers.quality.clock.ValidationClock",
            *([f"ckpt_path={resume[1].resolve()}"] if resume else []),
        ]

    def parse(self, job: Job, line: str) -> list[Event]:
        if line.startswith(PREFIX):
            item = json.loads(line[len(PREFIX) :])
            event = Event(item["kind"], item.get("step"), item.get("dev_loss"), item.get("dev_bleu"))
            if item["kind"] == "end" and item.get("stopped_early"):  # Lightning's EarlyStopping ended it
                return [Event("stopped_early", item.get("step"), value="early stopping on dev cost"), event]
            return [event]
        found = re.search(r"model: ([\d,]+) parameters", line)
        return [Event("params", value=int(found.group(1).replace(",", "")))] if found else []

    def selected(self, job: Job, valid: dict[int, float]) -> tuple[int, Path]:
        folder = self.run_dir(job) / "checkpoints"
        files = [p for p in folder.glob("*.ckpt") if p.name != "last.ckpt" and STEP_IN_NAME.search(p.name)]
        if len(files) != 1:
            raise RuntimeError(f"{folder}: expected one selected checkpoint, found {[p.name for p in files]}")
        return int(STEP_IN_NAME.search(files[0].name).group(1)), files[0]

    def test_command(self, job: Job, checkpoint: Path, split: str, out: Path) -> list[str]:
        return [
            sys.executable,
            "-m",
            "sarnmt",
            "evaluate",
            f"ckpt_path={checkpoint.resolve()}",
            "data=multi30k_en_de",
            f"split={split}",
            "decoding=beam",
            "decoding.beam_size=5",
            "batch_size=64",
            "threads=1",
            "precision=fp32",
            "progress=false",
            f"output_dir={out.resolve()}",
        ]

    def test_output(self, out: Path, split: str, log: str) -> tuple[dict[str, list[str]], float | None]:
        record = json.loads((out / f"eval.{split}.json").read_text())
        read = lambda name: (out / name).read_text(encoding="utf-8").split("\n")[:-1]  # noqa: E731
        return {
            "plain": read(f"hypotheses.{split}.txt"),
            "tokenised": read(f"hypotheses.{split}.tok.txt"),
        }, float(record["seconds"])


# -------------------------------------------------------------------------------------------------------- JoeyNMT


def tool_version(python: Path, package: str) -> str | None:
    """The installed version of ``package`` in the venv of ``python`` (read from its metadata, no import)."""
    site = list((python.parent.parent / "lib").glob("python3*/site-packages"))
    for folder in site:
        for meta in folder.glob(f"{package}-*.dist-info/METADATA"):
            for line in meta.read_text(errors="replace").splitlines():
                if line.startswith("Version: "):
                    return line.split(": ", 1)[1].strip()
    return None


class JoeyNMT(System):
    name = "joeynmt"
    label = "JoeyNMT 2.3.0 (GRU)"
    tool = "JoeyNMT"
    dev_bleu_variant = "greedy, tokenised BLEU (sacrebleu tokenize=none) of its dev output, BPE merged, v. val.tok.de"
    tie = "first"  # TrainStatistics.is_best: strictly lower

    def __init__(self, venv: Path = PEERS / "joeynmt") -> None:
        self.venv = venv
        self.python = venv / "bin" / "python"

    def unavailable(self) -> str | None:
        version = tool_version(self.python, "joeynmt") if self.python.exists() else None
        if version != "2.3.0":
            found = "missing" if version is None else f"version {version}"
            return f"not run: JoeyNMT 2.3.0 not installed in {self.venv} ({found}; benchmarks/peers/install_joeynmt.sh)"
        return None

    def version(self) -> dict[str, str]:
        return {"joeynmt": tool_version(self.python, "joeynmt") or "?", "torch": tool_version(self.python, "torch")}

    def config(self, job: Job) -> dict[str, Any]:
        scale, data = job.scale, job.data.resolve()
        side = {
            "level": "word",  # the text is BPE'd already: pieces are its words
            "lowercase": False,
            "normalize": False,
            "max_length": -1,  # sarnmt's length filter is applied in the export
            "min_length": -1,
            "voc_min_freq": 1,
            "voc_limit": 100000,  # every piece of the training text
        }
        training = {
            "random_seed": job.seed,
            "optimizer": "adam",
            "adam_betas": [0.9, 0.999],
            "learning_rate": 0.001,
            "learning_rate_min": 0.0001,
            "clip_grad_norm": 1.0,
            "weight_decay": 0.0,
            "batch_size": 4096,
            "batch_type": "token",
            "normalization": "batch",  # summed NLL / sentences, sarnmt's loss=sentence
            "scheduling": "plateau",
            "patience": scale.patience,
            "decrease_factor": 0.5,
            "early_stopping_metric": "loss",
            "epochs": scale.max_epochs,
            "validation_freq": scale.valid_every,
            "logging_freq": scale.valid_every // 2 if scale.valid_every % 2 == 0 else scale.valid_every,
            "keep_best_ckpts": -1,  # every validation's checkpoint, so a killed run resumes where it was; pruned
            "overwrite": False,
            "shuffle": True,
            "print_valid_sents": [],  # no examples or attention plots in the log
            "label_smoothing": 0.0,
            "loss": "crossentropy",
        }
        if scale.max_updates is not None:
            training["updates"] = scale.max_updates
        embeddings = {"embedding_dim": 128, "scale": False, "dropout": 0.2}
        return {
            "name": f"peers-quality-{job.id}",
            "joeynmt_version": "2.3.0",
            "use_cuda": False,
            "fp16": False,
            "random_seed": job.seed,
            "data": {
                "train": f"{data}/train.bpe",
                "dev": f"{data}/val.bpe",
                "dataset_type": "plain",
                "src": {"lang": "en", **side},
                "trg": {"lang": "de", **side},
            },
            "testing": {
                "n_best": 1,
                "beam_size": 5,
                "beam_alpha": 1.0,
                "batch_size": 64,
                "batch_type": "sentence",
                "max_output_length": -1,  # JoeyNMT's own: 1.5 x the longest source of the batch
                "eval_metrics": ["bleu"],
                "sacrebleu_cfg": {"tokenize": "none"},
            },
            "training": training,
            "model": {
                "initializer": "xavier_uniform",
                "bias_initializer": "zeros",
                "init_gain": 1.0,
                "embed_initializer": "xavier_uniform",
                "tied_embeddings": False,
                "encoder": {
                    "type": "recurrent",
                    "rnn_type": "gru",
                    "embeddings": embeddings,
                    "hidden_size": 256,
                    "bidirectional": True,
                    "dropout": 0.2,
                    "num_layers": 1,
                },
                "decoder": {
                    "type": "recurrent",
                    "rnn_type": "gru",
                    "embeddings": embeddings,
                    "hidden_size": 256,
                    "attention": "bahdanau",
                    "dropout": 0.2,
                    "hidden_dropout": 0.2,
                    "num_layers": 1,
                    "input_feeding": True,
                    "init_hidden": "bridge",
                },
            },
        }

    def profile_config(self, job: Job) -> dict[str, Any]:
        """What the profile of one update (:mod:`benchmarks.peers.quality.profile_update`) builds JoeyNMT from."""
        return self.config(job)

    def model_dir(self, job: Job, attempt: int) -> Path:
        return attempt_dir(job, attempt) / "model"

    def resume_point(self, job: Job, attempts: int) -> tuple[int, Path] | None:
        for n in range(attempts, 0, -1):
            latest = self.model_dir(job, n) / "latest.ckpt"
            if latest.is_file():
                target = latest.resolve()
                return int(target.stem), target
        return None

    def train_command(self, job: Job, attempt: int, resume: tuple[int, Path] | None) -> list[str]:
        cfg = self.config(job)
        cfg["model_dir"] = str(self.model_dir(job, attempt).resolve())
        if resume is not None:
            cfg["training"].update(
                load_model=str(resume[1]),
                reset_best_ckpt=False,
                reset_scheduler=False,
                reset_optimizer=False,
                reset_iter_state=False,
            )
        path = attempt_dir(job, attempt) / "config.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        job.state.update(step=resume[0] if resume else 0, attempt=attempt)
        return [str(self.python), "-m", "joeynmt", "train", str(path.resolve()), "--skip-test"]

    def parse(self, job: Job, line: str) -> list[Event]:
        state = job.state
        if found := re.search(r"Step:\s+(\d+),", line):
            state["step"] = int(found.group(1))
        elif "Evaluation result (greedy)" in line and (found := re.search(r"loss:\s+([\d.]+)", line)):
            return [Event("valid", state["step"], float(found.group(1)))]
        elif "Hooray! New best validation result" in line:
            return [Event("best", state["step"])]
        elif found := re.search(r"Best validation result \(greedy\) at step\s+(\d+)", line):
            return [Event("best", int(found.group(1)))]
        elif found := re.search(r"Checkpoint saved in (\S+\.ckpt)", line):
            return [Event("saved", int(Path(found.group(1)).stem), value=found.group(1))]
        elif "Training ended" in line:
            return [Event("end", state["step"], value=line.split(" - ")[-1].strip())]
        elif found := re.search(r"Total params: (\d+)", line):
            return [Event("params", value=int(found.group(1)))]
        return []

    def on_event(self, job: Job, event: Event) -> None:
        """After a checkpoint is written: delete this attempt's other ``<update>.ckpt`` files but the best one
        (``keep_best_ckpts: -1`` keeps every validation's, 65 MB each)."""
        if event.kind == "best":
            job.state["best"] = event.step
        if event.kind != "saved":
            return
        folder = Path(event.value).parent
        keep = {event.step, job.state.get("best")}
        for path in folder.glob("*.ckpt"):
            if path.stem.isdigit() and int(path.stem) not in keep and not path.is_symlink():
                path.unlink(missing_ok=True)

    def dev_bleu(self, job: Job, point: dict[str, Any], scorer: Any) -> float | None:
        """JoeyNMT's own dev BLEU is over BPE pieces (its text is words to it): tokenised BLEU of the validation's
        ``<update>.hyps`` (greedy dev output) instead, BPE merged, against the tokenised references."""
        hyps = self.model_dir(job, point["attempt"]) / f"{point['update']}.hyps"
        if not hyps.is_file():
            return None
        return round(scorer.dev_bleu_tok(hyps.read_text(encoding="utf-8").split("\n")[:-1]), 2)

    def selected(self, job: Job, valid: dict[int, float]) -> tuple[int, Path]:
        step = first_or_last_min(valid, self.tie)
        for folder in sorted(job.work.glob("attempt-*/model")):
            if (folder / f"{step}.ckpt").is_file():
                return step, folder / f"{step}.ckpt"
        raise RuntimeError(f"{job.id}: no checkpoint of update {step} (JoeyNMT's best) under {job.work}")

    def test_command(self, job: Job, checkpoint: Path, split: str, out: Path) -> list[str]:
        cfg = self.config(job)
        model_dir = checkpoint.parent.resolve()
        cfg["model_dir"] = str(model_dir)
        data = job.data.resolve()
        cfg["data"] = {k: v for k, v in cfg["data"].items() if k not in ("train", "dev")}
        cfg["data"]["test"] = f"{data}/{split}.bpe"
        cfg["data"]["src"]["voc_file"] = str(model_dir / "src_vocab.txt")
        cfg["data"]["trg"]["voc_file"] = str(model_dir / "trg_vocab.txt")
        cfg["testing"]["load_model"] = str(checkpoint.resolve())
        out.mkdir(parents=True, exist_ok=True)
        path = out / "test.yaml"
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        return [str(self.python), "-m", "joeynmt", "test", str(path.resolve()), "-o", str((out / "hyp").resolve())]

    def test_output(self, out: Path, split: str, log: str) -> tuple[dict[str, list[str]], float | None]:
        lines = (out / "hyp.test").read_text(encoding="utf-8").split("\n")[:-1]
        took = re.findall(r"Generation took ([\d.]+)\[sec\]", log)
        return {"bpe": lines}, float(took[-1]) if took else None


# -------------------------------------------------------------------------------------------------------- fairseq


class Fairseq(System):
    name = "fairseq"
    label = "fairseq 0.12.2 (LSTM)"
    tool = "fairseq"
    dev_bleu_variant = "greedy, tokenised BLEU (--eval-bleu, BPE removed, --eval-tokenized-bleu) v. val.bpe.de merged"
    tie = "last"  # checkpoint_utils: checkpoint_best.pt when val_loss <= best

    def __init__(self, venv: Path = PEERS / "fairseq") -> None:
        self.venv = venv
        self.python = venv / "bin" / "python"

    def unavailable(self) -> str | None:
        version = tool_version(self.python, "fairseq") if self.python.exists() else None
        if version != "0.12.2" or not (self.venv / "bin" / "fairseq-train").exists():
            found = "missing" if version is None else f"version {version}"
            return (
                f"not run: fairseq 0.12.2 not installed in {self.venv} ({found}; benchmarks/peers/install_fairseq.sh)"
            )
        return None

    def version(self) -> dict[str, str]:
        return {"fairseq": tool_version(self.python, "fairseq") or "?", "torch": tool_version(self.python, "torch")}

    def bin_dir(self, job: Job) -> Path:
        return job.data / "fairseq-bin"

    def prepare(self, job: Job) -> None:
        """Binarise the exported text once (shared by the seeds): ``fairseq-preprocess``, every piece of the training
        text in the dictionaries; the three test sets are the subsets ``test``, ``test1``, ``test2``."""
        import fcntl
        import subprocess

        folder = self.bin_dir(job)
        with open(job.data / ".fairseq-bin.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if (folder / "done").is_file():
                return
            data = job.data.resolve()
            tmp = folder.with_name(f".tmp-{folder.name}")
            cmd = [
                str(self.venv / "bin" / "fairseq-preprocess"),
                "--source-lang=en",
                "--target-lang=de",
                f"--trainpref={data}/train.bpe",
                f"--validpref={data}/val.bpe",
                f"--testpref={data}/test.bpe,{data}/test_2017.bpe,{data}/test_2018.bpe",
                f"--destdir={tmp.resolve()}",
                "--workers=1",
            ]
            subprocess.run(cmd, check=True, capture_output=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
            (tmp / "done").write_text(json.dumps(cmd) + "\n")
            if folder.exists():
                import shutil

                shutil.rmtree(folder)
            tmp.rename(folder)

    def args(self, job: Job) -> list[str]:
        scale = job.scale
        args = [
            "--arch=lstm",
            "--encoder-embed-dim=128",
            "--encoder-hidden-size=256",
            "--encoder-layers=1",
            "--encoder-bidirectional",
            "--decoder-embed-dim=128",
            "--decoder-hidden-size=256",
            "--decoder-layers=1",
            "--decoder-out-embed-dim=128",
            "--decoder-attention=True",
            "--dropout=0.2",
            "--criterion=cross_entropy",
            "--optimizer=adam",
            "--adam-betas=(0.9, 0.999)",
            "--lr=0.001",
            "--clip-norm=1.0",
            "--max-tokens=4096",
            f"--seed={job.seed}",
            f"--max-epoch={scale.max_epochs}",
            f"--patience={scale.patience}",
            f"--validate-interval-updates={scale.valid_every}",
            f"--save-interval-updates={scale.valid_every}",
            "--validate-interval=1000",  # no extra validation at the end of each epoch: every N updates only
            "--save-interval=1000",
            "--keep-interval-updates=1",
            "--no-epoch-checkpoints",
            "--eval-bleu",
            '--eval-bleu-args={"beam": 1, "max_len_a": 2, "max_len_b": 10}',
            "--eval-bleu-remove-bpe",
            "--eval-tokenized-bleu",
            "--log-format=json",
            f"--log-interval={max(1, scale.valid_every // 2)}",
            "--num-workers=0",
            "--cpu",
        ]
        if scale.max_updates is not None:
            args.append(f"--max-update={scale.max_updates}")
        return args

    def profile_config(self, job: Job) -> list[str]:
        """What the profile of one update (:mod:`benchmarks.peers.quality.profile_update`) builds fairseq from: its
        training arguments."""
        return self.args(job)

    def config(self, job: Job) -> dict[str, Any]:
        return {
            "fairseq-preprocess": "every piece of the training text (thresholds 0)",
            "fairseq-train": self.args(job),
        }

    def save_dir(self, job: Job) -> Path:
        return job.work / "checkpoints"

    def resume_point(self, job: Job, attempts: int) -> tuple[int, Path] | None:
        last = self.save_dir(job) / "checkpoint_last.pt"
        return (-1, last) if last.is_file() else None  # the update is read from its log line ("Loaded checkpoint")

    def train_command(self, job: Job, attempt: int, resume: tuple[int, Path] | None) -> list[str]:
        return [
            str(self.venv / "bin" / "fairseq-train"),
            str(self.bin_dir(job).resolve()),
            *self.args(job),
            f"--save-dir={self.save_dir(job).resolve()}",
        ]

    def parse(self, job: Job, line: str) -> list[Event]:
        if "| valid |" in line:
            item = json.loads(line.split("| valid |", 1)[1])
            bleu = item.get("valid_bleu")
            return [
                Event(
                    "valid",
                    int(item["valid_num_updates"]),
                    float(item["valid_loss"]),
                    None if bleu is None else float(bleu),
                )
            ]
        if found := re.search(r"Loaded checkpoint \S+ \(epoch \d+ @ (\d+) updates\)", line):
            return [Event("resumed", int(found.group(1)))]
        if found := re.search(r"num\. (?:shared )?model params: ([\d,]+)", line):
            return [Event("params", value=int(found.group(1).replace(",", "")))]
        if "done training in" in line:
            return [Event("end", value=line.split("|")[-1].strip())]
        if "early stop since valid performance" in line:
            return [Event("stopped_early", value=line.split("|")[-1].strip())]
        return []

    def selected(self, job: Job, valid: dict[int, float]) -> tuple[int, Path]:
        return first_or_last_min(valid, self.tie), self.save_dir(job) / "checkpoint_best.pt"

    SUBSETS = {"test": "test", "test_2017": "test1", "test_2018": "test2"}

    def test_command(self, job: Job, checkpoint: Path, split: str, out: Path) -> list[str]:
        return [
            str(self.venv / "bin" / "fairseq-generate"),
            str(self.bin_dir(job).resolve()),
            f"--path={checkpoint.resolve()}",
            f"--gen-subset={self.SUBSETS[split]}",
            "--beam=5",
            "--lenpen=1",
            "--max-len-a=2",
            "--max-len-b=10",
            "--batch-size=64",
            "--num-workers=0",
            "--cpu",
        ]

    def test_output(self, out: Path, split: str, log: str) -> tuple[dict[str, list[str]], float | None]:
        hyps = {}
        for line in log.split("\n"):
            if line.startswith("H-"):
                head, _, text = line.split("\t", 2) if line.count("\t") >= 2 else (line, "", "")
                hyps[int(head[2:])] = text
        lines = [hyps.get(i, "") for i in range(max(hyps) + 1 if hyps else 0)]
        took = re.search(r"Translated [\d,]+ sentences \([\d,]+ tokens\) in ([\d.]+)s", log)
        return {"bpe": lines}, float(took.group(1)) if took else None


def all_systems() -> list[System]:
    return [Sarnmt("fp32"), Sarnmt("bf16"), JoeyNMT(), Fairseq()]

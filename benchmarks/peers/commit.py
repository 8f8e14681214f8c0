"""sarnmt as it was at another commit, as a peer of the benchmark (``make bench-commit REF=<commit>``;
``peers=commit`` from ``benchmarks/conf/peers/``, :mod:`sarnmt.bench.peer`).

A change that should not alter speed (a refactoring, a move of modules) is checked by timing the tree before and the
tree after *in one process*, interleaved repeat by repeat on the same batches and the same weights: separate runs on
a shared machine differ by more than the few percent such a check looks for. The bench then prints sarnmt now ÷
sarnmt at ``ref``.

How: ``git archive <ref> sarnmt`` is unpacked once into ``cache_dir/<full hash>/`` and its package renamed
``sarnmt_<12 hex digits>``, with every ``sarnmt.`` import and ``_target_`` of its Python files rewritten to the new
name, so both versions import side by side. The old tree's model is built from the same ``model=`` and ``decoder=``
nodes (their ``_target_``\\ s taken to the old package; a class that moved since is found through
:data:`sarnmt.sweep.records.MOVED_TARGETS`) and shares the timed model's parameters, so its gradients reach them and
the two compute on the same weights. What is called is the API both trees keep: ``build_model(model, decoder, V, V,
kernels)``, ``model.nll(src, src_mask, tgt, tgt_mask)``, ``GreedySearch(a, b)`` and ``BeamSearch(k, LengthPenalty(),
a, b)`` called as ``search(model, src, src_mask)``.
"""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
import sys
import tempfile
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from torch import Tensor, nn

from sarnmt.bench.peer import SearchFn
from sarnmt.bench.workload import TrainBatch
from sarnmt.errors import InputError
from sarnmt.utils.hash_view import MOVED_TARGETS

ROOT = Path(__file__).resolve().parents[2]  # the checkout whose history holds ``ref``
IMPORT = re.compile(r"\bsarnmt(?=\.)|(?<=from )sarnmt(?= import)|(?<=^import )sarnmt$", re.MULTILINE)


def resolve_commit(ref: str, repo: Path = ROOT) -> str:
    """:returns: the full hash of ``ref`` in ``repo``.  :raises InputError: naming ``ref`` when git does not know
    it."""
    out = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise InputError(f"ref={ref!r} is not a commit of {repo} (git rev-parse found none)")
    return out.stdout.strip()


def materialize(ref: str, cache_dir: str | Path, repo: Path = ROOT) -> str:
    """Unpack the package ``sarnmt`` of ``ref`` under ``cache_dir`` (once: a finished copy is reused; a half-written
    one is never, it is written beside and renamed) and put it on ``sys.path``.

    A full 40-digit hash whose copy is already under ``cache_dir`` is used without git: a GPU machine gets the
    working tree and that folder, not the history (``benchmarks/gpu_measure.py``).

    :returns: the name the old package imports as, ``sarnmt_<12 hex digits>``."""
    cached = Path(cache_dir).expanduser().resolve() / ref / f"sarnmt_{ref[:12]}" / "__init__.py"
    commit = ref if re.fullmatch(r"[0-9a-f]{40}", ref) and cached.is_file() else resolve_commit(ref, repo)
    name = f"sarnmt_{commit[:12]}"
    home = Path(cache_dir).expanduser().resolve() / commit
    if not (home / name / "__init__.py").is_file():
        home.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{commit[:12]}-", dir=home.parent))
        archive = subprocess.run(
            ["git", "-C", str(repo), "archive", "--format=tar", commit, "sarnmt"], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(staging)], input=archive.stdout, check=True)
        for path in (staging / "sarnmt").rglob("*"):
            if path.suffix in (".py", ".yaml"):
                path.write_text(IMPORT.sub(name, path.read_text(encoding="utf-8")), encoding="utf-8")
        (staging / "sarnmt").rename(staging / name)
        try:
            staging.rename(home)
        except OSError:  # another process finished first: use its copy
            shutil.rmtree(staging)
    if str(home) not in sys.path:
        sys.path.insert(0, str(home))
    return name


def _importable(dotted: str) -> bool:
    module, _, attr = dotted.rpartition(".")
    try:
        return hasattr(importlib.import_module(module), attr)
    except ImportError:
        return False


def retarget(node: Any, package: str) -> Any:
    """``node`` with every ``_target_`` (at any depth) moved to ``package``, the old tree's name for sarnmt.

    :returns: the new node, or None when a class has no counterpart in the old tree."""
    if isinstance(node, Mapping):
        out = {}
        for key, value in node.items():
            if key == "_target_" and isinstance(value, str) and value.startswith("sarnmt."):
                paths = (package + path.removeprefix("sarnmt") for path in (value, MOVED_TARGETS.get(value)) if path)
                value = next((path for path in paths if _importable(path)), None)
                if value is None:
                    return None
            else:
                value = retarget(value, package)
                if value is None and node[key] is not None:
                    return None
            out[key] = value
        return out
    if isinstance(node, list):
        items = [retarget(item, package) for item in node]
        return None if any(new is None and old is not None for new, old in zip(items, node, strict=True)) else items
    return node


class CommitPeer:
    """sarnmt at ``ref``, on the timed model's weights (:class:`sarnmt.bench.peer.Peer`).

    :param model: the timed system's ``model=`` node.  :param decoder: its ``decoder=`` node.
    :param ref: a commit, branch or tag of the checkout (``git rev-parse``).
    :param cache_dir: where the old trees are unpacked, one folder per commit.
    :param kernels: the old tree's ``kernels=`` choice (the bench's own is ``kernels``: keep the two alike).
    """

    def __init__(
        self,
        model: Mapping[str, Any],
        decoder: Mapping[str, Any],
        ref: str,
        cache_dir: str = str(ROOT / ".cache" / "bench-commits"),
        kernels: str = "auto",
    ) -> None:
        self.package = materialize(ref, cache_dir)
        nodes = [OmegaConf.to_container(n, resolve=True) if isinstance(n, DictConfig) else n for n in (model, decoder)]
        self.model, self.decoder = (retarget(node, self.package) for node in nodes)
        self.implements = self.model is not None and self.decoder is not None
        self.kernels = kernels
        self._twins: weakref.WeakKeyDictionary[nn.Module, nn.Module] = weakref.WeakKeyDictionary()

    def _module(self, path: str) -> Any:
        return importlib.import_module(f"{self.package}.{path}")

    def twin(self, model: nn.Module) -> nn.Module:
        """The old tree's model holding ``model``'s own parameters (built once per model).

        :raises InputError: when the two trees name or shape their parameters differently."""
        if model not in self._twins:
            sizes = {m.num_embeddings for m in model.modules() if isinstance(m, nn.Embedding)}
            if len(sizes) != 1:
                raise InputError(f"peers.commit: the bench builds V_src = V_tgt; this model's embeddings have {sizes}")
            vocab = sizes.pop()
            old = self._module("models.factory").build_model(self.model, self.decoder, vocab, vocab, self.kernels)
            ours, theirs = dict(model.named_parameters()), dict(old.named_parameters())
            if {k: v.shape for k, v in ours.items()} != {k: v.shape for k, v in theirs.items()}:
                differ = sorted(set(ours) ^ set(theirs)) or [k for k in ours if ours[k].shape != theirs[k].shape]
                raise InputError(
                    f"peers.commit: {self.package} names or shapes its parameters differently (first: {differ[0]})"
                )
            for dotted, parameter in ours.items():
                owner, _, leaf = dotted.rpartition(".")
                setattr(old.get_submodule(owner), leaf, parameter)
            self._twins[model] = old.to(next(model.parameters()).device)
        old = self._twins[model]
        if old.training != model.training:  # train() walks every module: not inside the timed calls each time
            old.train(model.training)
        return old

    def nll(self, model: nn.Module, batch: TrainBatch) -> Tensor:
        """The old tree's training loss path, ``model.nll``.  :returns: (B, T)."""
        return self.twin(model).nll(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask)

    def searches(self, max_len_a: float, max_len_b: int, beam_size: int) -> dict[str, SearchFn]:
        """The old tree's batched greedy and beam searches."""
        greedy = self._module("decoding.greedy").GreedySearch(max_len_a, max_len_b)
        penalty = self._module("decoding.penalties").LengthPenalty()
        beam = self._module("decoding.beam").BeamSearch(beam_size, penalty, max_len_a, max_len_b)
        return {
            "greedy": lambda model, src, src_mask: greedy(self.twin(model), src, src_mask),
            f"beam{beam_size}": lambda model, src, src_mask: beam(self.twin(model), src, src_mask),
        }

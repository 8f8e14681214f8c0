"""The text every system of the quality comparison trains and is tested on, exported from sarnmt's own pipeline.

sarnmt's mini En->De runs (``data=multi30k_en_de``) read Multi30K through :class:`~sarnmt.data.loading.
prepared_corpus.CorpusDataModule`: Moses normalisation and tokenisation (aggressive hyphen splitting), truecasing
learned on the training side, then ``@@`` BPE of 8,000 pieces per side (:mod:`sarnmt.data.text.pipeline`), and the
training pairs with a side of 50 pieces or more dropped. :func:`export` writes exactly that text for the peers, from
the same prepared cache (so from the same truecaser and BPE model), one sentence a line:

- ``<split>.bpe.en`` / ``<split>.bpe.de``: the BPE pieces (``justific@@ ation``) of ``train`` (after the length
  filter, in corpus order), ``val`` and the three test sets ``test`` (2016), ``test_2017``, ``test_2018``;
- ``<split>.tok.de``: the tokenised (truecased) references that tokenised BLEU compares with;
- ``<split>.raw.de``: the raw references that BLEU on detokenised text compares with;
- ``pipeline.json``: the pipeline (truecasers, BPE), whose target side detokenises every system's output the way
  sarnmt's own output is detokenised (:mod:`benchmarks.peers.quality.scoring`);
- ``manifest.json`` (last): the cache it came from, line counts, and the SHA-256 of every file.

Every exported line is checked: its pieces map back to sarnmt's ids, and merging them gives sarnmt's tokenised text.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from hydra.utils import instantiate

from sarnmt.data.text.subword import SUFFIX, merge_bpe
from sarnmt.utils.atomic import write_text
from sarnmt.utils.compose import compose

SPLITS = ("train", "val", "test", "test_2017", "test_2018")
TESTS = {"test2016": "test", "test2017": "test_2017", "test2018": "test_2018"}  # the table's names -> splits
DATA = "multi30k_en_de"
SRC, TGT = "en", "de"


def at_form(piece: str) -> str:
    """A piece of the BPE model (``ation</w>`` ends a word) in subword-nmt's ``@@`` form (``ation``; else ``x@@``)."""
    if piece in ("</s>", "<unk>"):
        return piece
    return piece[: -len(SUFFIX)] if piece.endswith(SUFFIX) else piece + "@@"


def pieces(bpe: Any, ids: list[int]) -> str:
    return " ".join(at_form(bpe.tokenizer.id_to_token(int(i))) for i in ids)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def datamodule(overrides: list[str] | None = None) -> Any:
    """sarnmt's data module of the mini En->De runs, prepared and set up (the prepared cache is built if missing)."""
    cfg = compose("train", [f"data={DATA}", *(overrides or [])])
    module = instantiate(cfg.data)
    module.prepare_data()
    module.setup("fit")
    return module


def export(out: Path, overrides: list[str] | None = None) -> dict[str, Any]:
    """Write the text of :data:`SPLITS` into ``out`` (see the module docstring), unless ``out/manifest.json`` says it
    is there already and every file matches its hash.  :returns: the manifest."""
    manifest_path = out / "manifest.json"
    if manifest_path.is_file():
        manifest = json.loads(manifest_path.read_text())
        if all((out / name).is_file() and sha256(out / name) == digest for name, digest in manifest["files"].items()):
            return manifest
    out.mkdir(parents=True, exist_ok=True)
    module = datamodule(overrides)
    cache = Path(module.report["cache"])
    src_bpe, tgt_bpe = module.src_codec.bpe, module.tgt_codec.bpe
    counts = {}
    for split in SPLITS:
        data = module.dataset(split)
        tok_src, tok_tgt = module.tokenized_sources(split), module.tokenized_references(split)
        raw_tgt = module.references(split)
        lines = {"bpe.en": [], "bpe.de": [], "tok.de": [], "raw.de": [], "raw.en": []}
        raw_src = module.sources(split)
        for k in range(len(data)):
            index, src_ids, tgt_ids = data[k]
            src, tgt = pieces(src_bpe, src_ids), pieces(tgt_bpe, tgt_ids)
            if merge_bpe(src) != src_bpe.merge(src_ids) or merge_bpe(tgt) != tgt_bpe.merge(tgt_ids):
                raise RuntimeError(f"{split} line {index + 1}: the exported pieces do not merge to sarnmt's text")
            if tgt_bpe.merge(tgt_ids) != tok_tgt[index] and "<unk>" not in tgt:
                raise RuntimeError(f"{split} line {index + 1}: sarnmt's ids are not its tokenised reference")
            for key, value in (
                ("bpe.en", src),
                ("bpe.de", tgt),
                ("tok.de", tok_tgt[index]),
                ("raw.de", raw_tgt[index]),
                ("raw.en", raw_src[index]),
            ):
                lines[key].append(value)
        del tok_src
        for key, values in lines.items():
            write_text(out / f"{split}.{key}", "".join(v.replace("\n", " ") + "\n" for v in values))
        counts[split] = len(data)
    shutil.copyfile(cache / "pipeline.json", out / "pipeline.json")
    files = {p.name: sha256(p) for p in sorted(out.iterdir()) if p.is_file() and p.name != "manifest.json"}
    manifest = {
        "data": DATA,
        "cache": str(cache),
        "cache_manifest_sha256": sha256(cache / "manifest.json"),
        "max_len": module.max_len,
        "vocab": {"src": module.src_vocab_size, "tgt": module.tgt_vocab_size},
        "lines": counts,
        "train_filter": module.report.get("train_filter"),
        "files": files,
    }
    write_text(manifest_path, json.dumps(manifest, indent=1) + "\n")
    return manifest


def export_id(manifest: dict[str, Any]) -> str:
    """16 hex digits naming the exported text (its files' hashes): part of every job's identity."""
    blob = json.dumps(manifest["files"], sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]

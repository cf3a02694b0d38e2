"""The encoder as an ONNX graph for ONNX Runtime, built from the model file's weights.

Input `embeddings` [batch, seq, hidden] is word + position + type embedding before the
first LayerNorm: the 250k-row word table stays 4-bit in the model file and only the rows a
batch uses are dequantized (pgrag.embeddings.e5.runtime). Input `mask` [batch, seq] int32
is 1 on real tokens. Output `hidden` [batch, seq, hidden] is the last layer; pooling is
done by the caller. Layers use ONNX Runtime's fused CPU kernels (com.microsoft Attention,
SkipLayerNormalization, BiasGelu): fp32 compute on the dequantized 4-bit weights."""

from __future__ import annotations

from typing import Any

import numpy as np

from pgrag.embeddings.e5.weights import Weights

BUILDER_VERSION = 1  # part of the cache key: bump when the graph changes
MS = "com.microsoft"


class _Builder:
    def __init__(self, weights: Weights) -> None:
        from onnx import helper

        self.helper = helper
        self.w = weights
        self.nodes: list[Any] = []
        self.inits: list[Any] = []

    def const(self, name: str, array: np.ndarray) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(self, op: str, inputs: list[str], out: str, domain: str = "", **attrs: Any) -> str:
        self.nodes.append(
            self.helper.make_node(op, inputs, [out], name=out, domain=domain, **attrs)
        )
        return out

    def linear_t(self, name: str, cols: int) -> np.ndarray:
        """A stored [out, in] 4-bit matrix as the [in, out] fp32 operand of MatMul."""
        return self.w.q4(name, cols).T

    def layer(self, i: int, x: str) -> str:
        c, p = self.w.config, f"l{i}."
        h = c.hidden
        qkv = np.concatenate([self.linear_t(p + s + ".w", h) for s in ("q", "k", "v")], axis=1)
        bias = np.concatenate([self.w.fp32(p + s + ".b") for s in ("q", "k", "v")])
        ctx = self.node(
            "Attention",
            [x, self.const(p + "qkv.w", qkv), self.const(p + "qkv.b", bias), "mask"],
            p + "ctx",
            domain=MS,
            num_heads=c.heads,
        )
        ao = self.node(
            "MatMul", [ctx, self.const(p + "ao.w", self.linear_t(p + "ao.w", h))], p + "ao"
        )
        x = self._skip_ln(ao, x, p + "ao.b", p + "aln", p + "attn_out")
        fi = self.node(
            "MatMul", [x, self.const(p + "fi.w", self.linear_t(p + "fi.w", h))], p + "fi"
        )
        act = self.node(
            "BiasGelu", [fi, self.const(p + "fi.b", self.w.fp32(p + "fi.b"))], p + "gelu", domain=MS
        )
        fo = self.node(
            "MatMul", [act, self.const(p + "fo.w", self.linear_t(p + "fo.w", c.ffn))], p + "fo"
        )
        return self._skip_ln(fo, x, p + "fo.b", p + "oln", p + "out")

    def _skip_ln(self, y: str, skip: str, bias: str, ln: str, out: str) -> str:
        """LayerNorm(skip + y + bias), one fused kernel."""
        inputs = [
            y,
            skip,
            self.const(ln + ".w", self.w.fp32(ln + ".w")),
            self.const(ln + ".b", self.w.fp32(ln + ".b")),
            self.const(bias, self.w.fp32(bias)),
        ]
        return self.node(
            "SkipLayerNormalization", inputs, out, domain=MS, epsilon=self.w.config.eps
        )


def build_graph(weights: Weights) -> bytes:
    """The serialized ONNX model (~85 MB: the layers' weights in fp32)."""
    from onnx import TensorProto, helper

    b = _Builder(weights)
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

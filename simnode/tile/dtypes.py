"""Element types of tile programs and their widths.

``canonical(name)`` maps TileLang's spellings (``bfloat16``, ``float8_e4m3fn`` ...) to
simnode's (``bf16``, ``fp8`` ...); ``bits(dtype)`` is the element width; ``CUBE_IN`` are the
MMAD input types a chip may support (facts 1.2; ``hf32``: FP32 values the cube multiplies in
HF32 mode), ``SCALE`` the MX scale type (UE8M0, facts 1.1).
"""

from __future__ import annotations

BITS = {"fp32": 32, "hf32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "fp4": 4, "e8m0": 8,
        "int64": 64, "int32": 32, "uint32": 32, "int16": 16, "uint16": 16,
        "int8": 8, "uint8": 8, "bool": 8}

ALIASES = {"float32": "fp32", "float": "fp32", "bfloat16": "bf16", "float16": "fp16",
           "half": "fp16", "float8_e4m3fn": "fp8", "float8_e4m3": "fp8", "e4m3": "fp8",
           "hifloat8": "fp8", "float4_e2m1fn": "fp4", "e2m1": "fp4", "float8_e8m0fnu": "e8m0",
           "ue8m0": "e8m0"}

CUBE_IN = ("bf16", "fp16", "fp8", "fp4", "fp32", "hf32")
SCALE = "e8m0"


def canonical(name: str) -> str | None:
    """The simnode name of a dtype, or None if it is not one."""
    if not isinstance(name, str):
        return None
    name = ALIASES.get(name, name)
    return name if name in BITS else None


def bits(dtype: str) -> int:
    return BITS[dtype]


def nbytes(elements: int, dtype: str) -> int:
    """Bytes of ``elements`` values of ``dtype``, rounded up to whole bytes (fp4 packs two)."""
    return -(-elements * BITS[dtype] // 8)

"""Gang geometry and value representations of the cpu backend's LLVM code generator.

A *gang* is ``G`` lanes run together.  A varying value of element type ``T`` is held as
``G / w`` LLVM vectors ``<w x T>`` ("parts"), ``w`` = one hardware vector of ``T``
(AVX2: 8 x float, 4 x double; AVX-512: 16 x float, 8 x double): every op is emitted
once per part, which gives the CPU several independent chains and avoids LLVM's
packing of wide ``<16 x i1>`` masks.
Uniform values stay scalars and are splatted where a varying op meets them.

This module knows nothing of the IR; ``emit.Emitter`` uses it.
"""

from __future__ import annotations

import functools
import os
import struct
from dataclasses import dataclass

import llvmlite.binding as llvm

from ...types import ScalarType
from ..machinecode.engine import init_llvm

LLVM_TYPES = {
    "bool": "i1", "int8": "i8", "uint8": "i8", "int16": "i16", "uint16": "i16",
    "int32": "i32", "uint32": "i32", "int64": "i64", "uint64": "i64",
    "float32": "float", "float64": "double",
}
#: scalar types the code generator makes itself (masks, lane indices, 32-bit copies)
BOOL, I64, U32 = ScalarType("bool"), ScalarType("int64"), ScalarType("uint32")


class Unsupported(Exception):
    """An op the vector code generator cannot lower although ``codegen.lowerable``
    accepted it: a compiler bug (the two must agree)."""


#: x86 features a 512-bit gang needs: vector ops on every element size and masks
_AVX512 = ("avx512f", "avx512bw", "avx512dq", "avx512vl")


@functools.cache
def host_has_avx512() -> bool:
    """AVX-512 F/BW/DQ/VL: vectors of every element size and mask (k) registers."""
    init_llvm()
    features = llvm.get_host_cpu_features()
    return all(features.get(f) for f in _AVX512)


@functools.cache
def host_has_fma() -> bool:
    """Fused multiply-add instructions (``fastmath`` contracts into them)."""
    init_llvm()
    return bool(llvm.get_host_cpu_features().get("fma"))


@functools.cache
def vector_bits() -> int:
    """Width of the vector registers we use: 512 with AVX-512 (F, BW, DQ, VL), 256 with
    AVX2, else 128; ``HYDRA_CPU_VECTOR_BITS`` (128, 256 or 512) overrides it.

    512 is measured, not assumed: on a 2-core AMD Zen 4 it ran mandelbrot 1.26x, mc-pi
    1.15x and aobench 1.2x faster than 256-bit code (bench/RESULTS.md).  On Intel
    parts that lower their clock for 512-bit work, ``HYDRA_CPU_VECTOR_BITS=256`` may
    be faster."""
    forced = os.environ.get("HYDRA_CPU_VECTOR_BITS")
    if forced:
        if forced not in ("128", "256", "512"):
            raise ValueError(f"HYDRA_CPU_VECTOR_BITS={forced!r}: use 128, 256 or 512")
        if forced == "512" and not host_has_avx512():
            raise ValueError("HYDRA_CPU_VECTOR_BITS=512 needs AVX-512 (F, BW, DQ, VL), "
                             "which this CPU does not have")
        return int(forced)
    if host_has_avx512():
        return 512
    init_llvm()
    features = llvm.get_host_cpu_features()
    return 256 if features.get("avx2") or features.get("avx") else 128


@dataclass(frozen=True)
class Geometry:
    """Lanes per gang and the part width of each element type."""

    vbits: int
    lanes: int  # G
    mask_width: int  # part width of masks and other bools

    def width(self, t: ScalarType) -> int:
        if t.name == "bool":
            return self.mask_width
        # a power of two that divides G: with 3 chains (G = 48) a byte type takes 3
        # parts of 16, so parts of every width convert by halving and pairing
        w = 1 << (max(1, min(self.lanes, self.vbits // t.bits)).bit_length() - 1)
        while self.lanes % w:
            w //= 2
        return w


def geometry(types: list[ScalarType], vectors: int = 2) -> Geometry:
    """The gang shape for a kernel whose varying values have ``types``: ``vectors`` (K)
    vectors of 32-bit elements (K = 2: G = 16 on AVX2, 32 on AVX-512; ``chains`` picks K
    per kernel); masks take the width of the widest element so that compares of doubles
    need no reshuffling."""
    vbits = vector_bits()
    lanes = vectors * vbits // 32
    widest = max([t.bits for t in types if t.name != "bool"] or [32])
    return Geometry(vbits, lanes, max(1, min(lanes, vbits // max(widest, 32))))


def lty(t: ScalarType) -> str:
    return LLVM_TYPES[t.name]


def vty(t: ScalarType | str, w: int) -> str:
    s = t if isinstance(t, str) else lty(t)
    return f"<{w} x {s}>"


def const_text(value, t: ScalarType) -> str:
    """An LLVM literal of ``value`` in type ``t`` (floats as exact hex doubles)."""
    if t.kind == "b":
        return "true" if value else "false"
    if t.kind == "f":
        v = float(t.dtype.type(value))
        return "0x%016X" % struct.unpack("<Q", struct.pack("<d", v))[0]
    bits = t.bits
    v = int(t.dtype.type(value)) & ((1 << bits) - 1)
    if v >= 1 << (bits - 1):
        v -= 1 << bits  # LLVM prints integers signed
    return str(v)


# --- value representations -------------------------------------------------------------

@dataclass
class Uni:
    """A uniform scalar: one LLVM value (or literal) of its type."""

    ref: str


@dataclass
class Var:
    """A varying scalar: G / w parts, each ``<w x T>``."""

    parts: list[str]
    w: int


@dataclass
class Arr:
    """An array: data pointer, shape and byte strides (i64 values).  A varying array's
    ``shape``/``strides`` exclude the lane axis; lane i's sub-array starts at
    ``data + i * lane_stride``."""

    data: str
    shape: list[str]
    strides: list[str]
    lane_stride: str | None = None

#!/usr/bin/env python3
"""Writes the checked-in seed corpora of the .npy and safetensors fuzz targets (tests/fuzz/corpus/).

Run from the repository root: /usr/bin/python3 tests/fuzz/make_seeds.py. Needs NumPy (1.24) for the
.npy seeds; the safetensors seeds are laid out by hand the way the reference writer lays them out
(compact JSON header padded with spaces to a multiple of 8, data from the widest type down), plus a
few that only other writers produce (unpadded header, escapes). The output is deterministic, so a
re-run changes no file. Every seed is valid unless its name says otherwise; libFuzzer mutates from
them, and the few refused ones start it next to an interesting check.
"""
import io
import json
import os
import struct

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(folder, name, data):
    os.makedirs(os.path.join(ROOT, folder), exist_ok=True)
    with open(os.path.join(ROOT, folder, name), "wb") as f:
        f.write(data)


def npy(array, version=None):
    buffer = io.BytesIO()
    if version is None:
        np.save(buffer, array)
    else:
        np.lib.format.write_array(buffer, array, version=version)
    return buffer.getvalue()


def npy_seeds():
    seeds = {
        "f32_2x3.npy": npy(np.arange(6, dtype="<f4").reshape(2, 3)),
        "f64_scalar.npy": npy(np.array(2.5, dtype="<f8")),
        "f16_4.npy": npy(np.array([1, -2, 0.5, 65504], dtype="<f2")),
        "i32_3x1x2.npy": npy(np.arange(6, dtype="<i4").reshape(3, 1, 2)),
        "i64_5.npy": npy(np.array([0, 1, -1, 2**62, -(2**63)], dtype="<i8")),
        "u8_empty_0x4.npy": npy(np.zeros((0, 4), dtype="u1")),
        "u8_rank8.npy": npy(np.ones((2, 1, 1, 1, 1, 1, 1, 3), dtype="u1")),
        "f32_v2.npy": npy(np.arange(4, dtype="<f4"), version=(2, 0)),
        "i32_v3.npy": npy(np.arange(3, dtype="<i4"), version=(3, 0)),
        # Refused: tightfit reads C order and little-endian only.
        "refused_fortran.npy": npy(np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3))),
        "refused_big_endian.npy": npy(np.arange(3, dtype=">f4")),
    }
    # Python 2 wrote 'L' suffixes and a header that leaves the data unaligned; both still read.
    header = b"{'descr': '<i8', 'fortran_order': False, 'shape': (2L,), }\n"
    seeds["i64_python2_unaligned.npy"] = (
        b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + struct.pack("<2q", 7, -7)
    )
    for name, data in seeds.items():
        write("npy", name, data)


def safetensors(tensors, metadata=None, pad=True, header_text=None):
    """tensors: list of (name, type, shape, raw bytes), laid out in the given order."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    offset = 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = header_text if header_text is not None else json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(raw for _, _, _, raw in tensors)


def safetensors_seeds():
    f32 = np.arange(6, dtype="<f4").tobytes()
    seeds = {
        "empty.safetensors": safetensors([]),
        "one_f32.safetensors": safetensors([("weight", "F32", (2, 3), f32)]),
        "metadata.safetensors": safetensors(
            [("w", "F32", (6,), f32)], metadata={"format": "pt", "step": "12", "rng": "0"}
        ),
        "all_types.safetensors": safetensors(
            [
                ("a.f64", "F64", (2,), np.array([1.5, -2], dtype="<f8").tobytes()),
                ("b.i64", "I64", (1,), np.array([-5], dtype="<i8").tobytes()),
                ("c.f32", "F32", (2, 1), np.array([3, 4], dtype="<f4").tobytes()),
                ("d.i32", "I32", (2,), np.array([1, 2], dtype="<i4").tobytes()),
                ("e.bf16", "BF16", (2,), b"\x80\x3f\x00\x40"),
                ("f.f16", "F16", (2,), np.array([1, 2], dtype="<f2").tobytes()),
                ("g.u8", "U8", (3,), b"\x01\x02\x03"),
                ("h.bool", "BOOL", (1,), b"\x01"),
            ]
        ),
        "scalar_and_zero_size.safetensors": safetensors(
            [("scalar", "F32", (), np.array([7], dtype="<f4").tobytes()), ("zero", "F32", (0, 5), b"")]
        ),
        "unpadded_unaligned.safetensors": safetensors(
            [("x", "U8", (1,), b"\x09"), ("y", "F32", (1,), np.array([1], dtype="<f4").tobytes())], pad=False
        ),
    }
    # Escapes and non-ASCII names, as serde_json and other writers may spell them.
    escaped = b'{"caf\\u00e9\\n":{"dtype":"I32","shape":[1],"data_offsets":[0,4]},"\xc3\xa9t\\"\\\\":{"dtype":"U8","shape":[],"data_offsets":[4,5]}}'
    seeds["escaped_names.safetensors"] = safetensors(
        [("", "I32", (1,), b"\x01\x00\x00\x00"), ("", "U8", (), b"\x02")], header_text=escaped
    )
    # Refused: the tensors leave a gap in the data.
    gap = b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}}'
    seeds["refused_gap.safetensors"] = safetensors([("", "U8", (), b"\x01\x00\x02")], header_text=gap)
    for name, data in seeds.items():
        write("safetensors", name, data)


if __name__ == "__main__":
    npy_seeds()
    safetensors_seeds()

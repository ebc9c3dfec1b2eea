#!/usr/bin/python3
"""runtime/safetensors against safetensors files made in Python with json + struct (the
`safetensors` package is not installed, so its writer is re-implemented here from its rules):

  1. tightfit's writer produces exactly the reference writer's bytes (data ordered by dtype from
     widest then name, compact JSON with "__metadata__" first, header padded with spaces to 8);
  2. files other writers make (unpadded headers, name-ordered data, indented or ASCII-escaped JSON,
     Unicode names, BF16 from float32, empty and scalar tensors) read with the right dtype, shape,
     bytes and metadata, and every data pointer aligned;
  3. files tightfit writes parse with json + struct + numpy, and load into torch (when installed:
     torch.frombuffer for every dtype, BF16 included) with the expected values;
  4. a few malformed files are refused with exit code 2.

usage: safetensors_vs_python.py RTIO_TOOL      (exit 77 when numpy is missing)"""
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("numpy is not installed: skipped")
    sys.exit(77)
try:
    import torch
except ImportError:
    torch = None

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))  # tally
from rtio_check import fnv, refused  # noqa: E402
from tally import expect, finish  # noqa: E402

TOOL = sys.argv[1]

# name in files -> (bytes per element, rank in the reference's dtype order, numpy dtype or None)
DTYPES = {
    "U8": (1, 1, np.uint8), "F16": (2, 7, np.float16), "BF16": (2, 8, None), "I32": (4, 9, np.int32),
    "F32": (4, 11, np.float32), "F64": (8, 12, np.float64), "I64": (8, 13, np.int64), "I16": (2, 5, np.int16),
}
TF_NAMES = {"U8": "u8", "F16": "f16", "BF16": "bf16", "I32": "i32", "F32": "f32", "F64": "f64", "I64": "i64"}


def run(*args):
    result = subprocess.run([TOOL] + list(args), capture_output=True)
    return result.returncode, result.stdout.decode("utf-8"), result.stderr.decode("utf-8", "replace").strip()


def pattern(name, nbytes):
    """The bytes rtio_tool st-write puts in tensor `name`."""
    salt = 7 * len(name.encode("utf-8"))
    return bytes((j * 131 + salt) & 255 for j in range(nbytes))


def reference_bytes(tensors, metadata, order="reference", pad=True, dumps=None):
    """A safetensors file. tensors: {name: (dtype, shape, raw bytes)}. order "reference" lays data out
    by dtype (widest first) then name, as the Rust writer does; "name" by name only."""
    if order == "reference":
        names = sorted(tensors, key=lambda n: (-DTYPES[tensors[n][0]][1], n.encode("utf-8")))
    else:
        names = sorted(tensors, key=lambda n: n.encode("utf-8"))
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = dict(sorted(metadata.items()))
    for name in names:
        dtype, shape, raw = tensors[name]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = (dumps or (lambda h: json.dumps(h, separators=(",", ":"), ensure_ascii=False)))(header).encode("utf-8")
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(tensors[n][2] for n in names)


def parse(path):
    """A safetensors file read with json + struct: (metadata, {name: (dtype, shape, raw)}, header length, order)."""
    data = open(path, "rb").read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length].decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    body = data[8 + length:]
    tensors = {name: (info["dtype"], tuple(info["shape"]), body[info["data_offsets"][0]:info["data_offsets"][1]])
               for name, info in header.items()}
    order = [name for name, _ in sorted(header.items(), key=lambda item: item[1]["data_offsets"])]
    return metadata, tensors, length, order, data


def dump(path):
    """rtio_tool st-dump -> (exit code, metadata, {name: fields}, stderr)."""
    code, out, err = run("st-dump", path)
    metadata, tensors = {}, {}
    for line in out.splitlines():
        if line.startswith("meta "):
            key, value = line[5:].split("=", 1)
            metadata[key] = value
        elif line.startswith("tensor "):
            name, dtype, shape, count, nbytes, digest, aligned = line[7:].rsplit(" ", 6)
            tensors[name] = {"dtype": dtype, "shape": shape[6:], "fnv": digest[4:], "aligned": aligned[8:]}
    return code, metadata, tensors, err


def bf16_bytes(values):
    """float32 -> bfloat16 by truncation: the top 16 bits of each float."""
    return np.asarray(values, np.float32).view(np.uint32).__rshift__(16).astype("<u2").tobytes()


def sample_tensors():
    rng = np.random.default_rng(5)
    tensors = {
        "embed.weight": ("F32", (5, 3), rng.standard_normal((5, 3)).astype("<f4").tobytes()),
        "h.0.ln.bias": ("F16", (3,), rng.standard_normal(3).astype("<f2").tobytes()),
        "h.0.mlp.bf16": ("BF16", (2, 2), bf16_bytes(rng.standard_normal(4))),
        "position_ids": ("I64", (1, 4), np.arange(4, dtype="<i8").reshape(1, 4).tobytes()),
        "labels": ("I32", (3,), np.array([1, -2, 3], "<i4").tobytes()),
        "mask": ("U8", (5,), bytes([1, 0, 1, 1, 0])),
        "scale": ("F64", (), struct.pack("<d", 0.125)),
        "empty": ("F32", (0, 7), b""),
        "caf\u00e9 \u2603": ("F32", (2,), struct.pack("<2f", 1.5, -2.5)),
        "quote\"back\\slash": ("U8", (1,), b"\x07"),
        "short16": ("I16", (3,), np.array([1, 2, 3], "<i2").tobytes()),
    }
    metadata = {"format": "pt", "step": "1200", "note": "\u00fcber \"quoted\""}
    return tensors, metadata


def compare(path, tensors, metadata, label):
    code, got_metadata, got, err = dump(path)
    expect(code == 0, "%s: refused: %s" % (label, err))
    if code:
        return
    expect(got_metadata == metadata, "%s: metadata %r" % (label, got_metadata))
    expect(set(got) == set(tensors), "%s: names %r" % (label, sorted(got)))
    for name, (dtype, shape, raw) in tensors.items():
        fields = got.get(name)
        if not fields:
            continue
        expect(fields["dtype"] == dtype, "%s/%s: dtype %s" % (label, name, fields["dtype"]))
        expect(fields["shape"] == ",".join(map(str, shape)), "%s/%s: shape %s" % (label, name, fields["shape"]))
        expect(fields["fnv"] == fnv(raw), "%s/%s: bytes differ" % (label, name))
        expect(fields["aligned"] == "1", "%s/%s: data not aligned" % (label, name))


def main():
    with tempfile.TemporaryDirectory() as folder:
        # 1. Our writer == the reference writer's bytes.
        specs = [("w.f32", "F32", (3, 4)), ("b.f16", "F16", (5,)), ("g.bf16", "BF16", (1, 3, 1)),
                 ("ids", "I32", (7,)), ("pos", "I64", (2, 3)), ("mask", "U8", (9,)), ("s", "F64", ()),
                 ("none", "F32", (0, 4)), ("\u00e9t\u00e9\ttab", "U8", (2, 1)), ("a", "U8", (3,))]
        written_metadata = metadata = {"step": "42", "format": "pt", "z": "\"\\\n\u00e9"}
        ours = os.path.join(folder, "ours.safetensors")
        arguments = ["%s=%s" % kv for kv in metadata.items()]
        arguments += ["%s:%s:%s" % (n, TF_NAMES[d], ",".join(map(str, s))) for n, d, s in specs]
        code, _, err = run("st-write", ours, *arguments)
        expect(code == 0, "st-write failed: %s" % err)
        tensors = {n: (d, s, pattern(n, int(np.prod(s, dtype=np.int64)) * DTYPES[d][0])) for n, d, s in specs}
        expected = reference_bytes(tensors, metadata)
        written = open(ours, "rb").read()
        expect(written == expected,
               "our bytes differ from the reference layout:\n%r\n%r" % (written[:300], expected[:300]))
        print("1. tightfit's file (%d bytes, %d tensors, 3 metadata) equals the reference writer's bytes: %s"
              % (len(written), len(specs), written == expected))

        # 2. Files from other writers.
        tensors, metadata = sample_tensors()
        variants = {
            "reference": reference_bytes(tensors, metadata),
            "unpadded_name_order": reference_bytes(tensors, metadata, order="name", pad=False),
            "indented_ascii": reference_bytes(tensors, metadata, dumps=lambda h: json.dumps(h, indent=2)),
            "sorted_keys_spaces": reference_bytes(tensors, metadata, order="name",
                                                  dumps=lambda h: json.dumps(h, sort_keys=True) + "\n\t "),
            "no_metadata": reference_bytes(tensors, {}),
        }
        for label, data in variants.items():
            path = os.path.join(folder, label + ".safetensors")
            open(path, "wb").write(data)
            compare(path, tensors, metadata if label != "no_metadata" else {}, label)
        print("2. read %d files written by Python (json + struct): %s" % (len(variants), ", ".join(variants)))

        # 3. Our file read with json + struct + numpy, and by torch.
        got_metadata, got, length, order, data = parse(ours)
        expect(length % 8 == 0 and data[8:9] == b"{" and data[8 + length - 1:8 + length] in (b" ", b"}"),
               "header not padded to 8 / not starting with '{'")
        expect(got_metadata == written_metadata, "metadata read back %r" % got_metadata)
        widths = [DTYPES[got[name][0]][0] for name in order]
        expect(widths == sorted(widths, reverse=True), "data not ordered widest dtype first: %r" % order)
        offset = 8 + length
        for name in order:
            expect(offset % DTYPES[got[name][0]][0] == 0, "%s at file offset %d is unaligned" % (name, offset))
            offset += len(got[name][2])
        expect(offset == len(data), "tensors do not tile the data")
        for name, dtype, shape in specs:
            got_dtype, got_shape, raw = got[name]
            expect((got_dtype, got_shape) == (dtype, shape), "%s: %s %s" % (name, got_dtype, got_shape))
            expect(raw == pattern(name, len(raw)), "%s: bytes differ" % name)
            numpy_type = DTYPES[dtype][2]
            if numpy_type is not None:
                array = np.frombuffer(raw, dtype=np.dtype(numpy_type).newbyteorder("<")).reshape(shape)
                expect(array.shape == shape, "%s: numpy shape %s" % (name, array.shape))
        if torch is not None:
            torch_types = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "I32": torch.int32,
                           "I64": torch.int64, "U8": torch.uint8, "F64": torch.float64}
            for name, dtype, shape in specs:
                raw = got[name][2]
                tensor = (torch.frombuffer(bytearray(raw), dtype=torch_types[dtype]).reshape(shape) if raw
                          else torch.empty(shape, dtype=torch_types[dtype]))
                if dtype == "BF16":
                    # bf16 is the top half of a float32: compare through numpy.
                    expected_values = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
                    expect(np.array_equal(tensor.float().flatten().numpy(), expected_values, equal_nan=True),
                           "%s: torch bf16 values differ" % name)
                elif raw:
                    expected_array = np.frombuffer(raw, dtype=np.dtype(DTYPES[dtype][2]).newbyteorder("<"))
                    expect(np.array_equal(tensor.flatten().numpy(), expected_array, equal_nan=True),
                           "%s: torch values differ" % name)
                expect(tuple(tensor.shape) == shape, "%s: torch shape %s" % (name, tuple(tensor.shape)))
            print("3. our file parses with json + struct + numpy, and torch %s loads every tensor (BF16 included)"
                  % torch.__version__)
        else:
            print("3. our file parses with json + struct + numpy (torch not installed: torch check skipped)")

        # 4. Malformed files from Python.
        good = reference_bytes({"a": ("F32", (2,), b"\0" * 8)}, {})
        (length,) = struct.unpack("<Q", good[:8])
        broken = {
            "truncated": (good[:-1], "run past the end"),
            "lying_length": (struct.pack("<Q", length + 100) + good[8:], "truncated"),
            "huge_length": (struct.pack("<Q", 1 << 40) + good[8:], "exceeds the limit"),
            "bad_json": (struct.pack("<Q", 8) + b'{"a":1} ' + b"\0" * 8, "'{' opening a tensor entry"),
        }
        header = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                  "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}
        text = json.dumps(header).encode()
        broken["overlap"] = (struct.pack("<Q", len(text)) + text + b"\0" * 12, "overlap")
        for label, (data, phrase) in broken.items():
            path = os.path.join(folder, label + ".safetensors")
            open(path, "wb").write(data)
            code, _, _, err = dump(path)
            refused(label, path, phrase, code, err)
    finish("safetensors_vs_python")


if __name__ == "__main__":
    main()

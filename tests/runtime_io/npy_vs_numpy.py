#!/usr/bin/python3
"""runtime/npy against NumPy itself: files NumPy writes (np.save, all three format versions, odd
shapes) read with the right dtype, shape and bytes; files tightfit writes load in NumPy (also
memory-mapped) and are byte-identical to np.save's; what NumPy can write but tightfit refuses
(Fortran order, big-endian, objects, complex) is refused with exit code 2 and a clear message.

usage: npy_vs_numpy.py RTIO_TOOL      (exit 77 when numpy is missing)"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("numpy is not installed: skipped")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))  # tally
from rtio_check import fnv, refused  # noqa: E402
from tally import expect, finish  # noqa: E402

TOOL = sys.argv[1]


def run(*args):
    result = subprocess.run([TOOL] + list(args), capture_output=True, text=True)
    return result.returncode, result.stdout.strip(), result.stderr.strip()


NAMES = {np.float32: "f32", np.float64: "f64", np.float16: "f2", np.int32: "i32", np.int64: "i64", np.uint8: "u8"}
TF_NAMES = {np.float32: "f32", np.float64: "f64", np.float16: "f16", np.int32: "i32", np.int64: "i64",
            np.uint8: "u8"}


def sample(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.floating):
        return (rng.standard_normal(shape) * 100).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


def read_with_tool(path, array, label):
    code, out, err = run("npy-dump", path)
    expect(code == 0, "%s: tool refused: %s" % (label, err))
    if code != 0:
        return
    fields = dict(field.split("=", 1) for field in out.split())
    shape = ",".join(str(d) for d in array.shape)
    expect(fields["dtype"] == TF_NAMES[array.dtype.type], "%s: dtype %s" % (label, fields["dtype"]))
    expect(fields["shape"] == shape, "%s: shape %s, expected %s" % (label, fields["shape"], shape))
    expect(fields["fnv"] == fnv(array.tobytes()), "%s: data hash differs" % label)
    expect(fields["aligned"] == "1", "%s: data not aligned" % label)


def main():
    shapes = [(), (1,), (7,), (3, 4), (2, 3, 5), (0,), (4, 0, 2), (2,) * 8, (1000, 257)]
    with tempfile.TemporaryDirectory() as folder:
        # NumPy writes, tightfit reads.
        read = 0
        for dtype in NAMES:
            for i, shape in enumerate(shapes):
                array = sample(dtype, shape, i)
                for version in (None, (1, 0), (2, 0), (3, 0)):
                    path = os.path.join(folder, "np_%s_%d_%s.npy" % (NAMES[dtype], i, version))
                    with open(path, "wb") as f:
                        if version is None:
                            np.save(f, array)
                        else:
                            np.lib.format.write_array(f, array, version=version)
                    read_with_tool(path, array, os.path.basename(path))
                    read += 1
        print("read %d files written by NumPy %s (6 dtypes x 9 shapes x np.save + versions 1.0, 2.0, 3.0)"
              % (read, np.__version__))

        # tightfit writes, NumPy reads.
        written = 0
        for dtype in NAMES:
            for i, shape in enumerate(shapes):
                path = os.path.join(folder, "tf_%s_%d.npy" % (NAMES[dtype], i))
                code, _, err = run("npy-write", path, TF_NAMES[dtype], *[str(d) for d in shape])
                expect(code == 0, "%s: write failed: %s" % (path, err))
                if code != 0:
                    continue
                count = int(np.prod(shape, dtype=np.int64))
                nbytes = count * np.dtype(dtype).itemsize
                pattern = bytes((j * 131 + 7) & 255 for j in range(nbytes))
                loaded = np.load(path)
                mapped = np.load(path, mmap_mode="r")
                expect(loaded.dtype == np.dtype(dtype) and loaded.shape == shape, "%s: numpy sees %s %s"
                       % (path, loaded.dtype, loaded.shape))
                expect(loaded.tobytes() == pattern and mapped.tobytes() == pattern, "%s: data differs" % path)
                expect(loaded.flags["C_CONTIGUOUS"], "%s: not C order" % path)
                saved = os.path.join(folder, "np_resave.npy")
                np.save(saved, loaded)
                expect(open(saved, "rb").read() == open(path, "rb").read(),
                       "%s: bytes differ from np.save of the same array" % path)
                written += 1
        print("wrote %d files NumPy loads (also memory-mapped), each byte-identical to np.save" % written)

        # What NumPy can write but tightfit refuses.
        refusals = [
            ("fortran", np.asfortranarray(np.ones((3, 4), np.float32)), "fortran_order is True"),
            ("transposed", np.ones((3, 4), np.float32).T, "fortran_order is True"),
            ("big_endian", np.ones(4, dtype=">f4"), "unsupported dtype '>f4'"),
            ("object", np.array([1, "a"], dtype=object), "unsupported dtype '|O'"),
            ("complex", np.ones(3, np.complex64), "unsupported dtype '<c8'"),
            ("bool", np.ones(3, bool), "unsupported dtype '|b1'"),
            ("int16", np.ones(3, np.int16), "unsupported dtype '<i2'"),
            ("structured", np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]), "structured"),
        ]
        for name, array, phrase in refusals:
            path = os.path.join(folder, name + ".npy")
            np.save(path, array, allow_pickle=True)
            code, _, err = run("npy-dump", path)
            refused(name, path, phrase, code, err)
    finish("npy_vs_numpy")


if __name__ == "__main__":
    main()

"""Writes the bad .npy data folders and bad safetensors files that docs/errors.md catalogues.

usage: make_inputs.py DIR   (run from the repository root, after DIR/ck/latest.safetensors exists:
a real checkpoint of the mlp plan, which the checkpoint cases edit)

Every file is made from scratch or from the checked-in digits data, so the messages (which quote
sizes and offsets) are the same on every machine.
"""
import json
import os
import shutil
import struct
import sys

import numpy as np

out = sys.argv[1]
digits = "models/data/digits/train"
x = np.load(f"{digits}/x.npy")
labels = np.load(f"{digits}/labels.npy")


def folder(name, with_labels=True):
    path = os.path.join(out, name)
    os.makedirs(path)
    if with_labels:
        shutil.copy(f"{digits}/labels.npy", path)
    return path


def npy_raw(path, header, data=b"", version=(1, 0)):
    """A .npy file with a hand-written header dict (padded as NumPy pads it) and raw data."""
    text = header.encode("latin1")
    prefix = 10 if version[0] == 1 else 12
    total = prefix + len(text) + 1
    text += b" " * ((64 - total % 64) % 64) + b"\n"
    length = struct.pack("<H", len(text)) if version[0] == 1 else struct.pack("<I", len(text))
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY" + bytes(version) + length + text + data)


# ---- .npy data folders for the mlp plan (input x f32 [N,64], label labels i32 [N]) ----
np.save(os.path.join(folder("x_f64"), "x.npy"), x.astype(np.float64))
np.save(os.path.join(folder("x_f16"), "x.npy"), x.astype(np.float16))
d = folder("labels_i64", with_labels=False)
np.save(f"{d}/x.npy", x)
np.save(f"{d}/labels.npy", labels.astype(np.int64))
d = folder("labels_f32", with_labels=False)
np.save(f"{d}/x.npy", x)
np.save(f"{d}/labels.npy", labels.astype(np.float32))
np.save(os.path.join(folder("x_63"), "x.npy"), x[:, :63].copy())
np.save(os.path.join(folder("x_3d"), "x.npy"), x.reshape(1437, 8, 8))
np.save(os.path.join(folder("x_flat"), "x.npy"), x.reshape(-1)[:1437].copy())
# ---- for the asr plan (mel f32 [N,80,100], tokens and labels i32 [N,8]): time-major features ----
d = folder("mel_time_major", with_labels=False)
np.save(f"{d}/mel.npy", np.zeros((4, 100, 80), np.float32))
np.save(f"{d}/tokens.npy", np.zeros((4, 8), np.int32))
np.save(f"{d}/labels.npy", np.zeros((4, 8), np.int32))
whole = open(f"{digits}/x.npy", "rb").read()
open(os.path.join(folder("x_truncated"), "x.npy"), "wb").write(whole[:1000])
open(os.path.join(folder("x_trailing"), "x.npy"), "wb").write(whole + b"\0\0\0\0")
open(os.path.join(folder("x_text"), "x.npy"), "wb").write(b"0.5,0.25,0.125\n" * 8)
open(os.path.join(folder("x_tiny"), "x.npy"), "wb").write(b"\x93NUM")
open(os.path.join(folder("x_empty"), "x.npy"), "wb").write(b"")
np.save(os.path.join(folder("x_fortran"), "x.npy"), np.asfortranarray(x))
np.save(os.path.join(folder("x_bigendian"), "x.npy"), x.astype(">f4"))
np.save(os.path.join(folder("x_complex"), "x.npy"), x.astype(np.complex64))
np.save(os.path.join(folder("x_bool"), "x.npy"), x > 0)
np.save(os.path.join(folder("x_record"), "x.npy"), np.zeros(1437, dtype=[("a", "<f4"), ("b", "<i4")]))
v4 = bytearray(whole)
v4[6] = 4
open(os.path.join(folder("x_version4"), "x.npy"), "wb").write(bytes(v4))
hdr = bytearray(whole[:200])
hdr[8:10] = struct.pack("<H", 1000)
open(os.path.join(folder("x_header_past_end"), "x.npy"), "wb").write(bytes(hdr))
npy_raw(os.path.join(folder("x_not_tuple"), "x.npy"),
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1437), }", x.tobytes())
npy_raw(os.path.join(folder("x_extra_key"), "x.npy"),
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1437, 64), 'units': 'px', }", x.tobytes())
npy_raw(os.path.join(folder("x_no_shape"), "x.npy"), "{'descr': '<f4', 'fortran_order': False, }", x.tobytes())
npy_raw(os.path.join(folder("x_bad_dict"), "x.npy"), "{'descr': '<f4', 'fortran_order': False, 'shape': [1437, 64], }",
        x.tobytes())
npy_raw(os.path.join(folder("x_huge_shape"), "x.npy"),
        "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }")
os.makedirs(os.path.join(folder("x_folder"), "x.npy"))
folder("no_labels", with_labels=False)
np.save(os.path.join(out, "no_labels", "x.npy"), x)
# A token stream of the wrong dtype for the gpt plan (tokens i32 [N,T]).
tokens = np.load("models/data/text/train/tokens.npy")
d = folder("tokens_f32", with_labels=False)
np.save(f"{d}/tokens.npy", tokens.astype(np.float32))


# ---- safetensors files (used as `run --weights F` and as `train --checkpoint D --resume`) ----
def st_raw(name, header, data=b""):
    """A safetensors file from a header given as raw text (so it can repeat keys or be broken)."""
    text = header.encode()
    with open(os.path.join(out, name), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def st_tensors(name, tensors, metadata=None):
    """A well-formed safetensors file: tensors is a list of (name, dtype, shape, begin, end)."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    end = 0
    for tname, dtype, shape, b, e in tensors:
        header[tname] = {"dtype": dtype, "shape": shape, "data_offsets": [b, e]}
        end = max(end, e)
    st_raw(name, json.dumps(header), b"\0" * end)


open(os.path.join(out, "st_tiny.safetensors"), "wb").write(b"\x10\0\0\0")
open(os.path.join(out, "st_text.safetensors"), "wb").write(b"this is not a checkpoint, just some text\n")
with open(os.path.join(out, "st_short_header.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", 1000) + b'{"a": 1}')
st_raw("st_bad_json.safetensors", '{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8],}}', b"\0" * 8)
st_raw("st_not_object.safetensors", '[1, 2, 3]')
st_raw("st_dup_name.safetensors",
       '{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},'
       ' "w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}', b"\0" * 8)
st_raw("st_dup_meta.safetensors",
       '{"__metadata__": {"tightfit.optimizer_step": "1", "tightfit.optimizer_step": "2"},'
       ' "w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}', b"\0" * 4)
st_tensors("st_past_end.safetensors", [("w", "F32", [4], 0, 16)])
with open(os.path.join(out, "st_past_end.safetensors"), "r+b") as f:  # cut the data to 8 bytes
    f.truncate(os.path.getsize(f.name) - 8)
st_tensors("st_backwards.safetensors", [("w", "F32", [1], 8, 4)])
st_tensors("st_size.safetensors", [("w", "F32", [3], 0, 8)])
st_tensors("st_dtype.safetensors", [("w", "F33", [2], 0, 8)])
st_tensors("st_gap.safetensors", [("w", "F32", [1], 4, 8)])
st_tensors("st_overlap.safetensors", [("a", "F32", [2], 0, 8), ("b", "F32", [2], 4, 12)])
st_tensors("st_no_counters.safetensors", [("w", "F32", [1], 0, 4)])


def edit_checkpoint(target, metadata=None, rename=None, reshape=None):
    """The mlp checkpoint DIR/ck/latest.safetensors with metadata values set, a tensor renamed or
    a tensor's shape changed; the data bytes are kept as they are."""
    raw = open(os.path.join(out, "ck", "latest.safetensors"), "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    header["__metadata__"].update(metadata or {})
    if rename:
        header[rename[1]] = header.pop(rename[0])
    if reshape:
        header[reshape[0]]["shape"] = reshape[1]
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    os.makedirs(os.path.dirname(os.path.join(out, target)), exist_ok=True)
    with open(os.path.join(out, target), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


edit_checkpoint("ck_micro_huge/latest.safetensors", {"tightfit.micro_step": "300000000000000000"})
edit_checkpoint("ck_step_text/latest.safetensors", {"tightfit.optimizer_step": "twelve"})
edit_checkpoint("ck_micro_fewer/latest.safetensors", {"tightfit.optimizer_step": "5", "tightfit.micro_step": "4"})
edit_checkpoint("ck_accumulate_zero/latest.safetensors", {"tightfit.accumulate": "0"})
edit_checkpoint("ck_micro_ahead/latest.safetensors", {"tightfit.micro_step": "3"})
edit_checkpoint("ck_renamed.safetensors", rename=("hidden.0.weight", "hidden.0.weights"))
edit_checkpoint("ck_reshaped.safetensors", reshape=("hidden.0.weight", [64, 128]))
edit_checkpoint("ck_step_negative/latest.safetensors", {"tightfit.optimizer_step": "-1"})


def checkpoint_with_value(target, tensor, element, value):
    """The mlp checkpoint with one element of `tensor` (f32) replaced by `value` (NaN, inf)."""
    raw = bytearray(open(os.path.join(out, "ck", "latest.safetensors"), "rb").read())
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    struct.pack_into("<f", raw, 8 + n + header[tensor]["data_offsets"][0] + 4 * element, value)
    # as another writer's file (no checksum of this tensor), so the finite check, not the checksum, refuses it
    key = ('"tightfit.xxh64.%s"' % tensor).encode()
    raw[:8 + n] = raw[:8 + n].replace(key, key.replace(b"xxh64", b"xxh00"))
    os.makedirs(os.path.dirname(os.path.join(out, target)), exist_ok=True)
    open(os.path.join(out, target), "wb").write(raw)


checkpoint_with_value("ck_inf/latest.safetensors", "head.weight", 3, float("inf"))

# ---- E320: one bit flipped in a checkpoint's head.weight (finite), its checksum kept (issue 49) ----
flipped = bytearray(open(os.path.join(out, "ck", "latest.safetensors"), "rb").read())
n_flipped = struct.unpack("<Q", flipped[:8])[0]
flipped[8 + n_flipped + json.loads(flipped[8:8 + n_flipped])["head.weight"]["data_offsets"][0] + 4 * 3 + 3] ^= 0x40
open(os.path.join(out, "ck_flipped.safetensors"), "wb").write(flipped)

# ---- data values, checked at feed open ----
bad = x.copy()
bad[77, 5] = np.nan
np.save(os.path.join(folder("data_nan"), "x.npy"), bad)
path = folder("data_short_labels", with_labels=False)
np.save(os.path.join(path, "x.npy"), x)
np.save(os.path.join(path, "labels.npy"), labels[:10])
path = folder("data_label_range", with_labels=False)
np.save(os.path.join(path, "x.npy"), x)
bad = labels.copy()
bad[50] = 10
np.save(os.path.join(path, "labels.npy"), bad)
tokens = np.load("models/data/text/train/tokens.npy")
bad = tokens.copy()
bad[50] = 999
np.save(os.path.join(folder("tokens_range", with_labels=False), "tokens.npy"), bad)
np.save(os.path.join(folder("tokens_short", with_labels=False), "tokens.npy"), tokens[:64])

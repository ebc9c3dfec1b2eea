#!/usr/bin/env python3
"""Random training data for a graph's inputs and labels, for benches that time steps (not accuracy).

One .npy per input and label of the graph at `samples` samples (the graph's symbols bound by --set,
N set to samples): floats normal(0, 1), integers uniform in [0, high) with high per input name
(--ints, else the preset's table below). Token models that read a 1-D tokens.npy stream (the zoo's
gpt family: inputs `tokens`, labels `labels`, both [N, T] i32) get models/data/text's stream instead.
A gpt whose vocabulary is under 128 (a `vocab` knob, --ints) gets random tokens instead.
Reproducible (fixed seeds); large float arrays repeat a 1 Mi-value block (shapes, not information).
Standard library only: the GPU machines' python may lack NumPy.

Used by bench/edge/run (the budget-edge scenarios) and scripts/gpu-verify (the step-time items of a
bench model other than a gpt).

usage: bench/synthdata.py OUT --graph G.tfg [--set K=V,...] [--samples N] [--ints NAME=HIGH,...]
                          [--preset CONFIG] [--tightfit PATH]
Prints one JSON line: {"folder", "stream", "files", "label_positions"} where label_positions is the
number of label elements a sample has (the positions the loss covers: T for a gpt, 64 + Ta for
xtts-gpt, U for the asr models). Exit 0, or 2 with a message naming the input that could not be made.
"""
import argparse
import json
import os
import random
import shutil
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The exclusive upper bound of each integer input and label of the zoo's presets (their vocabularies).
PRESET_INTS = {
    "xtts-gpt": {"text_tokens": 6681, "text_labels": 6681, "audio_codes": 1026, "audio_labels": 1026},
    "asr-256-12-6": {"tokens": 5000, "labels": 5000},
    "asr-192-8-4": {"tokens": 5000, "labels": 5000},
    "asr-128-6-3": {"tokens": 5000, "labels": 5000},
    "vit-b16": {"labels": 1000},
}
# The zoo knobs that set a vocabulary, and the inputs it bounds ("asr-128-6-3 vocab=300").
VOCAB_KNOBS = {"vocab": ("tokens", "labels"), "text_vocab": ("text_tokens", "text_labels"),
               "audio_vocab": ("audio_codes", "audio_labels"), "classes": ("labels",)}


class DataError(Exception):
    """The data could not be made (inspect failed, an integer input without a range, a dtype)."""


def write_npy(path, dtype, shape, values):
    """values: bytes of the array in C order; dtype '<f4', '<i4' or '<i8' (NumPy 1.0 format)."""
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        dtype, "".join("%d, " % d for d in shape) if len(shape) != 1 else "%d," % shape[0])
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(values)


def array_bytes(kind, count, high, seed):
    """count values: normal floats (kind f) or integers in [0, high) (kind i: int32, q: int64),
    reproducible. Large arrays repeat a 1 Mi-value block."""
    if count == 0:
        return b""
    rng = random.Random(seed)
    block = min(count, 1 << 20)
    if kind == "f":
        data = struct.pack("<%df" % block, *(rng.gauss(0.0, 1.0) for _ in range(block)))
    else:
        data = struct.pack("<%d%s" % (block, kind), *(rng.randrange(high) for _ in range(block)))
    whole, rest = divmod(count, block)
    return data * whole + data[:len(data) // block * rest]


def inspect(tf, graph, sets, samples):
    """`tightfit inspect --json` of the graph with its symbols bound (N = samples)."""
    bindings = [b for s in sets for b in s.split(",") if b and not b.startswith("N=")] + ["N=%d" % samples]
    command = [tf, "inspect", graph, "--set", ",".join(bindings), "--json"]
    try:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as e:
        raise DataError("%s: cannot run: %s" % (tf, e))
    if done.returncode != 0:
        raise DataError("%s: exit %d: %s" % (" ".join(command[:3]), done.returncode, done.stderr.strip()[-400:]))
    try:
        return json.loads(done.stdout)
    except ValueError as e:
        raise DataError("%s printed no JSON: %s" % (" ".join(command[:3]), e))


def label_positions(info):
    """Label elements per sample: the product of each label's dims after the first (the batch)."""
    total = 0
    for tensor in info["labels"]:
        count = 1
        for d in tensor["shape"][1:]:
            count *= d
        total += count
    return total


def make_data(tf, graph, sets, ints, samples, folder):
    """Writes the data into folder; returns {"folder", "stream", "files", "label_positions"}.
    sets: --set strings ("T=750,U=448"); ints: {input name: exclusive upper bound}."""
    os.makedirs(folder, exist_ok=True)
    info = inspect(tf, graph, sets, samples)
    result = {"folder": folder, "stream": False, "files": [], "label_positions": label_positions(info)}
    names = [t["name"] for t in info["inputs"] + info["labels"]]
    # the text stream's tokens are in [0, 128): a smaller vocabulary gets random tokens instead
    text_fits = ints.get("tokens", 128) >= 128 and ints.get("labels", 128) >= 128
    if names == ["tokens", "labels"] and info["inputs"][0]["dtype"] == "i32" and len(info["inputs"][0]["shape"]) == 2 \
            and text_fits:
        shutil.copy(os.path.join(ROOT, "models", "data", "text", "train", "tokens.npy"), folder)
        result.update(stream=True, files=["tokens.npy"])
        return result
    for seed, tensor in enumerate(info["inputs"] + info["labels"]):
        count = 1
        for d in tensor["shape"]:
            count *= d
        if tensor["dtype"] == "f32":
            data, dtype = array_bytes("f", count, 0, seed), "<f4"
        elif tensor["dtype"] in ("i32", "i64"):
            if tensor["name"] not in ints:
                raise DataError("no value range for the integer input '%s' (give --ints %s=HIGH)" %
                                (tensor["name"], tensor["name"]))
            wide = tensor["dtype"] == "i64"
            data, dtype = array_bytes("q" if wide else "i", count, ints[tensor["name"]], seed), "<i8" if wide else "<i4"
        else:
            raise DataError("input '%s' of dtype %s: this writes f32, i32 and i64" % (tensor["name"], tensor["dtype"]))
        write_npy(os.path.join(folder, tensor["name"] + ".npy"), dtype, tensor["shape"], data)
        result["files"].append(tensor["name"] + ".npy")
    return result


def config_ints(config):
    """The integer ranges of a model config: its preset's table, then its vocabulary knobs."""
    words = config.split()
    ints = dict(PRESET_INTS.get(words[0], {})) if words else {}
    for word in words[1:]:
        knob, _, value = word.partition("=")
        for name in VOCAB_KNOBS.get(knob, ()):
            if value.isdigit():
                ints[name] = int(value)
    return ints


def parse_ints(text):
    ints = {}
    for word in filter(None, (text or "").split(",")):
        name, sep, high = word.partition("=")
        if not sep or not high.isdigit() or int(high) < 1:
            raise DataError("--ints takes NAME=HIGH with HIGH >= 1, not '%s'" % word)
        ints[name] = int(high)
    return ints


def main(argv):
    p = argparse.ArgumentParser(prog="bench/synthdata.py", description=__doc__.split("\n\n")[0])
    p.add_argument("out", help="the folder to write (made if missing)")
    p.add_argument("--graph", required=True, help="the .tfg graph whose inputs and labels are written")
    p.add_argument("--set", default="", help="symbol bindings as `tightfit compile --set` takes them (N is --samples)")
    p.add_argument("--samples", type=int, default=16, help="samples to write (default 16)")
    p.add_argument("--ints", default="", help="NAME=HIGH,...: integer inputs' exclusive upper bounds")
    p.add_argument("--preset", default="", help="a zoo preset, or a config ('asr-128-6-3 vocab=300'), whose "
                   "vocabularies give the integer ranges")
    p.add_argument("--tightfit", default=os.path.join(ROOT, "build", "tightfit"), help="the tightfit CLI")
    args = p.parse_args(argv)
    try:
        if args.samples < 1:
            raise DataError("--samples must be at least 1")
        ints = config_ints(args.preset)
        ints.update(parse_ints(args.ints))
        print(json.dumps(make_data(args.tightfit, args.graph, [args.set], ints, args.samples, args.out)))
    except DataError as e:
        print("synthdata: %s" % e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

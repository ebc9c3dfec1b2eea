#!/usr/bin/env python3
"""Regenerates the malformed-graph corpus in tests/data/bad/ and its manifest expected.txt.

Each case starts from a valid zoo graph, written by `tightfit zoo` and turned into JSON by
`tightfit dump`, changes one thing, and turns it back into a binary with `flatc -b`; byte-level
cases (empty, garbage, truncated, wrong identifier, bit flip) edit the binary. The manifest pairs
every file with a phrase its error message must contain.

usage: tests/bad/make_corpus.py BUILD_DIR      (run from the repository root)
"""
import copy
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "data", "bad")
GOOD = os.path.join(ROOT, "tests", "data", "good")
SCHEMA = os.path.join(ROOT, "schema", "graph.fbs")


def run(*args):
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)


def base_graph(tightfit, tmp, preset, params=()):
    path = os.path.join(tmp, preset + ".tfg")
    args = [tightfit, "zoo", preset, "-o", path]
    for p in params:
        args += ["--param", p]
    run(*args)
    text = subprocess.run([tightfit, "dump", path], check=True, capture_output=True, text=True).stdout
    with open(path, "rb") as f:
        return json.loads(text), f.read()


def to_binary(graph, tmp, name):
    json_path = os.path.join(tmp, name + ".json")
    with open(json_path, "w") as f:
        json.dump(graph, f)
    run("flatc", "-b", "-o", tmp, SCHEMA, json_path)
    with open(os.path.join(tmp, name + ".tfg"), "rb") as f:
        return f.read()


def tensor_id(graph, name):
    return next(i for i, t in enumerate(graph["tensors"]) if t["name"] == name)


def node_index(graph, op):
    return next(i for i, n in enumerate(graph["nodes"]) if n["op"] == op)


def semantic_cases(mlp, cnn):
    """(file stem, graph, expected phrase): one change each."""
    cases = []

    def case(stem, phrase, base=mlp):
        g = copy.deepcopy(base)
        cases.append((stem, g, phrase))
        return g

    case("newer_version", "newer tightfit")["version"] = 2
    del case("missing_version", "missing schema version")["version"]
    case("input_id_out_of_range", "outside")["nodes"][0]["inputs"][0] = 9999
    case("output_id_out_of_range", "outside")["nodes"][1]["outputs"][0] = -5
    g = case("cycle", "cycle")
    g["nodes"][0]["inputs"][0] = g["nodes"][1]["outputs"][0]
    g = case("arity", "takes 2")
    g["nodes"][node_index(g, "add")]["inputs"] = g["nodes"][node_index(g, "add")]["inputs"][:1]
    g = case("shape_mismatch", "hidden.0.weight")
    g["tensors"][tensor_id(g, "hidden.0.weight")]["shape"][1]["size"] = 63
    case("negative_dim", "negative")["tensors"][tensor_id(mlp, "x")]["shape"][1]["size"] = -3
    case("unknown_symbol", "unknown symbol")["tensors"][tensor_id(mlp, "x")]["shape"][0]["symbol"] = 7
    g = case("bytes_overflow", "overflows")
    g["tensors"][tensor_id(g, "hidden.0.weight")]["shape"] = [{"size": 1 << 40, "symbol": -1},
                                                              {"size": 1 << 40, "symbol": -1}]
    case("unknown_op", "unknown op 999")["nodes"][0]["op"] = 999
    case("unknown_dtype", "unknown dtype 77")["tensors"][0]["dtype"] = 77
    g = case("attrs_mismatch", "takes matmul attributes")
    g["nodes"][0]["attrs_type"] = "ConvAttrs"
    g["nodes"][0]["attrs"] = {}
    g = case("two_producers", "written by two nodes")
    g["nodes"][1]["outputs"] = list(g["nodes"][0]["outputs"])
    g = case("never_written", "never written")
    g["tensors"].append({"name": "orphan", "dtype": "f32", "kind": "activation"})
    g = case("symbolic_parameter", "parameter shapes must be fixed")
    g["tensors"][tensor_id(g, "hidden.0.bias")]["shape"][0] = {"size": 1, "symbol": 0}
    g = case("loss_not_scalar", "must be an f32 scalar")
    g["loss"] = tensor_id(g, "logits")
    g = case("duplicate_name", "used twice")
    g["tensors"][1]["name"] = g["tensors"][0]["name"]
    g = case("external_without_file", "external initializer")
    g["tensors"][tensor_id(g, "hidden.0.weight")]["init"] = {"kind": "external"}
    g = case("rank_too_large", "rank")
    g["tensors"][tensor_id(g, "x")]["shape"] = [{"size": 1, "symbol": -1}] * 9
    g = case("parameter_without_init", "no initializer")
    del g["tensors"][tensor_id(g, "hidden.0.bias")]["init"]
    g = case("conv_zero_stride", "stride", base=cnn)
    conv = g["nodes"][node_index(g, "conv2d")]
    conv["attrs"]["stride"] = [0, 0]
    g = case("pool_kernel_too_big", "max_pool2d", base=cnn)
    g["nodes"][node_index(g, "max_pool2d")]["attrs"]["kernel"] = [64, 64]
    g = case("integer_parameter", "floating point")
    g["tensors"][tensor_id(g, "hidden.0.bias")]["dtype"] = "i32"
    g = case("name_too_long", "names are at most 255 bytes")
    g["nodes"][1]["name"] = "n" * 256
    g = case("unknown_precision_override", "node 2 'hidden.0/relu' (relu) has unknown precision override 7")
    g["nodes"][2]["precision"] = 7
    return cases


def byte_cases(valid):
    flipped = bytearray(valid)
    # The root offset: pointing it past the end is refused by the Verifier.
    flipped[0:4] = (len(valid) + 4096).to_bytes(4, "little")
    wrong_id = bytearray(valid)
    wrong_id[4:8] = b"TFPL"
    return [
        ("empty", b"", "empty"),
        ("garbage", b"this is a text file, not a tightfit graph\n" * 3, "identifier"),
        ("too_short", b"TFG", "too short"),
        ("truncated", valid[: len(valid) // 2], "corrupt or truncated"),
        ("wrong_identifier", bytes(wrong_id), "TFPL"),
        ("bad_root_offset", bytes(flipped), "corrupt or truncated"),
    ]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    tightfit = os.path.join(os.path.abspath(sys.argv[1]), "tightfit")
    os.makedirs(OUT, exist_ok=True)
    os.makedirs(GOOD, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        mlp, mlp_bytes = base_graph(tightfit, tmp, "mlp", ["layers=1"])
        cnn, cnn_bytes = base_graph(tightfit, tmp, "cnn")
        for name, data in (("mlp-1.tfg", mlp_bytes), ("cnn.tfg", cnn_bytes)):
            with open(os.path.join(GOOD, name), "wb") as f:
                f.write(data)
        entries = []
        for stem, graph, phrase in semantic_cases(mlp, cnn):
            entries.append((stem, to_binary(graph, tmp, stem), phrase))
        entries += byte_cases(mlp_bytes)
    for old in os.listdir(OUT):
        os.remove(os.path.join(OUT, old))
    with open(os.path.join(OUT, "expected.txt"), "w") as manifest:
        manifest.write("# file<TAB>phrase the error message must contain (tests/bad/make_corpus.py writes this)\n")
        for stem, data, phrase in entries:
            with open(os.path.join(OUT, stem + ".tfg"), "wb") as f:
                f.write(data)
            manifest.write(f"{stem}.tfg\t{phrase}\n")
    print(f"wrote {len(entries)} malformed graphs to {os.path.relpath(OUT, ROOT)}")


if __name__ == "__main__":
    main()

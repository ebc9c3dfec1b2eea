"""The Python package's hand-written mirrors of C structs and enum constants (python/tightfit/_lib.py)
against the C compiler's own layout, printed by struct_layout.c: every ctypes member at the C member's
offset with its size, every struct the C struct's size (PlanHead: a prefix of tf_plan), every constant
the C value. A C struct that gains, loses or moves a member fails here before a Python call reads
garbage. Usage: test_struct_layout.py STRUCT_LAYOUT_BINARY"""
import ctypes
import json
import subprocess
import sys

from tally import expect, finish
from tightfit import _lib


def compare_struct(name, c):
    cls = getattr(_lib, name)
    python_members = {field[0]: getattr(cls, field[0]) for field in cls._fields_}
    for member, (offset, size) in c["members"].items():
        if member not in python_members:
            expect(False, f"{name}: {c['c']}.{member} has no ctypes member")
            continue
        descriptor = python_members[member]
        expect(descriptor.offset == offset and descriptor.size == size,
               f"{name}.{member}: ctypes offset {descriptor.offset} size {descriptor.size}, "
               f"C {c['c']}.{member} offset {offset} size {size}")
    for member in python_members:
        expect(member in c["members"], f"{name}.{member}: struct_layout.c lists no such member of {c['c']}")
    if name == "PlanHead":  # the leading members only
        expect(ctypes.sizeof(cls) <= c["size"],
               f"PlanHead: {ctypes.sizeof(cls)} bytes, more than tf_plan's {c['size']}")
    else:
        expect(ctypes.sizeof(cls) == c["size"], f"{name}: ctypes size {ctypes.sizeof(cls)}, C {c['c']} {c['size']}")


def expected_constants():
    """The Python side's constants under their C names."""
    out = {"TF_MAX_RANK": _lib.MAX_RANK,
           "TF_ROLE_PARAMETER": _lib.ROLE_PARAMETER, "TF_ROLE_INPUT": _lib.ROLE_INPUT,
           "TF_ROLE_LABEL": _lib.ROLE_LABEL, "TF_ROLE_STATE": _lib.ROLE_STATE}
    out.update({f"TF_{name.upper()}": value for name, value in _lib.DTYPES.items()})
    out.update({f"TF_INIT_{name.upper()}": value for name, value in _lib.INIT.items()})
    out.update({f"TF_OPTIMIZER_{name.upper()}": value for name, value in _lib.OPTIMIZERS.items()})
    precision = {"f32": "F32", "fp32": "F32", "bf16": "BF16", "f16": "F16", "fp16": "F16"}
    out.update({f"TF_PRECISION_{precision[name]}": value for name, value in _lib.PRECISIONS.items()})
    out.update({f"TF_ONNX_LOSS_{(name or 'none').upper()}": value for name, value in _lib.ONNX_LOSSES.items()})
    return out


def main():
    layout = json.loads(subprocess.run([sys.argv[1]], capture_output=True, text=True, check=True).stdout)
    mirrored = sorted(name for name in dir(_lib) if isinstance(getattr(_lib, name), type)
                      and issubclass(getattr(_lib, name), ctypes.Structure))
    expect(mirrored == sorted(layout["structs"]),
           f"ctypes structs {mirrored} but struct_layout.c prints {sorted(layout['structs'])}: list each in both")
    for name, c in layout["structs"].items():
        if hasattr(_lib, name):
            compare_struct(name, c)
    python = expected_constants()
    for name, value in python.items():
        expect(name in layout["constants"], f"{name}: struct_layout.c prints no such constant")
        expect(layout["constants"].get(name) == value, f"{name}: Python {value}, C {layout['constants'].get(name)}")
    expect(_lib.PlanHead.region_bytes.size == 8 * layout["constants"]["TF_REGION_COUNT"],
           f"PlanHead.region_bytes: {_lib.PlanHead.region_bytes.size // 8} regions, C TF_REGION_COUNT "
           f"{layout['constants']['TF_REGION_COUNT']}")
    finish(f"{len(layout['structs'])} structs, {len(python)} constants")


main()

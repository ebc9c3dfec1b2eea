"""What npy_vs_numpy.py and safetensors_vs_python.py share about rtio_tool's answers: the FNV-1a hash it
prints of a tensor's bytes, and the check of a file it must refuse."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))  # tally
from tally import expect  # noqa: E402


def fnv(data):
    """FNV-1a (64 bits) of a byte string as 16 hex digits."""
    h = 1469598103934665603
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def refused(label, path, phrase, code, err):
    """rtio_tool refused `path` (`label`): exit code 2 and a message naming the file with `phrase`."""
    expect(code == 2 and phrase in err and path in err,
           "%s: expected refusal with %r, got %d %s" % (label, phrase, code, err))
    print("  refused %-12s %s" % (label, err))

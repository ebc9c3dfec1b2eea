"""FNV-1a (64 bits) of a byte string as 16 hex digits: the hash rtio_tool prints of a tensor's bytes, which
npy_vs_numpy.py and safetensors_vs_python.py compare with the bytes they expect."""


def fnv(data):
    h = 1469598103934665603
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h

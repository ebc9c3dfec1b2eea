"""XXH64, the per-tensor checksum tightfit's safetensors files carry in their metadata
("tightfit.xxh64.NAME": 16 hex digits; common/xxh64.c is the C side): the Python package rewrites a
tensor of such a file in place (from_torch's running statistics) and must write its checksum too."""

_M = (1 << 64) - 1
P1, P2, P3, P4, P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63,
                      0x27D4EB2F165667C5)
PREFIX = "tightfit.xxh64."


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & _M


def _round(acc, value):
    return (_rotl((acc + value * P2) & _M, 31) * P1) & _M


def _merge(acc, value):
    return ((acc ^ _round(0, value)) * P1 + P4) & _M


def xxh64(data, seed=0):
    """The XXH64 of `data` (bytes) as an int."""
    n, p = len(data), 0
    if n >= 32:
        v = [(seed + P1 + P2) & _M, (seed + P2) & _M, seed, (seed - P1) & _M]
        while p + 32 <= n:
            for i in range(4):
                v[i] = _round(v[i], int.from_bytes(data[p + 8 * i:p + 8 * i + 8], "little"))
            p += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M
        for lane in v:
            h = _merge(h, lane)
    else:
        h = (seed + P5) & _M
    h = (h + n) & _M
    while p + 8 <= n:
        h = (_rotl(h ^ _round(0, int.from_bytes(data[p:p + 8], "little")), 27) * P1 + P4) & _M
        p += 8
    if p + 4 <= n:
        h = (_rotl(h ^ (int.from_bytes(data[p:p + 4], "little") * P1 & _M), 23) * P2 + P3) & _M
        p += 4
    while p < n:
        h = (_rotl(h ^ (data[p] * P5 & _M), 11) * P1) & _M
        p += 1
    h ^= h >> 33
    h = (h * P2) & _M
    h ^= h >> 29
    h = (h * P3) & _M
    return h ^ (h >> 32)

"""Arrays fed to a plan's inputs and labels, converted only where no value can change: an integer
input takes integer arrays whose every value fits (no truncated floats, no wrapped ints), a float
input integer or float arrays; strings, objects and bools are refused, and so is a wrong shape."""
from ._lib import TightfitError

_INTEGER_TYPES = {"i32": "int32", "i64": "int64", "u8": "uint8"}
_FLOAT_TYPES = {"f32": "float32", "f16": "float16", "bf16": "float32"}  # bf16: float32, rounded later


class InputTypeError(TightfitError, TypeError):
    """An input or label array of a kind the plan's dtype would take only by an unsafe cast (a float
    array for integer data, or strings, objects, bools, complex numbers)."""


class InputValueError(TightfitError, ValueError):
    """An input or label array whose values do not fit the plan's integer dtype, or whose shape is not
    the plan's."""


def _describe(name, dtype, shape):
    return f"{name!r} ({dtype} {list(shape)})" if shape is not None else f"{name!r} ({dtype})"


def _check_kind(np, name, dtype, shape, array):
    """Raises InputTypeError unless `array`'s kind converts to `dtype` without losing a value's meaning."""
    allowed = "iu" if dtype in _INTEGER_TYPES else "iuf"
    if array.dtype.kind in allowed:
        return
    if dtype in _INTEGER_TYPES and array.dtype.kind == "f":
        raise InputTypeError(f"{_describe(name, dtype, shape)}: got an array of dtype {array.dtype}; floats are not "
                             "cast to integers (a fraction would be dropped): cast it yourself, e.g. "
                             f"{name}.astype(np.{_INTEGER_TYPES[dtype]})")
    wanted = "an integer" if dtype in _INTEGER_TYPES else "a float or integer"
    raise InputTypeError(f"{_describe(name, dtype, shape)}: got an array of dtype {array.dtype}; it takes {wanted} "
                         "array (strings, objects, bools and complex numbers are not converted)")


def _check_range(np, name, dtype, shape, array):
    """Raises InputValueError when a value of integer `array` is outside `dtype`'s range: found before
    any cast, which would wrap it silently into range."""
    if array.size == 0:
        return
    limits = np.iinfo(_INTEGER_TYPES[dtype])
    low, high = int(array.min()), int(array.max())
    if limits.min <= low and high <= limits.max:
        return
    # the limit crossed fits the array's own dtype (a value beyond it is there), so numpy compares exactly
    outside = array < limits.min if low < limits.min else array > limits.max
    first = np.unravel_index(int(np.argmax(outside)), array.shape)
    raise InputValueError(f"{_describe(name, dtype, shape)}: {int(np.count_nonzero(outside))} value(s) outside the "
                          f"{limits.dtype} range [{limits.min}, {limits.max}], the first {int(array[first])} at index "
                          f"{tuple(int(i) for i in first)}; refused before any cast (it would wrap into range)")


def as_input(name, dtype, shape, value):
    """`value` as a C-contiguous numpy array of plan dtype `dtype` for input or label `name` (bf16:
    float32 values, rounded by the caller). `shape`: the exact shape required, or None for any (the
    feed checks a data file's samples). Raises InputTypeError or InputValueError naming `name`."""
    import numpy as np
    if dtype not in _INTEGER_TYPES and dtype not in _FLOAT_TYPES:
        raise TightfitError(f"{name!r}: feeding {dtype} from numpy is not supported")
    array = np.asarray(value)
    _check_kind(np, name, dtype, shape, array)
    if shape is not None and array.shape != tuple(shape):
        raise InputValueError(f"{_describe(name, dtype, shape)}: got an array of shape {array.shape}; one "
                              f"micro-batch is {tuple(shape)}")
    if dtype in _INTEGER_TYPES:
        _check_range(np, name, dtype, shape, array)
        return np.ascontiguousarray(array, dtype=_INTEGER_TYPES[dtype])
    return np.ascontiguousarray(array, dtype=_FLOAT_TYPES[dtype])

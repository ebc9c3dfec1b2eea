"""tightfit from Python: build or load a graph, compile it into a plan whose memory is exact, check a
budget, and train from numpy arrays. Pure Python over libtightfit.so (ctypes); see docs/python.md.

    import tightfit
    graph = tightfit.zoo("mlp")                              # or tightfit.load("m.tfg"), tightfit.Graph(...)
    result = tightfit.check(graph, budget="1MiB", set={"N": 32})   # the fields of `tightfit check --json`
    plan = tightfit.compile(graph, set={"N": 32}, optimizer="adamw")
    session = tightfit.Session(plan, seed=0)
    losses = session.train({"x": x, "labels": labels}, steps=10)

Every failure raises tightfit.TightfitError carrying the library's message.
"""
import ctypes
import filecmp
import functools
import json
import math
import os
import shutil
import tempfile
import threading
import warnings
import weakref

from . import _lib
from ._inputs import InputTypeError, InputValueError, as_input
from ._lib import TightfitError

__all__ = ["TightfitError", "InputTypeError", "InputValueError", "Graph", "Plan", "Session", "BlockConfig", "load",
           "zoo", "compile", "check", "report", "devices", "from_torch", "library_path"]

NO_TENSOR = -1
# Op numbers by name, from the library's op table (tf_op_count, tf_op_name): none is typed here. The
# methods below take the attribute-free float unaries (tf_op_is_unary), the reductions and the pools.
_OP_NUMBERS = {_lib.lib.tf_op_name(op).decode(): op for op in range(_lib.lib.tf_op_count())}
_UNARY_OPS = frozenset(name for name, op in _OP_NUMBERS.items() if _lib.lib.tf_op_is_unary(op))
_OPS = {name: _OP_NUMBERS[name] for name in (*_UNARY_OPS, "sum", "mean", "max", "max_pool2d", "avg_pool2d")}


def library_path():
    """The path of the libtightfit.so this package loaded."""
    return _lib.lib._name


def _workdir():
    """A temporary folder removed when the object that holds it is collected."""
    return tempfile.mkdtemp(prefix="tightfit-")


def _bytes(text):
    return None if text is None else str(text).encode()


# ---- graphs ----

class BlockConfig:
    """A transformer block's configuration (tf_block_config): widths, mask, GELU flavour, layer norm
    epsilon, init std and parameter names ("gpt2" or "timm")."""

    def __init__(self, d_model, heads, ffn=None, causal=False, gelu_approximate=False, epsilon=1e-5, init_std=0.02,
                 residual_init_std=None, names="gpt2"):
        if names not in ("gpt2", "timm"):
            raise TightfitError(f"BlockConfig: names must be 'gpt2' or 'timm', got {names!r}")
        self.c = _lib.BlockConfig(d_model=d_model, heads=heads, ffn=4 * d_model if ffn is None else ffn,
                                  causal=causal, gelu_approximate=gelu_approximate, epsilon=epsilon, init_std=init_std,
                                  residual_init_std=init_std if residual_init_std is None else residual_init_std,
                                  names=_lib.GPT2_NAMES if names == "gpt2" else _lib.TIMM_NAMES)

    @classmethod
    def gpt2(cls, d_model, heads, layers):
        """GPT-2's block of a `layers`-block model (tf_layers_gpt2_block)."""
        config = cls(d_model, heads)
        config.c = _lib.lib.tf_layers_gpt2_block(d_model, heads, layers)
        return config


class Graph:
    """A model graph (tf_graph). Builder methods return tensor ids (ints); the first error stops the
    graph and is raised as TightfitError naming the node, op and shapes."""

    def __init__(self, name="graph", _handle=None, _dir=None):
        if _handle is None:
            handle = _lib.c_graph_p()
            _lib.check(_lib.lib.tf_graph_create(_bytes(name), ctypes.byref(handle)), "Graph")
            _handle = handle.value
        self._g = _handle
        self._symbols = {}
        self._dir = _dir  # where files the graph references (external weights) live
        self._source = None  # the .tfg it was loaded from, while unchanged
        self._finalizer = weakref.finalize(self, _lib.lib.tf_graph_destroy, _handle)

    # -- errors --
    def _checked(self, tensor, what):
        self._source = None
        if tensor == NO_TENSOR or tensor is None:
            status = _lib.lib.tf_graph_status(self._g)
            message = _lib.lib.tf_status_message(status).decode("utf-8", "replace") if status else "failed"
            raise TightfitError(f"{what}: {message}", "invalid argument")
        return tensor

    def status(self):
        """Raises the graph's first builder error, if any."""
        status = _lib.lib.tf_graph_status(self._g)
        if status:
            raise TightfitError(_lib.lib.tf_status_message(status).decode("utf-8", "replace"))

    # -- shapes and initializers --
    def symbol(self, name, default=1):
        """Declares a symbolic dimension (N, T, ...) with its default value; returns its name."""
        index = _lib.lib.tf_graph_symbol(self._g, _bytes(name), int(default))
        if index < 0:
            self._checked(NO_TENSOR, f"symbol {name!r}")
        self._symbols[name] = index
        return name

    def _shape(self, dims):
        if len(dims) > _lib.MAX_RANK:
            raise TightfitError(f"shape {list(dims)}: rank {len(dims)} is over {_lib.MAX_RANK}")
        shape = _lib.Shape(rank=len(dims))
        for i, d in enumerate(dims):
            multiple = 1
            if isinstance(d, tuple):
                d, multiple = d
            if isinstance(d, str):
                if d not in self._symbols:
                    raise TightfitError(f"shape {list(dims)}: unknown symbol {d!r}; declare it with "
                                        f"graph.symbol({d!r}, default)")
                shape.dims[i] = _lib.Dim(size=multiple, symbol=self._symbols[d])
            else:
                shape.dims[i] = _lib.Dim(size=int(d), symbol=-1)
        return shape

    @staticmethod
    def _init(spec):
        """'zeros', 'ones', ('normal', std), ('uniform', low, high), ('fan_in_uniform', fan_in),
        ('fill', value), ('arange', start, step)."""
        if isinstance(spec, str):
            spec = (spec,)
        kind, *args = spec
        if kind == "fan_in_uniform":
            bound = 1.0 / math.sqrt(args[0])
            return _lib.Init(kind=_lib.INIT["uniform"], a=-bound, b=bound)
        if kind == "normal":
            return _lib.Init(kind=_lib.INIT["normal"], a=0.0, b=float(args[0]) if args else 1.0)
        if kind not in _lib.INIT:
            raise TightfitError(f"unknown initializer {kind!r} (zeros, ones, normal, uniform, fan_in_uniform, fill, "
                                "arange, xavier_uniform, kaiming_normal)")
        values = [float(a) for a in args] + [0.0, 0.0]
        return _lib.Init(kind=_lib.INIT[kind], a=values[0], b=values[1])

    @staticmethod
    def _dtype(dtype):
        if dtype not in _lib.DTYPES:
            raise TightfitError(f"unknown dtype {dtype!r} (f32, f16, bf16, i32, i64, u8)")
        return _lib.DTYPES[dtype]

    # -- tensors --
    def input(self, name, shape, dtype="f32"):
        return self._checked(_lib.lib.tf_graph_input(self._g, _bytes(name), self._dtype(dtype), self._shape(shape)),
                             f"input {name!r}")

    def label(self, name, shape, dtype="i32"):
        return self._checked(_lib.lib.tf_graph_label(self._g, _bytes(name), self._dtype(dtype), self._shape(shape)),
                             f"label {name!r}")

    def parameter(self, name, shape, init="zeros", dtype="f32"):
        return self._checked(_lib.lib.tf_graph_parameter(self._g, _bytes(name), self._dtype(dtype), self._shape(shape),
                                                         self._init(init)), f"parameter {name!r}")

    def constant(self, name, shape, init, dtype="f32"):
        return self._checked(_lib.lib.tf_graph_constant(self._g, _bytes(name), self._dtype(dtype), self._shape(shape),
                                                        self._init(init)), f"constant {name!r}")

    def _tensor_id(self, tensor):
        _declare_trainable()
        if isinstance(tensor, str):
            found = _lib.lib.tf_graph_find_tensor(self._g, _bytes(tensor))
            if found < 0:
                raise TightfitError(f"graph has no tensor named {tensor!r}", "invalid argument")
            return found
        return int(tensor)

    def set_trainable(self, tensor, trainable=True):
        """Freezes (trainable=False) or unfreezes a parameter, by id or name: a frozen parameter gets no
        gradient, no optimizer state and no update (tf_graph_set_trainable; saved in the .tfg)."""
        _lib.check(_lib.lib.tf_graph_set_trainable(self._g, self._tensor_id(tensor), bool(trainable)), "set_trainable")
        self._source = None

    def is_trainable(self, tensor):
        """Whether `tensor` (id or name) is a parameter that training updates (not frozen)."""
        return bool(_lib.lib.tf_graph_is_trainable(self._g, self._tensor_id(tensor)))

    def scope(self, name):
        """Prefix for the names of the nodes built next."""
        _lib.lib.tf_graph_set_scope(self._g, _bytes(name))

    # -- ops (include/tightfit/graph.h) --
    def matmul(self, a, b, transpose_a=False, transpose_b=False):
        return self._checked(_lib.lib.tf_matmul(self._g, a, b, transpose_a, transpose_b), "matmul")

    def add(self, a, b):
        return self._checked(_lib.lib.tf_add(self._g, a, b), "add")

    def sub(self, a, b):
        return self._checked(_lib.lib.tf_sub(self._g, a, b), "sub")

    def mul(self, a, b):
        return self._checked(_lib.lib.tf_mul(self._g, a, b), "mul")

    def div(self, a, b):
        return self._checked(_lib.lib.tf_div(self._g, a, b), "div")

    def keep(self, x, m):
        """x where m is nonzero, else 0, even where x is NaN or infinite (torch.where(m, x, 0))."""
        return self._checked(_lib.lib.tf_keep(self._g, x, m), "keep")

    def unary(self, op, x):
        """op: an attribute-free float unary by name (neg, exp, log, sqrt, rsqrt, relu, silu, sigmoid, tanh,
        softplus, abs, ...: every one the library's op table has, tf_op_is_unary)."""
        if op not in _UNARY_OPS:
            raise TightfitError(f"unary: unknown op {op!r}")
        return self._checked(_lib.lib.tf_unary(self._g, _OPS[op], x), op)

    def relu(self, x):
        return self.unary("relu", x)

    def tanh(self, x):
        return self.unary("tanh", x)

    def sigmoid(self, x):
        return self.unary("sigmoid", x)

    def abs(self, x):
        """|x|; an L1 loss is mean(abs(y - target)), torch.nn.L1Loss()."""
        return self.unary("abs", x)

    def stop_gradient(self, x):
        """x, through which no gradient flows (PyTorch's x.detach()): a target, a straight-through estimator."""
        return self.unary("stop_gradient", x)

    def gelu(self, x, approximate=False):
        return self._checked(_lib.lib.tf_gelu(self._g, x, approximate), "gelu")

    def leaky_relu(self, x, alpha=0.01):
        """x for x > 0, alpha * x otherwise (torch.nn.LeakyReLU(negative_slope=alpha))."""
        return self._checked(_lib.lib.tf_leaky_relu(self._g, x, alpha), "leaky_relu")

    def clip(self, x, lo=float("-inf"), hi=float("inf")):
        """min(max(x, lo), hi) (torch.clamp; nn.ReLU6 is clip(x, 0, 6)); its gradient passes where lo < x < hi."""
        return self._checked(_lib.lib.tf_clip(self._g, x, lo, hi), "clip")

    def reduce(self, op, x, axes, keepdims=False):
        """op: sum, mean or max over `axes`."""
        array = (ctypes.c_int32 * len(axes))(*axes)
        return self._checked(_lib.lib.tf_reduce(self._g, _OPS[op], x, array, len(axes), keepdims), op)

    def softmax(self, x, axis=-1):
        return self._checked(_lib.lib.tf_softmax(self._g, x, axis), "softmax")

    def log_softmax(self, x, axis=-1):
        return self._checked(_lib.lib.tf_log_softmax(self._g, x, axis), "log_softmax")

    def layer_norm(self, x, gamma, beta=NO_TENSOR, epsilon=1e-5):
        return self._checked(_lib.lib.tf_layer_norm(self._g, x, gamma, beta, epsilon), "layer_norm")

    def rms_norm(self, x, gamma, epsilon=1e-6):
        return self._checked(_lib.lib.tf_rms_norm(self._g, x, gamma, epsilon), "rms_norm")

    def batch_norm(self, x, gamma, beta, epsilon=1e-5, running_mean=None, running_var=None, momentum=0.1):
        """x [N, C, ...] normalised per channel by the batch's own statistics (BatchNorm in training mode).
        With running_mean and running_var (f32 [C] constants), training also updates them once per
        micro-batch, as PyTorch does: running = (1 - momentum) running + momentum batch (unbiased variance)."""
        if running_mean is None and running_var is None:
            return self._checked(_lib.lib.tf_batch_norm(self._g, x, gamma, beta, epsilon), "batch_norm")
        if running_mean is None or running_var is None:
            raise TightfitError("batch_norm: running_mean and running_var come together")
        return self._checked(_lib.lib.tf_batch_norm_tracked(self._g, x, gamma, beta, running_mean, running_var,
                                                            epsilon, momentum), "batch_norm")

    def embedding(self, ids, table):
        return self._checked(_lib.lib.tf_embedding(self._g, ids, table), "embedding")

    def reshape(self, x, shape):
        return self._checked(_lib.lib.tf_reshape(self._g, x, self._shape(shape)), "reshape")

    def transpose(self, x, perm):
        array = (ctypes.c_int32 * len(perm))(*perm)
        return self._checked(_lib.lib.tf_transpose(self._g, x, array, len(perm)), "transpose")

    def concat(self, xs, axis):
        array = (_lib.c_tensor * len(xs))(*xs)
        return self._checked(_lib.lib.tf_concat(self._g, array, len(xs), axis), "concat")

    def slice(self, x, axis, start, end, step=1):
        return self._checked(_lib.lib.tf_slice(self._g, x, axis, start, end, step), "slice")

    def conv2d(self, x, weight, bias=NO_TENSOR, stride=1, padding=0, dilation=1, groups=1):
        attrs = _lib.ConvAttrs(stride=(stride, stride), padding=(padding, padding), dilation=(dilation, dilation),
                               groups=groups)
        return self._checked(_lib.lib.tf_conv2d(self._g, x, weight, bias, ctypes.byref(attrs)), "conv2d")

    def pool2d(self, op, x, kernel, stride=None, padding=0):
        """op: max_pool2d or avg_pool2d."""
        stride = kernel if stride is None else stride
        attrs = _lib.PoolAttrs(kernel=(kernel, kernel), stride=(stride, stride), padding=(padding, padding))
        return self._checked(_lib.lib.tf_pool2d(self._g, _OPS[op], x, ctypes.byref(attrs)), op)

    def dropout(self, x, rate):
        return self._checked(_lib.lib.tf_dropout(self._g, x, rate), "dropout")

    def cast(self, x, dtype):
        """x converted to dtype (f32, f16, bf16, i32, i64). Ops on f16/bf16 data compute in f32 between
        casts (docs/precision.md); parameters of a training plan stay f32: cast them where read."""
        return self._checked(_lib.lib.tf_cast(self._g, x, self._dtype(dtype)), "cast")

    def attention(self, q, k, v, heads, causal=False):
        return self._checked(_lib.lib.tf_attention(self._g, q, k, v, heads, causal), "attention")

    def cross_entropy(self, logits, labels, ignore_index=-100):
        return self._checked(_lib.lib.tf_cross_entropy(self._g, logits, labels, ignore_index), "cross_entropy")

    def ctc_loss(self, logits, labels, input_lengths=None, blank=0, zero_infinity=False):
        """CTC loss of logits [N, T, C] (log_softmax over C applied here) against labels [N, S] (i32/i64,
        each target ending at its first negative label), as F.ctc_loss(reduction='mean'): f32 scalar.
        input_lengths: an integer [N] tensor, or None for T frames each."""
        lengths = NO_TENSOR if input_lengths is None else input_lengths
        return self._checked(_lib.lib.tf_ctc_loss(self._g, logits, labels, lengths, blank, zero_infinity), "ctc_loss")

    def mse(self, prediction, target):
        return self._checked(_lib.lib.tf_mse(self._g, prediction, target), "mse")

    def bce_with_logits(self, logits, target):
        return self._checked(_lib.lib.tf_bce_with_logits(self._g, logits, target), "bce_with_logits")

    # -- layer helpers (include/tightfit/layers.h) --
    def linear(self, x, d_in, d_out, name, bias=True, init=None):
        """y = x W^T + b: "<name>.weight" [out, in] (default init: PyTorch's fan-in uniform), "<name>.bias"."""
        init = self._init(init or ("fan_in_uniform", d_in))
        return self._checked(_lib.lib.tf_layers_linear(self._g, x, d_in, d_out, bias, init, _bytes(name)),
                             f"linear {name!r}")

    def norm(self, x, d, name, epsilon=1e-5):
        """Layer norm over the last axis with "<name>.weight" and "<name>.bias"."""
        return self._checked(_lib.lib.tf_layers_layer_norm(self._g, x, d, epsilon, _bytes(name)), f"norm {name!r}")

    def conv(self, x, d_in, d_out, kernel, name, stride=1, padding=0):
        """conv2d + bias with "<name>.weight" [out, in, k, k] and "<name>.bias"."""
        return self._checked(_lib.lib.tf_layers_conv2d(self._g, x, d_in, d_out, kernel, stride, padding,
                                                       _bytes(name)), f"conv {name!r}")

    def positions(self, symbol, table, ids_name):
        """A learned position embedding over `symbol`: rows 0..symbol-1 of `table`."""
        return self._checked(_lib.lib.tf_layers_positions(self._g, self._symbols[symbol], table, _bytes(ids_name)),
                             "positions")

    def self_attention(self, x, config, prefix):
        return self._checked(_lib.lib.tf_layers_self_attention(self._g, x, ctypes.byref(config.c), _bytes(prefix)),
                             f"self_attention {prefix!r}")

    def cross_attention(self, x, memory, config, prefix):
        return self._checked(_lib.lib.tf_layers_cross_attention(self._g, x, memory, ctypes.byref(config.c),
                                                                _bytes(prefix)), f"cross_attention {prefix!r}")

    def mlp(self, x, config, prefix):
        return self._checked(_lib.lib.tf_layers_mlp(self._g, x, ctypes.byref(config.c), _bytes(prefix)),
                             f"mlp {prefix!r}")

    def block(self, x, config, prefix, memory=NO_TENSOR):
        """A pre-LN transformer block (with cross-attention over `memory` when given)."""
        return self._checked(_lib.lib.tf_layers_block(self._g, x, memory, ctypes.byref(config.c), _bytes(prefix)),
                             f"block {prefix!r}")

    def stack(self, x, config, count, prefix, norm_name, memory=NO_TENSOR):
        """`count` blocks "<prefix>.0" ... then a layer norm `norm_name`."""
        return self._checked(_lib.lib.tf_layers_stack(self._g, x, memory, ctypes.byref(config.c), count,
                                                      _bytes(prefix), _bytes(norm_name)), f"stack {prefix!r}")

    def finish(self, output, loss, optimizer="sgd", output_name=None, **training):
        """Names the output "logits" (or output_name) and the loss "loss", marks them, and stores the
        training configuration: SGD (lr 0.05, momentum 0.9), AdamW (lr 3e-4, weight decay 0.01) or
        "adamw8bit" (AdamW with its moments stored in 8 bits), any field (learning_rate, momentum, beta1,
        beta2, epsilon, weight_decay, clip_norm) overridden."""
        if optimizer not in ("sgd", "adamw", "adamw8bit"):
            raise TightfitError(f"finish: optimizer must be 'sgd', 'adamw' or 'adamw8bit', got {optimizer!r}")
        config = _lib.lib.tf_layers_sgd() if optimizer == "sgd" else _lib.lib.tf_layers_adamw()
        config.optimizer = _lib.OPTIMIZERS[optimizer]
        for key, value in training.items():
            if key not in dict(_lib.TrainingConfig._fields_) or key in ("optimizer", "precision"):
                raise TightfitError(f"finish: unknown training field {key!r}")
            setattr(config, key, value)
        self._source = None
        _lib.lib.tf_layers_finish(self._g, output, _bytes(output_name), loss, ctypes.byref(config))
        self.status()

    # -- files --
    def save(self, path):
        """Writes the graph as a .tfg file; an imported graph's weights (from_torch's
        weights.safetensors, which the .tfg names) are copied beside it, never over another file."""
        weights = os.path.join(self._dir, "weights.safetensors") if self._dir else None
        folder = os.path.dirname(os.path.abspath(path))
        beside = os.path.join(folder, "weights.safetensors")
        copy = weights and os.path.exists(weights) and os.path.realpath(folder) != os.path.realpath(self._dir)
        if copy and os.path.exists(beside) and not filecmp.cmp(weights, beside, shallow=False):
            raise TightfitError(f"save: {beside} exists and holds other weights; the graph names its weights "
                                "'weights.safetensors' beside the .tfg: save it to another folder", "invalid_input")
        _lib.check(_lib.lib.tf_graph_save(self._g, _bytes(path)), "save")
        if copy:
            shutil.copyfile(weights, beside)

    def _file(self):
        """A .tfg of this graph for the command line, beside the files it references."""
        if self._source:
            return self._source
        if self._dir is None:
            self._dir = _workdir()
            weakref.finalize(self, shutil.rmtree, self._dir, True)
        path = os.path.join(self._dir, "graph.tfg")
        self.save(path)
        return path


def load(path):
    """Loads a .tfg graph file."""
    handle = _lib.c_graph_p()
    _lib.check(_lib.lib.tf_graph_load(_bytes(path), ctypes.byref(handle)))
    graph = Graph(_handle=handle.value)
    graph._source = os.fspath(path)
    return graph


def zoo(name, **knobs):
    """Builds zoo preset `name` with knobs overridden (`tightfit zoo NAME --param k=v`)."""
    overrides = [f"{k}={v}".encode() for k, v in knobs.items()]
    array = (ctypes.c_char_p * max(1, len(overrides)))(*overrides)
    handle = _lib.c_graph_p()
    _lib.check(_lib.lib.tf_zoo_build(_bytes(name), array, len(overrides), ctypes.byref(handle)), f"zoo {name!r}")
    return Graph(_handle=handle.value)


def _declare_trainable():
    if _lib.lib.tf_graph_is_trainable.restype is not ctypes.c_bool:
        _lib._declare("tf_graph_set_trainable", _lib.c_status, _lib.c_graph_p, _lib.c_tensor, ctypes.c_bool)
        _lib._declare("tf_graph_is_trainable", ctypes.c_bool, _lib.c_graph_p, _lib.c_tensor)
        _lib._declare("tf_graph_find_tensor", _lib.c_tensor, _lib.c_graph_p, ctypes.c_char_p)


# ---- compile, check, report: exactly the command line's options and results ----

def _options(options):
    """Keyword arguments to the command line's options, as (name, value) pairs (value None for a
    switch): set={"N": 32} -> ("--set", "N=32"); global_batch=32 -> ("--global-batch", "32");
    inference=True -> ("--inference", None); max_growth=0.05 -> ("--max-growth", "5%");
    precision_override={"h.0/relu": "f32"} -> ("--precision-override", "h.0/relu=f32") (one per node);
    freeze=["enc.*", "emb"] -> two ("--freeze", ...) (train_only and lora_targets likewise; a string is
    one pattern); lora="8:16" -> ("--lora", "8:16")."""
    pairs = []
    for key, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if key == "set":
            value = ",".join(f"{k}={v}" for k, v in value.items()) if isinstance(value, dict) else value
        elif key == "precision_override" and isinstance(value, dict):
            pairs += [(flag, f"{node}={precision}") for node, precision in value.items()]
            continue
        elif key in ("freeze", "train_only", "lora_targets") and not isinstance(value, str):
            pairs += [(flag, str(pattern)) for pattern in value]
            continue
        elif key == "max_growth" and not isinstance(value, str):
            value = f"{100.0 * value:g}%"
        pairs.append((flag, None if value is True else str(value)))
    return pairs


class _Request:
    """A tf_request holding the options (tightfit/cli.h), destroyed at the end of a with block."""

    def __init__(self, options):
        handle = _lib.c_request_p()
        _lib.check(_lib.lib.tf_request_create(ctypes.byref(handle)))
        self.handle = handle.value
        try:
            for name, value in _options(options):
                keyword = name[2:].replace("-", "_")
                _lib.check(_lib.lib.tf_request_set(self.handle, name.encode(), None if value is None else value.encode()),
                           f"{keyword}={options[keyword]!r}")
        except BaseException:
            _lib.lib.tf_request_destroy(self.handle)
            raise

    def __enter__(self):
        return self.handle

    def __exit__(self, *unused):
        _lib.lib.tf_request_destroy(self.handle)


def _graph_path(graph):
    if isinstance(graph, Graph):
        path = graph._file()
        return path, os.path.dirname(os.path.abspath(path))
    if isinstance(graph, (str, os.PathLike)):
        path = os.fspath(graph)
        return path, os.path.dirname(os.path.abspath(path))
    raise TightfitError(f"expected a tightfit.Graph or a .tfg path, got {type(graph).__name__}")


def _result(text):
    """The JSON a request returned, its warnings raised as Python warnings."""
    result = json.loads(text)
    for warning in result.get("warnings", []):
        warnings.warn(f"tightfit: {warning}", stacklevel=3)
    return result


def _run(command, args, allowed=(0,)):
    """`tightfit COMMAND ARGS` in this process (for tests and tools: the functions below call the
    library's requests); raises TightfitError with its error text unless the exit code is allowed."""
    code, out, err = _lib.run_cli([command] + args)
    lines = [line for line in err.splitlines() if not line.startswith("(run 'tightfit")]
    if code not in allowed:
        message = "\n".join(line for line in lines if "warning:" not in line).strip()
        raise TightfitError(message or out.strip() or f"tightfit {command} failed (exit {code})", code)
    for line in lines:
        if "warning:" in line:
            warnings.warn(line, stacklevel=3)
    return code, out, err


def check(graph, **options):
    """`tightfit check GRAPH --json` with the compile options as keywords (budget="16GiB", gpu="t4",
    target="cuda", set={"N": 8}, global_batch=32, remat="auto", precision="bf16", baseline="prev.json",
    max_growth=0.05, ...). Returns the JSON result as a dict (fits, budget_bytes, regions, overhead,
    categories, ..., and exit_code: 0 when it fits and grew no more than allowed, else 1, as the
    command's); a plan that does not fit (or grew past max_growth) is a result, not an error."""
    path, _ = _graph_path(graph)
    text, passed = ctypes.c_void_p(), ctypes.c_bool()
    with _Request(options) as request:
        _lib.check(_lib.lib.tf_request_check(request, _bytes(path), ctypes.byref(text), ctypes.byref(passed)))
    result = _result(_lib.take_text(text))
    result["exit_code"] = 0 if passed.value else 1
    return result


def _to_bf16_bits(value):
    """float32 values rounded to nearest even as bf16 bit patterns (uint16), as the kernels round."""
    import numpy as np
    bits = np.ascontiguousarray(value, dtype=np.float32).view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1))) >> 16).astype(np.uint16)
    nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    return np.where(nan, ((bits >> 16) | np.uint32(0x40)).astype(np.uint16), rounded)


class Plan:
    """A compiled plan (tf_plan), loaded from its .tfplan file."""

    def __init__(self, path, weights_dir=None, summary=None, _handle=None):
        """Loads the plan at `path` (or takes `_handle`, a tf_plan the library returned for it)."""
        if _handle is None:
            handle = _lib.c_plan_p()
            _lib.check(_lib.lib.tf_plan_load(_bytes(path), ctypes.byref(handle)))
            _handle = handle.value
        self._p = _handle
        self._finalizer = weakref.finalize(self, _lib.lib.tf_plan_destroy, self._p)
        self.path = path
        self.weights_dir = weights_dir
        self.summary = summary
        head = ctypes.cast(self._p, ctypes.POINTER(_lib.PlanHead)).contents
        self.graph_name = head.graph_name.decode()
        self.target = head.target.decode()
        self.micro_batch, self.accumulate, self.global_batch = head.micro_batch, head.accumulate, head.global_batch
        self.inputs = {}  # name -> (dtype, shape) of each input and label (one micro-batch)
        self.unbatched = set()  # inputs without the batch axis N (a static shape): the same tensor every micro-batch
        self.weights = {}  # name -> (dtype, shape) of each parameter and running statistic, in plan order
        self.masters = {}  # name of a half parameter -> its f32 master's buffer (compile param_dtype="bf16")
        for i in range(head.n_buffers):
            b = head.buffers[i]
            if b.role in (_lib.ROLE_INPUT, _lib.ROLE_LABEL):
                self.inputs.setdefault(b.name.decode(), (_lib.DTYPE_NAMES[b.dtype], tuple(b.shape[:b.rank])))
                if b.unbatched:
                    self.unbatched.add(b.name.decode())
            elif b.role in (_lib.ROLE_PARAMETER, _lib.ROLE_STATE):
                self.weights[b.name.decode()] = (_lib.DTYPE_NAMES[b.dtype], tuple(b.shape[:b.rank]))
            elif b.role == _lib.ROLE_OPTIMIZER_STATE and b.init.kind != 0 and 0 <= b.owner < head.n_buffers:
                self.masters[head.buffers[b.owner].name.decode()] = b.name.decode()

    def _buffers(self):
        """name -> (dtype, shape) of every buffer of the plan (activations included)."""
        head = ctypes.cast(self._p, ctypes.POINTER(_lib.PlanHead)).contents
        return {head.buffers[i].name.decode(): (_lib.DTYPE_NAMES[head.buffers[i].dtype],
                                                 tuple(head.buffers[i].shape[:head.buffers[i].rank]))
                for i in range(head.n_buffers)}

    @property
    def total_bytes(self):
        """Every region: what a session allocates."""
        return _lib.lib.tf_plan_total_bytes(self._p)

    @property
    def device_total_bytes(self):
        """The regions plus the target's device overhead: what a budget must hold."""
        return _lib.lib.tf_plan_device_total(self._p)

    def save(self, path):
        _lib.check(_lib.lib.tf_plan_save(self._p, _bytes(path)), "save")

    def report(self, budget=None):
        """`tightfit report PLAN --json` as a dict."""
        return report(self.path, budget=budget)


def compile(graph, output=None, **options):
    """`tightfit compile GRAPH -o PLAN` with the compile options as keywords (see check()); returns the
    Plan. `output` keeps the .tfplan there (default: a temporary file). A budget the plan misses raises."""
    path, graph_dir = _graph_path(graph)
    if output is None:
        folder = _workdir()
        output = os.path.join(folder, "plan.tfplan")
    else:
        folder = None
    handle, text = _lib.c_plan_p(), ctypes.c_void_p()
    try:
        with _Request(options) as request:
            _lib.check(_lib.lib.tf_request_compile(request, _bytes(path), _bytes(output), ctypes.byref(handle),
                                                   ctypes.byref(text)))
        plan = Plan(output, weights_dir=graph_dir, summary=_result(_lib.take_text(text)), _handle=handle.value)
    except BaseException:
        if folder:  # the temporary plan's folder goes with the compile that failed
            shutil.rmtree(folder, True)
        raise
    # the plan's parameters are initialised from files beside the graph (a from_torch graph's
    # weights live in its temporary folder, removed with the Graph): keep the Graph alive with it
    plan._graph = graph if isinstance(graph, Graph) else None
    if folder:
        weakref.finalize(plan, shutil.rmtree, folder, True)
    return plan


def devices():
    """`tightfit devices --json`: a list of dicts, one per device ({"device": "cuda:0", "backend",
    "available": True, "description"}) or per backend without one ({"backend", "available": False,
    "why"}: no driver, no device, the CUDA module missing)."""
    text = ctypes.c_void_p()
    _lib.check(_lib.lib.tf_request_devices(ctypes.byref(text)))
    return json.loads(_lib.take_text(text))["devices"]


def report(plan_path, budget=None):
    """`tightfit report PLAN --json` as a dict."""
    text = ctypes.c_void_p()
    _lib.check(_lib.lib.tf_request_report(_bytes(os.fspath(plan_path)), None if budget is None else _bytes(str(budget)),
                                          ctypes.byref(text)))
    return json.loads(_lib.take_text(text))


# ---- training ----

def _exclusive(method):
    """`method` run holding the session's lock, on a session not closed: one call into the library at a
    time, whichever thread makes it (a tf_session is not thread-safe)."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with self._lock:
            if self._s is None:
                raise TightfitError(f"Session.{method.__name__}: the session is closed (close() was called, or its "
                                    "with block ended); create a new Session", "closed")
            return method(self, *args, **kwargs)
    return run


def _declare_init_from():
    """The ctypes signatures of include/tightfit/init_from.h, declared at first use."""
    if getattr(_lib.lib.tf_session_init_from, "argtypes", None):
        return
    _lib._declare("tf_init_map_load", _lib.c_status, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p))
    _lib._declare("tf_init_map_destroy", None, ctypes.c_void_p)
    _lib._declare("tf_session_init_from", _lib.c_status, _lib.c_session_p, ctypes.c_char_p, ctypes.c_void_p,
                  ctypes.c_void_p)


class Session:
    """A plan loaded onto a backend (tf_session): regions allocated once, parameters initialised.
    Thread-safe: a lock lets one call at a time into the library (a step, train or read from another
    thread waits for the call in flight). close() (or a with block) frees it now; collection frees it too."""

    def __init__(self, plan, seed=0, threads=2, device="cpu", loss_scale_window=0, init_from=None, init_map=None):
        """init_from: a safetensors file of pretrained weights every parameter is read from by name, through
        init_map (a map file or "hf-gpt2"; docs/finetune.md), as `train --init-from` reads them."""
        self._lock = threading.RLock()  # re-entrant: step() writes, state_dict() reads, holding it
        self._s = None
        if not isinstance(plan, Plan):
            plan = Plan(os.fspath(plan))
        self.plan = plan
        self.seed = seed
        backend, _, index = device.partition(":")
        options = _lib.lib.tf_session_options_default()
        options.backend = _bytes(backend)
        options.device = int(index or 0)
        options.threads = threads
        options.seed = seed
        options.weights_dir = _bytes(plan.weights_dir)
        options.loss_scale_growth_interval = loss_scale_window
        handle = _lib.c_session_p()
        _lib.check(_lib.lib.tf_session_create(plan._p, ctypes.byref(options), ctypes.byref(handle)), "Session")
        self._s = handle.value
        self._finalizer = weakref.finalize(self, _lib.lib.tf_session_destroy, self._s)
        if init_from is not None:
            self._init_from(os.fspath(init_from), init_map)
        elif init_map is not None:
            raise TightfitError("Session: init_map needs init_from (the weights file it maps)")

    def _init_from(self, path, init_map):
        """tf_session_init_from (include/tightfit/init_from.h) through map `init_map` (None: names as they are)."""
        _declare_init_from()
        mapping = ctypes.c_void_p()
        if init_map is not None:
            _lib.check(_lib.lib.tf_init_map_load(_bytes(os.fspath(init_map)), ctypes.byref(mapping)), "init_map")
        try:
            _lib.check(_lib.lib.tf_session_init_from(self._s, _bytes(path), mapping, None), "init_from")
        finally:
            _lib.lib.tf_init_map_destroy(mapping)

    def close(self):
        """Frees the session (tf_session_destroy) once a call in flight on another thread has returned.
        Closing again does nothing; any other call afterwards raises TightfitError."""
        with self._lock:
            if self._s is not None:
                self._s = None
                self._finalizer()

    @property
    def closed(self):
        """True after close()."""
        return self._s is None

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.close()

    def _input(self, name):
        """(dtype, shape) of input or label `name` (one micro-batch); raises for another name."""
        if name not in self.plan.inputs:
            raise TightfitError(f"{name!r} is not an input or label of plan '{self.plan.graph_name}' (it has: "
                                + ", ".join(sorted(self.plan.inputs)) + ")")
        return self.plan.inputs[name]

    def _array(self, name, value, batched=False):
        """`value` for input `name` of the plan's dtype, converted only where no value changes
        (_inputs.as_input); of one micro-batch's shape, or with `batched` any number of samples."""
        dtype, shape = self._input(name)
        array = as_input(name, dtype, None if batched else shape, value)
        return (_to_bf16_bits(array) if dtype == "bf16" else array), shape

    @_exclusive
    def write(self, name, value):
        """Copies a numpy array (one micro-batch) into buffer `name`; an input or label is checked first
        as `tightfit train` checks its files (floats finite, ids and labels in range)."""
        array, _ = self._array(name, value)
        _lib.check(_lib.lib.tf_session_check_input(self._s, _bytes(name), array.ctypes.data, array.nbytes), name)
        _lib.check(_lib.lib.tf_session_write(self._s, _bytes(name), array.ctypes.data, array.nbytes), name)

    @_exclusive
    def read(self, name, shape=None, dtype="f32"):
        """Copies buffer `name` to a new numpy array (shape: the plan's for inputs, else give it).
        f16 comes back as float16; bf16, which numpy lacks, as float32 (exact)."""
        import numpy as np
        if name in self.plan.inputs:
            dtype, shape = self.plan.inputs[name]
        if shape is None:
            raise TightfitError(f"read {name!r}: give its shape")
        numpy_dtype = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16, "i32": np.int32,
                       "i64": np.int64, "u8": np.uint8}.get(dtype)
        if numpy_dtype is None:
            raise TightfitError(f"read {name!r}: unknown dtype {dtype!r} (f32, f16, bf16, i32, i64, u8)")
        array = np.empty(shape, dtype=numpy_dtype)
        _lib.check(_lib.lib.tf_session_read(self._s, _bytes(name), array.ctypes.data, array.nbytes), name)
        return (array.astype(np.uint32) << 16).view(np.float32) if dtype == "bf16" else array

    @_exclusive
    def state_dict(self):
        """name -> numpy array of every parameter (the f32 master weights: a half parameter's master where
        it has one) and running statistic of the plan, as trained so far. For a from_torch graph the
        names are the module's state_dict keys, so `module.load_state_dict({k: torch.from_numpy(v) for
        k, v in session.state_dict().items()}, strict=False)` puts the training back into the module
        (num_batches_tracked is not kept)."""
        return {name: self.read(self.plan.masters[name], shape=shape) if name in self.plan.masters
                else self.read(name, shape=shape, dtype=dtype) for name, (dtype, shape) in self.plan.weights.items()}

    @_exclusive
    def step(self, batch):
        """One optimizer step on `batch` (name -> array holding accumulate x micro-batch samples);
        returns the mean loss over its micro-batches."""
        k = self.plan.accumulate
        total = 0.0
        for m in range(k):
            for name, value in batch.items():
                shape = self._input(name)[1]
                rows = shape[0] if shape else 1
                whole = k == 1 or name in self.plan.unbatched
                self.write(name, value if whole else value[m * rows:(m + 1) * rows])
            total += self._micro_step(m)
        self._optimizer_step()
        return total / k

    def _optimizer_step(self):
        """The optimizer block; raises where `tightfit train` stops: a skipped update (a gradient not
        finite) of a plan that does not scale its loss, or of an fp16 plan already at loss scale 1."""
        _lib.check(_lib.lib.tf_session_optimizer_step(self._s), "optimizer step")
        c = _lib.lib.tf_session_scaling_state(self._s)
        if c.last_skipped and (not c.scaled or c.previous_log2 == 0):
            raise TightfitError(f"step {self.steps}: a gradient is not finite"
                                + (" even at loss scale 1" if c.scaled else "")
                                + "; the update was skipped: no weight was overwritten")

    @property
    @_exclusive
    def scaling(self):
        """Dynamic loss scaling (fp16 plans) and skipped updates as of the last optimizer step:
        scaled, loss_scale, skipped_steps, last_skipped, good_steps."""
        c = _lib.lib.tf_session_scaling_state(self._s)
        return {"scaled": c.scaled, "loss_scale": 2.0 ** c.loss_scale_log2 if c.scaled else 1.0,
                "skipped_steps": c.skipped_steps, "last_skipped": c.last_skipped, "good_steps": c.good_steps}

    def _micro_step(self, m):
        loss = ctypes.c_double()
        _lib.check(_lib.lib.tf_session_micro_step(self._s, ctypes.byref(loss)), "micro step")
        if not math.isfinite(loss.value):
            raise TightfitError(f"step {self.steps + 1} (micro-batch {m + 1}): the loss is {loss.value}; stopped "
                                "before the optimizer step: no weight was overwritten")
        return loss.value

    @_exclusive
    def forward(self, batch):
        """The loss of a forward pass on one micro-batch (no update)."""
        for name, value in batch.items():
            self.write(name, value)
        loss = ctypes.c_double()
        _lib.check(_lib.lib.tf_session_forward(self._s, ctypes.byref(loss)), "forward")
        return loss.value

    @_exclusive
    def train(self, data, steps, seed=None):
        """`steps` optimizer steps drawing micro-batches as `tightfit train --data` does (a fresh seeded
        permutation of the samples each epoch): same plan, seed and data give the CLI's losses.
        `data`: name -> numpy array with samples along axis 0 (one per input and label; or "tokens"
        for token models), or a folder of .npy files. Returns the loss of each step."""
        import numpy as np
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise TightfitError(f"train: steps takes a count of 1 or more (as tightfit train --steps), got {steps!r}")
        folder = None
        feed = _lib.c_feed_p()
        try:
            if isinstance(data, (str, os.PathLike)):
                directory = os.fspath(data)
            else:
                folder = directory = _workdir()
                for name, value in data.items():
                    array = self._array(name, value, batched=True)[0] if name in self.plan.inputs else value
                    np.save(os.path.join(directory, f"{name}.npy"), array)
            _lib.check(_lib.lib.tf_feed_open(self.plan._p, _bytes(directory), self.seed if seed is None else seed,
                                             ctypes.byref(feed)), "train")
            # inputs of 1 MiB and up staged in the device's host memory, as tightfit train does
            _lib.check(_lib.lib.tf_feed_stage_in(feed, self._s, 1 << 20), "train")
            losses = []
            for _ in range(steps):
                total = 0.0
                for m in range(self.plan.accumulate):
                    _lib.check(_lib.lib.tf_feed_next(feed, self._s), "train")
                    total += self._micro_step(m)
                self._optimizer_step()
                losses.append(total / self.plan.accumulate)
            return losses
        finally:
            if feed.value:
                _lib.lib.tf_feed_close(feed)
            if folder:
                shutil.rmtree(folder, True)

    @property
    @_exclusive
    def steps(self):
        return _lib.lib.tf_session_optimizer_steps(self._s)

    @_exclusive
    def memory(self):
        """Planned vs allocated bytes and allocation counts (tf_session_memory_use)."""
        m = _lib.lib.tf_session_memory_use(self._s)
        return {name: getattr(m, name) for name, _ in _lib.SessionMemory._fields_}

    @_exclusive
    def save(self, path):
        """A safetensors checkpoint (parameters, optimizer state, counters)."""
        _lib.check(_lib.lib.tf_session_save(self._s, _bytes(path), None, 0), "save")

    @_exclusive
    def load(self, path):
        """Restores a checkpoint written by save()."""
        _lib.check(_lib.lib.tf_session_load(self._s, _bytes(path)), "load")


# from_torch needs Graph above: imported last
from ._from_torch import from_torch  # noqa: E402,F401

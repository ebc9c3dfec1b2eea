"""Loads libtightfit.so and declares the C functions the package calls (ctypes, no compiled code).

Where the library is looked for, first found wins:
  1. $TIGHTFIT_LIBRARY (a path to libtightfit.so);
  2. beside this package in a source checkout: <repo>/build/libtightfit.so (python/tightfit -> ../../build);
  3. an installed prefix: <prefix>/lib/python3/dist-packages/tightfit -> <prefix>/lib[/<multiarch>];
  4. the dynamic linker's search path (libtightfit.so.0, e.g. after `cmake --install` to /usr/local).
"""
import ctypes
import os
import sysconfig

_HERE = os.path.dirname(os.path.abspath(__file__))


class TightfitError(Exception):
    """A tightfit call failed. `message` is the library's tf_status message (or the command line's
    error text), `code` its tf_code name ("invalid input", ...) or the CLI exit code."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.message = message
        self.code = code


def _candidates():
    env = os.environ.get("TIGHTFIT_LIBRARY")
    if env:
        yield env
        return
    yield os.path.join(_HERE, "..", "..", "build", "libtightfit.so")
    prefix = os.path.normpath(os.path.join(_HERE, "..", "..", "..", ".."))
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    for libdir in ("lib", os.path.join("lib", multiarch), "lib64"):
        yield os.path.join(prefix, libdir, "libtightfit.so")
    yield "libtightfit.so.0"


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path} (no such file)")
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as error:
            tried.append(f"{path} ({error})")
    raise ImportError("tightfit: cannot load libtightfit.so; build it (cmake --build build) or set "
                      "TIGHTFIT_LIBRARY=/path/to/libtightfit.so. Tried: " + "; ".join(tried))


lib = _load()
libc = ctypes.CDLL(None)
libc.free.argtypes = [ctypes.c_void_p]
libc.free.restype = None

# ---- plain C types (include/tightfit/types.h) ----
MAX_RANK = 8
c_status = ctypes.c_void_p  # tf_status: NULL on success
c_graph_p = ctypes.c_void_p
c_plan_p = ctypes.c_void_p
c_session_p = ctypes.c_void_p
c_feed_p = ctypes.c_void_p
c_tensor = ctypes.c_int32

DTYPES = {"f32": 0, "f16": 1, "bf16": 2, "i32": 3, "i64": 4, "u8": 5}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
INIT = {"none": 0, "zeros": 1, "ones": 2, "normal": 3, "uniform": 4, "xavier_uniform": 5, "kaiming_normal": 6,
        "arange": 7, "external": 8, "fill": 9}
OPTIMIZERS = {"none": 0, "sgd": 1, "adamw": 2, "adamw8bit": 3}
PRECISIONS = {"f32": 0, "fp32": 0, "bf16": 1, "f16": 2, "fp16": 2}


class Dim(ctypes.Structure):
    _fields_ = [("size", ctypes.c_int64), ("symbol", ctypes.c_int32)]


class Shape(ctypes.Structure):
    _fields_ = [("rank", ctypes.c_int32), ("dims", Dim * MAX_RANK)]


class Init(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("a", ctypes.c_double), ("b", ctypes.c_double), ("file", ctypes.c_char_p),
                ("key", ctypes.c_char_p)]


class TrainingConfig(ctypes.Structure):
    _fields_ = [("optimizer", ctypes.c_int), ("learning_rate", ctypes.c_double), ("momentum", ctypes.c_double),
                ("beta1", ctypes.c_double), ("beta2", ctypes.c_double), ("epsilon", ctypes.c_double),
                ("weight_decay", ctypes.c_double), ("clip_norm", ctypes.c_double), ("global_batch", ctypes.c_int64),
                ("accumulate_steps", ctypes.c_int32), ("precision", ctypes.c_int), ("loss_scale", ctypes.c_double)]


class ConvAttrs(ctypes.Structure):
    _fields_ = [("stride", ctypes.c_int32 * 2), ("padding", ctypes.c_int32 * 2), ("dilation", ctypes.c_int32 * 2),
                ("output_padding", ctypes.c_int32 * 2), ("groups", ctypes.c_int32)]


class PoolAttrs(ctypes.Structure):
    _fields_ = [("kernel", ctypes.c_int32 * 2), ("stride", ctypes.c_int32 * 2), ("padding", ctypes.c_int32 * 2)]


class BlockNames(ctypes.Structure):
    _fields_ = [(name, ctypes.c_char_p) for name in (
        "ln_1", "qkv", "attn_out", "ln_2", "fc_in", "fc_out", "ln_cross", "cross_q", "cross_k", "cross_v", "cross_out")]


class BlockConfig(ctypes.Structure):
    _fields_ = [("d_model", ctypes.c_int64), ("heads", ctypes.c_int64), ("ffn", ctypes.c_int64),
                ("causal", ctypes.c_bool), ("gelu_approximate", ctypes.c_bool), ("epsilon", ctypes.c_float),
                ("init_std", ctypes.c_double), ("residual_init_std", ctypes.c_double),
                ("names", ctypes.POINTER(BlockNames))]


class PlanBuffer(ctypes.Structure):
    """tf_plan_buffer (include/tightfit/plan_types.h)."""
    _fields_ = [("name", ctypes.c_char_p), ("role", ctypes.c_int), ("region", ctypes.c_int),
                ("offset", ctypes.c_int64), ("bytes", ctypes.c_int64), ("dtype", ctypes.c_int),
                ("rank", ctypes.c_int32), ("shape", ctypes.c_int64 * MAX_RANK), ("first_step", ctypes.c_int32),
                ("last_step", ctypes.c_int32), ("init", Init), ("owner", ctypes.c_int32), ("io_twin", ctypes.c_int32),
                ("alias_of", ctypes.c_int32), ("unbatched", ctypes.c_bool), ("held_by", ctypes.c_int32),
                ("view_of", ctypes.c_int32), ("view_at", ctypes.c_int64)]


class PlanHead(ctypes.Structure):
    """The leading members of tf_plan (include/tightfit/plan_types.h), as far as the package reads."""
    _fields_ = [("version", ctypes.c_uint32), ("graph_name", ctypes.c_char_p), ("target", ctypes.c_char_p),
                ("alignment", ctypes.c_int64), ("region_bytes", ctypes.c_int64 * 5), ("n_buffers", ctypes.c_int32),
                ("buffers", ctypes.POINTER(PlanBuffer)), ("n_steps", ctypes.c_int32), ("steps", ctypes.c_void_p),
                ("micro_steps", ctypes.c_int32), ("accumulate", ctypes.c_int32), ("micro_batch", ctypes.c_int64),
                ("global_batch", ctypes.c_int64)]


ROLE_PARAMETER, ROLE_OPTIMIZER_STATE, ROLE_INPUT, ROLE_LABEL, ROLE_STATE = 0, 3, 4, 5, 8


class SessionOptions(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_char_p), ("device", ctypes.c_int32), ("threads", ctypes.c_int32),
                ("seed", ctypes.c_uint64), ("weights_dir", ctypes.c_char_p),
                ("loss_scale_growth_interval", ctypes.c_int64), ("rank", ctypes.c_int32)]


class SessionMemory(ctypes.Structure):
    _fields_ = [("planned_bytes", ctypes.c_int64), ("allocated_bytes", ctypes.c_int64),
                ("allocations", ctypes.c_int64), ("allocations_after_create", ctypes.c_int64)]


class SessionScaling(ctypes.Structure):
    """tf_session_scaling (include/tightfit/runtime.h)."""
    _fields_ = [("scaled", ctypes.c_bool), ("loss_scale_log2", ctypes.c_int32), ("previous_log2", ctypes.c_int32),
                ("good_steps", ctypes.c_int64), ("skipped_steps", ctypes.c_int64), ("last_skipped", ctypes.c_bool)]


class OnnxOptions(ctypes.Structure):
    """tf_onnx_options (include/tightfit/onnx.h)."""
    _fields_ = [("weights_path", ctypes.c_char_p), ("weights_ref", ctypes.c_char_p),
                ("symbol_defaults", ctypes.c_char_p), ("loss", ctypes.c_int), ("ignore_index", ctypes.c_int64),
                ("label_name", ctypes.c_char_p), ("graph_name", ctypes.c_char_p), ("label_length", ctypes.c_int64),
                ("narrow_float64", ctypes.c_bool)]


ONNX_LOSSES = {None: 0, "none": 0, "cross_entropy": 1, "mse": 2, "bce_with_logits": 3, "l1": 4, "ctc": 5, "output": 6}


def _declare(name, restype, *argtypes):
    function = getattr(lib, name)
    function.restype = restype
    function.argtypes = list(argtypes)
    return function


# status
_declare("tf_status_message", ctypes.c_char_p, c_status)
_declare("tf_status_code", ctypes.c_int, c_status)
_declare("tf_code_name", ctypes.c_char_p, ctypes.c_int)
_declare("tf_status_free", None, c_status)

# the op table's names (include/tightfit/types.h)
_declare("tf_op_count", ctypes.c_int32)
_declare("tf_op_name", ctypes.c_char_p, ctypes.c_int)
_declare("tf_op_is_unary", ctypes.c_bool, ctypes.c_int)

# graph
_declare("tf_graph_create", c_status, ctypes.c_char_p, ctypes.POINTER(c_graph_p))
_declare("tf_graph_destroy", None, c_graph_p)
_declare("tf_graph_status", c_status, c_graph_p)
_declare("tf_graph_symbol", ctypes.c_int32, c_graph_p, ctypes.c_char_p, ctypes.c_int64)
_declare("tf_graph_set_scope", None, c_graph_p, ctypes.c_char_p)
_declare("tf_graph_input", c_tensor, c_graph_p, ctypes.c_char_p, ctypes.c_int, Shape)
_declare("tf_graph_label", c_tensor, c_graph_p, ctypes.c_char_p, ctypes.c_int, Shape)
_declare("tf_graph_parameter", c_tensor, c_graph_p, ctypes.c_char_p, ctypes.c_int, Shape, Init)
_declare("tf_graph_constant", c_tensor, c_graph_p, ctypes.c_char_p, ctypes.c_int, Shape, Init)
_declare("tf_graph_rename", None, c_graph_p, c_tensor, ctypes.c_char_p)
_declare("tf_graph_add_output", None, c_graph_p, c_tensor)
_declare("tf_graph_set_loss", None, c_graph_p, c_tensor)
_declare("tf_graph_set_training", None, c_graph_p, ctypes.POINTER(TrainingConfig))
_declare("tf_graph_save", c_status, c_graph_p, ctypes.c_char_p)
_declare("tf_graph_load", c_status, ctypes.c_char_p, ctypes.POINTER(c_graph_p))
_declare("tf_zoo_build", c_status, ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int32,
         ctypes.POINTER(c_graph_p))

# op constructors (include/tightfit/graph.h)
_declare("tf_matmul", c_tensor, c_graph_p, c_tensor, c_tensor, ctypes.c_bool, ctypes.c_bool)
for _name in ("tf_add", "tf_sub", "tf_mul", "tf_div", "tf_keep", "tf_mse", "tf_bce_with_logits", "tf_embedding"):
    _declare(_name, c_tensor, c_graph_p, c_tensor, c_tensor)
_declare("tf_unary", c_tensor, c_graph_p, ctypes.c_int, c_tensor)
_declare("tf_gelu", c_tensor, c_graph_p, c_tensor, ctypes.c_bool)
_declare("tf_leaky_relu", c_tensor, c_graph_p, c_tensor, ctypes.c_float)
_declare("tf_clip", c_tensor, c_graph_p, c_tensor, ctypes.c_float, ctypes.c_float)
_declare("tf_ctc_loss", c_tensor, c_graph_p, c_tensor, c_tensor, c_tensor, ctypes.c_int64, ctypes.c_bool)
_declare("tf_reduce", c_tensor, c_graph_p, ctypes.c_int, c_tensor, ctypes.POINTER(ctypes.c_int32), ctypes.c_int32,
         ctypes.c_bool)
_declare("tf_softmax", c_tensor, c_graph_p, c_tensor, ctypes.c_int32)
_declare("tf_log_softmax", c_tensor, c_graph_p, c_tensor, ctypes.c_int32)
_declare("tf_layer_norm", c_tensor, c_graph_p, c_tensor, c_tensor, c_tensor, ctypes.c_float)
_declare("tf_batch_norm", c_tensor, c_graph_p, c_tensor, c_tensor, c_tensor, ctypes.c_float)
_declare("tf_batch_norm_tracked", c_tensor, c_graph_p, c_tensor, c_tensor, c_tensor, c_tensor, c_tensor, ctypes.c_float,
         ctypes.c_float)
_declare("tf_rms_norm", c_tensor, c_graph_p, c_tensor, c_tensor, ctypes.c_float)
_declare("tf_reshape", c_tensor, c_graph_p, c_tensor, Shape)
_declare("tf_transpose", c_tensor, c_graph_p, c_tensor, ctypes.POINTER(ctypes.c_int32), ctypes.c_int32)
_declare("tf_concat", c_tensor, c_graph_p, ctypes.POINTER(c_tensor), ctypes.c_int32, ctypes.c_int32)
_declare("tf_slice", c_tensor, c_graph_p, c_tensor, ctypes.c_int32, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
_declare("tf_conv2d", c_tensor, c_graph_p, c_tensor, c_tensor, c_tensor, ctypes.POINTER(ConvAttrs))
_declare("tf_pool2d", c_tensor, c_graph_p, ctypes.c_int, c_tensor, ctypes.POINTER(PoolAttrs))
_declare("tf_dropout", c_tensor, c_graph_p, c_tensor, ctypes.c_float)
_declare("tf_cast", c_tensor, c_graph_p, c_tensor, ctypes.c_int)
_declare("tf_attention", c_tensor, c_graph_p, c_tensor, c_tensor, c_tensor, ctypes.c_int32, ctypes.c_bool)
_declare("tf_cross_entropy", c_tensor, c_graph_p, c_tensor, c_tensor, ctypes.c_int64)

# layer helpers (include/tightfit/layers.h)
_declare("tf_layers_linear", c_tensor, c_graph_p, c_tensor, ctypes.c_int64, ctypes.c_int64, ctypes.c_bool, Init,
         ctypes.c_char_p)
_declare("tf_layers_layer_norm", c_tensor, c_graph_p, c_tensor, ctypes.c_int64, ctypes.c_float, ctypes.c_char_p)
_declare("tf_layers_conv2d", c_tensor, c_graph_p, c_tensor, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
         ctypes.c_int32, ctypes.c_int32, ctypes.c_char_p)
_declare("tf_layers_positions", c_tensor, c_graph_p, ctypes.c_int32, c_tensor, ctypes.c_char_p)
for _name in ("tf_layers_self_attention", "tf_layers_mlp"):
    _declare(_name, c_tensor, c_graph_p, c_tensor, ctypes.POINTER(BlockConfig), ctypes.c_char_p)
_declare("tf_layers_cross_attention", c_tensor, c_graph_p, c_tensor, c_tensor, ctypes.POINTER(BlockConfig),
         ctypes.c_char_p)
_declare("tf_layers_block", c_tensor, c_graph_p, c_tensor, c_tensor, ctypes.POINTER(BlockConfig), ctypes.c_char_p)
_declare("tf_layers_stack", c_tensor, c_graph_p, c_tensor, c_tensor, ctypes.POINTER(BlockConfig), ctypes.c_int64,
         ctypes.c_char_p, ctypes.c_char_p)
_declare("tf_layers_gpt2_block", BlockConfig, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
_declare("tf_layers_finish", None, c_graph_p, c_tensor, ctypes.c_char_p, c_tensor, ctypes.POINTER(TrainingConfig))
_declare("tf_layers_adamw", TrainingConfig)
_declare("tf_layers_sgd", TrainingConfig)
GPT2_NAMES = ctypes.cast(lib.tf_layers_gpt2_names, ctypes.POINTER(BlockNames))
TIMM_NAMES = ctypes.cast(lib.tf_layers_timm_names, ctypes.POINTER(BlockNames))

# plans, sessions, the feed, the command line
_declare("tf_plan_load", c_status, ctypes.c_char_p, ctypes.POINTER(c_plan_p))
_declare("tf_plan_save", c_status, c_plan_p, ctypes.c_char_p)
_declare("tf_plan_destroy", None, c_plan_p)
_declare("tf_plan_total_bytes", ctypes.c_int64, c_plan_p)
_declare("tf_plan_device_total", ctypes.c_int64, c_plan_p)
_declare("tf_session_options_default", SessionOptions)
_declare("tf_session_create", c_status, c_plan_p, ctypes.POINTER(SessionOptions), ctypes.POINTER(c_session_p))
_declare("tf_session_destroy", None, c_session_p)
_declare("tf_session_memory_use", SessionMemory, c_session_p)
_declare("tf_session_scaling_state", SessionScaling, c_session_p)
_declare("tf_session_write", c_status, c_session_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int64)
_declare("tf_session_check_input", c_status, c_session_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int64)
_declare("tf_session_read", c_status, c_session_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int64)
_declare("tf_session_micro_step", c_status, c_session_p, ctypes.POINTER(ctypes.c_double))
_declare("tf_session_optimizer_step", c_status, c_session_p)
_declare("tf_session_forward", c_status, c_session_p, ctypes.POINTER(ctypes.c_double))
_declare("tf_session_optimizer_steps", ctypes.c_int64, c_session_p)
_declare("tf_session_save", c_status, c_session_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int32)
_declare("tf_session_load", c_status, c_session_p, ctypes.c_char_p)
_declare("tf_feed_open", c_status, c_plan_p, ctypes.c_char_p, ctypes.c_uint64, ctypes.POINTER(c_feed_p))
_declare("tf_feed_close", None, c_feed_p)
_declare("tf_feed_next", c_status, c_feed_p, c_session_p)
_declare("tf_feed_stage_in", c_status, c_feed_p, c_session_p, ctypes.c_int64)
_declare("tf_cli_run_captured", ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p),
         ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p))
# compile, check, report, devices (tightfit/cli.h's requests)
c_request_p = ctypes.c_void_p
c_text_p = ctypes.POINTER(ctypes.c_void_p)  # char **: a malloc'd NUL-terminated text, freed by take_text
_declare("tf_request_create", c_status, ctypes.POINTER(c_request_p))
_declare("tf_request_destroy", None, c_request_p)
_declare("tf_request_set", c_status, c_request_p, ctypes.c_char_p, ctypes.c_char_p)
_declare("tf_request_compile", c_status, c_request_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(c_plan_p),
         c_text_p)
_declare("tf_request_check", c_status, c_request_p, ctypes.c_char_p, c_text_p, ctypes.POINTER(ctypes.c_bool))
_declare("tf_request_report", c_status, ctypes.c_char_p, ctypes.c_char_p, c_text_p)
_declare("tf_request_devices", c_status, c_text_p)

HAS_ONNX = hasattr(lib, "tf_onnx_import")
if HAS_ONNX:
    _declare("tf_onnx_import", c_status, ctypes.c_char_p, ctypes.POINTER(OnnxOptions), ctypes.POINTER(c_graph_p))
    if hasattr(lib, "tf_onnx_options_default"):
        _declare("tf_onnx_options_default", OnnxOptions)
    if hasattr(lib, "tf_onnx_frozen_batch_norms"):
        _declare("tf_onnx_frozen_batch_norms", ctypes.c_int32, c_graph_p)
    if hasattr(lib, "tf_onnx_batch_statistics_norms"):
        _declare("tf_onnx_batch_statistics_norms", ctypes.c_int32, c_graph_p)


def check(status, context=None):
    """Raises TightfitError carrying the tf_status message when `status` is not NULL (and frees it)."""
    if not status:
        return
    message = lib.tf_status_message(status).decode("utf-8", "replace")
    code = lib.tf_code_name(lib.tf_status_code(status)).decode()
    lib.tf_status_free(status)
    raise TightfitError(f"{context}: {message}" if context else message, code)


def take_text(pointer):
    """The text a `char **` out-parameter received (a ctypes.c_void_p), decoded, and freed."""
    if not pointer.value:
        return ""
    text = ctypes.string_at(pointer.value).decode("utf-8", "replace")
    libc.free(pointer.value)
    return text


def run_cli(args):
    """Runs `tightfit ARGS` in this process (tightfit/cli.h: tf_cli_run_captured; for tests and tools
    that want a whole command, the package itself calls the requests); returns (exit code, stdout,
    stderr)."""
    argv = [b"tightfit"] + [str(a).encode() for a in args]
    array = (ctypes.c_char_p * (len(argv) + 1))(*argv, None)
    out, err = ctypes.c_void_p(), ctypes.c_void_p()
    code = lib.tf_cli_run_captured(len(argv), array, ctypes.byref(out), ctypes.byref(err))
    texts = []
    for pointer in (out, err):
        texts.append(ctypes.string_at(pointer.value).decode("utf-8", "replace") if pointer.value else "")
        libc.free(pointer.value)
    if code < 0:
        raise TightfitError("cannot capture the command's output (out of memory)")
    return code, texts[0], texts[1]

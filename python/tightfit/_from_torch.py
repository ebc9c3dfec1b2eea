"""tightfit.from_torch: a PyTorch module exported through ONNX, as it is (training mode, its own parameter
tensors), and imported by the C importer (include/tightfit/onnx.h). docs/import.md says what it keeps."""
import ctypes
import functools
import json
import os
import shutil
import warnings
import weakref

from . import (_checksum, _complex_symbolics, _lib, _linalg_symbolics, _loss_symbolics, _math_symbolics,
               _order_symbolics, _pointwise_symbolics, _scatter_symbolics, _spectral_symbolics, _verify)
from ._lib import TightfitError
from . import Graph, _bytes, _declare_trainable, _workdir, library_path

# The ONNX domain of tightfit's own operators (import/onnx_ops.h's OX_TIGHTFIT_DOMAIN).
STOP_GRADIENT_DOMAIN = "tightfit"


def _running_statistics(torch, module):
    """name -> float32 numpy copy of each running mean and variance of the BatchNorms in training mode
    (state_dict names, as the ONNX export names its initializers)."""
    found = {}
    for prefix, m in module.named_modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.training and m.track_running_stats:
            for buffer in ("running_mean", "running_var"):
                value = getattr(m, buffer)
                if value is not None:
                    found[f"{prefix}.{buffer}" if prefix else buffer] = value.detach().float().cpu().numpy().copy()
    return found


def _set_weights(path, values):
    """Overwrites tensors of safetensors file `path` in place with `values` (name -> float32 array of
    the stored shape), and their checksums where the file has them (tightfit's writer: metadata
    "tightfit.xxh64.NAME", 16 hex digits, so the header keeps its size); returns the names it found."""
    import numpy as np
    with open(path, "r+b") as f:
        size = int.from_bytes(f.read(8), "little")
        raw = f.read(size)
        header = json.loads(raw)
        metadata = header.get("__metadata__") or {}
        done = []
        for name, value in values.items():
            entry = header.get(name)
            data = np.ascontiguousarray(value, dtype=np.float32).tobytes()
            if not entry or entry.get("dtype") != "F32" or entry["data_offsets"][1] - entry["data_offsets"][0] != len(data):
                continue
            f.seek(8 + size + entry["data_offsets"][0])
            f.write(data)
            key = _checksum.PREFIX + name
            if key in metadata:
                old = (json.dumps(key) + ":" + json.dumps(metadata[key])).encode()
                new = (json.dumps(key) + ":" + json.dumps(format(_checksum.xxh64(data), "016x"))).encode()
                if raw.count(old) != 1 or len(new) != len(old):
                    raise TightfitError(f"{path}: cannot update the checksum of '{name}' in place")
                raw = raw.replace(old, new)
            done.append(name)
        f.seek(8)
        f.write(raw)
    return done


def _spectral_normed(torch, module):
    """The names of the submodules under spectral_norm: the hook form (torch.nn.utils.spectral_norm, a
    forward pre-hook and weight_u / weight_v buffers) or the parametrization form
    (torch.nn.utils.parametrizations.spectral_norm)."""
    found = []
    for name, m in module.named_modules():
        hooks = [h for h in getattr(m, "_forward_pre_hooks", {}).values() if type(h).__name__ == "SpectralNorm"]
        parametrized = [p for plist in getattr(getattr(m, "parametrizations", None) or {}, "values", lambda: [])()
                        for p in plist if type(p).__name__ == "_SpectralNorm"]
        if hooks or parametrized:
            found.append(name or type(m).__name__)
    return found


def _kept_dropout(torch, m):
    """Whether `m` is a Dropout layer that trains (p > 0, training mode): exported as ONNX Dropout in
    training mode, which imports as tightfit's dropout (seeded masks, the same rate and scaling)."""
    return isinstance(m, torch.nn.Dropout) and m.training and m.p > 0


def _dropout_left_out(torch, module, keep_dropout):
    """'name (p=...)' of each dropout the export leaves out: Dropout layers unless `keep_dropout`
    (_kept_dropout), Dropout1d/2d/3d and AlphaDropout, MultiheadAttention's attention dropout and a rate
    attribute that F.dropout reads, with p > 0 in training mode (exported as the identity, as in eval mode)."""
    found = []
    for name, m in module.named_modules():
        if keep_dropout and _kept_dropout(torch, m):
            continue
        if isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.training and m.p > 0:
            found.append(f"{name or type(m).__name__} (p={m.p:g})")
        elif isinstance(m, torch.nn.MultiheadAttention) and m.training and m.dropout > 0:
            found.append(f"{name or 'MultiheadAttention'} (attention dropout p={m.dropout:g})")
        elif m.training and not isinstance(m, torch.nn.modules.dropout._DropoutNd):
            # a rate kept as a number for F.dropout(x, p=self.dropout, training=self.training), as
            # transformers' BART, Whisper and Llama attention write it: the module is in eval mode meanwhile
            found += [f"{name + '.' if name else ''}{key} (F.dropout p={value:g})" for key, value in vars(m).items()
                      if "dropout" in key and isinstance(value, float) and value > 0]
    return found


def _padding_rows_as_torch_trains_them(torch, module):
    """Each nn.Embedding with a padding_idx made to export as PyTorch trains it: PyTorch never gives its
    padding row a gradient, which ONNX's Gather cannot say. While the export traces, a lookup of such a
    layer's weight with its padding_idx computes where(ids == padding_idx, row, embedding(ids, weight)),
    `row` the padding row's value now (a constant): the same output, and no gradient reaches the
    padding row. A weight tied to another use (a masked LM's head) trains its padding row through that
    use, and PyTorch's lookups of the padding id read it as it trains: `row` is then the row itself,
    detached (tightfit's StopGradient). The lookup is F.embedding's, so a subclass's own forward (a
    scaled embedding: BioGPT's, M2M100's) still runs around it. Returns the function that puts
    F.embedding back, or None. (A layer with max_norm, which renormalises rows in the forward pass,
    exports as it would without this.)"""
    import torch.nn.functional as F
    owners = {}
    for prefix, m in module.named_modules():  # a tied weight is a parameter of two modules
        for name, p in m._parameters.items():
            if p is not None:
                owners.setdefault(id(p), []).append(f"{prefix}.{name}" if prefix else name)
    rows = {}
    for m in module.modules():
        if isinstance(m, torch.nn.Embedding) and m.padding_idx is not None and m.max_norm is None:
            tied = len(owners.get(id(m.weight), [])) > 1
            rows[id(m.weight)] = (m.weight, m.padding_idx, None if tied else m.weight.detach()[m.padding_idx].clone())
    if not rows:
        return None
    original = F.embedding

    def embedding(ids, weight, padding_idx=None, max_norm=None, *args, **kwargs):
        weight_of, padding, row = rows.get(id(weight), (None, None, None))
        if weight_of is not weight or padding_idx is None or max_norm is not None or \
                padding_idx % weight.size(0) != padding:
            return original(ids, weight, padding_idx, max_norm, *args, **kwargs)
        looked_up = original(ids, weight, None, None, *args, **kwargs)
        keep = (ids != padding).unsqueeze(-1).to(looked_up.dtype)
        if row is None:
            return looked_up * keep + weight[padding].detach() * (1 - keep)
        return looked_up * keep if not row.any() else looked_up * keep + row * (1 - keep)
    F.embedding = embedding

    def restore():
        F.embedding = original
    return restore


def _sparse_moe_blocks_densely(torch, module):
    """Each transformers sparse mixture-of-experts block (Mixtral's, Qwen2-MoE's, OLMoE's, Jamba's:
    a class named *SparseMoeBlock with `experts`, `top_k` and a router Linear `gate` or `router`;
    Switch Transformers' sparse MLP, _switch_densely; DBRX's experts, _dbrx_densely; Granite MoE's,
    _parallel_experts_densely) made to export densely: its forward sends each
    expert the tokens routed to it by torch.where(mask), a shape the data decides (ONNX NonZero),
    which no plan of fixed shapes holds. While the export
    traces, the block computes every expert on every token and weights it by the router's top-k
    probabilities scattered over the experts (zero elsewhere, renormalised where the block
    renormalises them), plus Qwen2-MoE's gated shared expert: the same output and the same
    gradients (an expert's parameters get nothing from the tokens not routed to it), at
    num_experts / top_k times the experts' work and activations. A block with router jitter on
    (training with jitter_noise > 0: random) is left as it is. Returns the function that puts the
    forwards back, or None."""
    import torch.nn.functional as F
    patched = []
    for m in module.modules():
        if type(m).__name__ == "SwitchTransformersSparseMLP" and isinstance(getattr(m, "experts", None),
                                                                           torch.nn.ModuleDict):
            m.forward = _switch_densely(torch, m)
            patched.append(m)
            continue
        if type(m).__name__ == "DbrxExperts" and all(hasattr(getattr(m, "mlp", None), w) for w in ("w1", "v1", "w2")):
            m.forward = _dbrx_densely(torch, m)
            patched.append(m)
            continue
        if type(m).__name__ == "GraniteMoeMoE" and all(hasattr(m, a) for a in ("input_linear", "output_linear",
                                                                                 "router", "activation")):
            m.forward = _parallel_experts_densely(torch, m)
            patched.append(m)
            continue
        router = getattr(m, "gate", None) if isinstance(getattr(m, "gate", None), torch.nn.Linear) else \
            getattr(m, "router", None)
        if not type(m).__name__.endswith("SparseMoeBlock") or not isinstance(router, torch.nn.Linear) or \
                not isinstance(getattr(m, "experts", None), torch.nn.ModuleList) or \
                not isinstance(getattr(m, "top_k", None), int) or getattr(m, "jitter_noise", 0) > 0:
            continue
        renormalise = getattr(m, "norm_topk_prob", type(m).__name__.startswith("Mixtral"))

        def forward(hidden_states, m=m, router=router, renormalise=renormalise):
            batch, length, width = hidden_states.shape
            x = hidden_states.reshape(-1, width)
            logits = router(x)
            top, chosen = torch.topk(F.softmax(logits, dim=1, dtype=torch.float), m.top_k, dim=-1)
            if renormalise:
                top = top / top.sum(dim=-1, keepdim=True)
            weights = torch.zeros_like(logits, dtype=x.dtype).scatter(1, chosen, top.to(x.dtype))
            out = sum(weights[:, e:e + 1] * expert(x) for e, expert in enumerate(m.experts))
            if getattr(m, "shared_expert", None) is not None and getattr(m, "shared_expert_gate", None) is not None:
                out = out + torch.sigmoid(m.shared_expert_gate(x)) * m.shared_expert(x)
            return out.reshape(batch, length, width), logits
        m.forward = forward
        patched.append(m)
    if not patched:
        return None

    def restore():
        for m in patched:
            m.__dict__.pop("forward", None)
    return restore


def _dbrx_densely(torch, m):
    """DBRX's experts (DbrxExperts: one GLU whose w1, v1, w2 stack every expert's [ffn, d] weights) as a
    dense forward: each expert on every token, weighted by its top-k weight scattered over the experts.
    Its own forward gathers each expert's tokens by torch.where (NonZero) and skips an expert no token
    chose (a branch the export would freeze)."""
    def forward(x, weights, top_weights, top_experts):
        batch, length, width = x.shape
        flat = x.reshape(-1, width)
        experts, ffn = m.mlp.moe_num_experts, m.mlp.ffn_hidden_size
        dense = torch.zeros(flat.shape[0], experts, dtype=flat.dtype).scatter(1, top_experts, top_weights.to(flat.dtype))
        w1, v1, w2 = (w.view(experts, ffn, width) for w in (m.mlp.w1, m.mlp.v1, m.mlp.w2))
        out = sum(dense[:, e:e + 1] * m.mlp(flat, w1[e], v1[e], w2[e]) for e in range(experts))
        return out.reshape(batch, length, width)
    return forward


def _parallel_experts_densely(torch, m):
    """Granite MoE's block (GraniteMoeMoE: a top-k router Linear `router.layer`, then every expert's GLU in
    two ParallelExperts whose weights stack the experts, [experts, out, in]) as a dense forward: each
    expert on every token, weighted by its top-k softmax weight scattered over the experts. Its own
    forward sorts the tokens by expert and splits them by the counts (`.tolist()`), which the export
    would freeze, and gathers them back by index_add."""
    import torch.nn.functional as F

    def forward(layer_input):
        batch, length, width = layer_input.shape
        x = layer_input.reshape(-1, width)
        logits = m.router.layer(x).float()
        top, chosen = logits.topk(m.router.top_k, dim=1)
        gates = torch.softmax(top, dim=1).type_as(x)
        weights = torch.zeros_like(logits, dtype=x.dtype).scatter(1, chosen, gates)
        out = 0
        for e in range(m.input_linear.weight.shape[0]):
            gate, up = F.linear(x, m.input_linear.weight[e]).chunk(2, dim=-1)
            out = out + weights[:, e:e + 1] * F.linear(m.activation(gate) * up, m.output_linear.weight[e])
        return out.reshape(batch, length, width), logits
    return forward


def _switch_densely(torch, m):
    """Switch Transformers' sparse MLP (top-1 routing, tokens past an expert's capacity kept as they are)
    as a dense forward: each expert on every token, taken where the router's mask routes the token to
    it (torch.where), the others' states kept. Its own forward indexes by the mask (NonZero) and keeps
    only the experts the traced batch used (`.tolist()`), which the export would freeze."""
    def forward(hidden_states):
        router_mask, router_probs, router_logits = m.router(hidden_states)
        expert_index = torch.argmax(router_mask, dim=-1)
        routed = router_mask.bool()
        next_states = hidden_states
        for idx in range(routed.shape[-1]):
            expert = getattr(m.experts, f"expert_{idx}")
            next_states = torch.where(routed[:, :, idx, None], expert(hidden_states), next_states)
        return router_probs * next_states, (router_logits, expert_index)
    return forward


def _no_generation_cache(module):
    """Each submodule's `config.use_cache` (a transformers model's) set False while the export traces: the
    export runs the module in eval mode, where a transformers model builds its key/value cache for
    generation (Gemma 2's HybridCache, whose length it then reads from the cache's data), which
    training never uses. Returns the function that puts the configs back, or None."""
    changed = []
    for m in module.modules():
        config = getattr(m, "config", None)
        if getattr(config, "use_cache", None) is True and all(config is not c for c in changed):
            config.use_cache = False
            changed.append(config)
    if not changed:
        return None

    def restore():
        for config in changed:
            config.use_cache = True
    return restore


def _detach_as_stop_gradient(torch):
    """Makes the export write PyTorch's detach() as tightfit's StopGradient (domain "tightfit"), where
    torch's own symbolic writes nothing and the detached value would train through (a straight-through
    estimator, a commitment loss, a target network's output). Returns the function that puts torch's
    symbolic back."""
    def stop_gradient(g, x):
        out = g.op(f"{STOP_GRADIENT_DOMAIN}::StopGradient", x)
        out.setType(x.type())
        return out
    torch.onnx.register_custom_op_symbolic("aten::detach", stop_gradient, 9)
    return lambda: torch.onnx.unregister_custom_op_symbolic("aten::detach", 9)


def _repeat_interleave_as_expand(torch):
    """Makes the export write torch.repeat_interleave(x, r, dim) by a constant r along an axis whose
    later axes have fixed sizes (GPT-J's and CodeGen's rotary tables: repeat_interleave(sin[:, :, None,
    :], 2, 3)) as Unsqueeze, Expand and Reshape: each element repeated r times in place. Where a size of
    x is dynamic, torch's own symbolic writes a Loop over a sequence of slices, which the importer
    refuses. Other forms (repeats per element, no dim) keep torch's symbolic. Returns the function that
    puts torch's symbolics back."""
    helper, symbolic_opset9, symbolic_opset13 = _exporter("symbolic_helper", "symbolic_opset9", "symbolic_opset13")

    def own(g, self, repeats, dim, output_size):
        if g.opset >= 13:
            return symbolic_opset13.repeat_interleave(g, self, repeats, dim, output_size)
        return symbolic_opset9.repeat_interleave(g, self, repeats, dim, output_size)

    def as_expand(g, self, repeats, dim=None, output_size=None):
        rank, sizes = helper._get_tensor_rank(self), helper._get_tensor_sizes(self)
        if helper._is_none(dim) or rank is None or sizes is None or not helper._is_constant(repeats):
            return own(g, self, repeats, dim, output_size)
        times = helper._maybe_get_const(repeats, "t")
        times = torch.as_tensor(times).reshape(-1)
        axis = helper._get_const(dim, "i", "dim")
        axis = axis + rank if axis < 0 else axis
        if (times.numel() != 1 or int(times[0]) < 1 or not 0 <= axis < rank or
                any(size is None for size in sizes[axis + 1:])):
            return own(g, self, repeats, dim, output_size)
        count = int(times[0])
        spread = helper._unsqueeze_helper(g, self, [axis + 1])
        ones = [1] * (axis + 1) + [count] + [1] * (rank - axis - 1)
        spread = g.op("Expand", spread, g.op("Constant", value_t=torch.tensor(ones, dtype=torch.int64)))
        merged = [0] * axis + [-1] + [int(size) for size in sizes[axis + 1:]]
        return g.op("Reshape", spread, g.op("Constant", value_t=torch.tensor(merged, dtype=torch.int64)))

    return _register_symbolic(torch, "aten::repeat_interleave", as_expand, (9, 13))


def _register_symbolic(torch, name, symbolic, versions):
    """Registers `symbolic` for the aten op `name` from each opset of `versions`; returns the function
    that removes them (torch's own symbolics then apply again)."""
    for version in versions:
        torch.onnx.register_custom_op_symbolic(name, symbolic, version)

    def restore():
        for version in versions:
            torch.onnx.unregister_custom_op_symbolic(name, version)
    return restore


def _torch_1x(torch):
    """Whether this is PyTorch 1.x, whose exporter some patches below correct."""
    return int(torch.__version__.split(".")[0]) < 2


def _embedding_bags_as_lookups(torch):
    """While exporting: F.embedding_bag (nn.EmbeddingBag) of a 2-d input (bags of one length, no offsets)
    as the embedding of every index reduced over the bag, which torch writes as a Loop over the bags that
    the importer refuses: "sum" (times per_sample_weights), "mean" or "max", the entries equal to
    padding_idx left out (an empty bag gives zeros, as PyTorch's). Bags by offsets keep torch's export;
    scale_grad_by_freq is refused (it scales the gradient, not the value). F.embedding with max_norm is
    refused by name (it rescales the weight rows in place at every forward). Returns the function that
    puts them back."""
    F = torch.nn.functional
    bag, lookup = F.embedding_bag, F.embedding

    def embedding(input, weight, padding_idx=None, max_norm=None, *args, **kwargs):
        if max_norm is not None:
            raise TightfitError("from_torch: F.embedding with max_norm is not supported: at every forward pass PyTorch "
                                "rescales the rows it looks up in place (embedding_renorm_), a change of the weights "
                                "outside the optimizer that a plan does not make", "unsupported")
        return lookup(input, weight, padding_idx, max_norm, *args, **kwargs)

    def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                      sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
        if input.dim() != 2 or offsets is not None or max_norm is not None:
            return bag(input, weight, offsets, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
                       per_sample_weights, include_last_offset, padding_idx)
        if scale_grad_by_freq:
            raise TightfitError("from_torch: an embedding bag with scale_grad_by_freq is not supported", "unsupported")
        rows = lookup(input, weight)  # [B, L, D]
        keep = None
        if padding_idx is not None:
            padding = padding_idx + weight.shape[0] if padding_idx < 0 else padding_idx
            keep = (input != padding).unsqueeze(-1).to(rows.dtype)
        if per_sample_weights is not None:
            rows = rows * per_sample_weights.unsqueeze(-1)
        if mode == "max":
            if keep is not None:
                rows = rows * keep + (keep - 1) * 3.0e38
            most = rows.max(1).values
            return most if keep is None else most * (keep.sum(1) > 0).to(rows.dtype)
        total = (rows if keep is None else rows * keep).sum(1)
        if mode == "sum":
            return total
        count = torch.full_like(total[:, :1], input.shape[1]) if keep is None else keep.sum(1).clamp(min=1)
        return total / count

    F.embedding_bag, F.embedding = embedding_bag, embedding

    def restore():
        F.embedding_bag, F.embedding = bag, lookup
    return restore


def _torchaudio_deltas_as_slices(torch):
    """While exporting, where the module's code has torchaudio loaded: torchaudio.functional.compute_deltas
    (transforms.ComputeDeltas: an ASR front end's delta features) as PyTorch's formula over shifted slices,
    sum over k of k (x[t + k] - x[t - k]) / (2 sum k^2) after the same padding. torchaudio convolves with a
    kernel repeated by a count computed from the batch, which torch's exporter refuses ("kernel of unknown
    shape"). Returns the function that puts it back."""
    import sys
    functional = sys.modules.get("torchaudio.functional")
    inner = sys.modules.get("torchaudio.functional.functional")
    if functional is None or not hasattr(functional, "compute_deltas"):
        return lambda: None
    original = functional.compute_deltas

    def compute_deltas(specgram, win_length=5, mode="replicate"):
        if win_length < 3:
            return original(specgram, win_length, mode)  # its own error
        n = (win_length - 1) // 2
        steps = specgram.shape[-1]
        padded = torch.nn.functional.pad(specgram.reshape(1, -1, steps), (n, n), mode=mode)
        total = sum(k * (padded[..., n + k:n + k + steps] - padded[..., n - k:n - k + steps]) for k in range(1, n + 1))
        # reshape_as: the batch stays symbolic (a reshape to specgram.size() would record the traced sizes)
        return (total / (n * (n + 1) * (2 * n + 1) / 3)).reshape_as(specgram)

    modules = [m for m in (functional, inner) if m is not None and getattr(m, "compute_deltas", None) is original]
    for m in modules:
        m.compute_deltas = compute_deltas

    def restore():
        for m in modules:
            m.compute_deltas = original
    return restore


def _circular_pad_as_torch(torch):
    """PyTorch 1.x's export of circular padding (F.pad(mode="circular"), Conv2d(padding_mode="circular"))
    takes each axis's left and right widths in the wrong order and slices one element short of the end
    (torch/onnx/symbolic_opset9.py's _pad_circular): onnxruntime runs its file 1.8 away from PyTorch's
    output on a Conv2d(padding=1, padding_mode="circular"), and the import trained that model. Under 1.x
    the export writes it as PyTorch computes it: per padded axis, from the last, Concat(x[-left:], x,
    x[:right]). Negative (cropping) circular pads, and inputs of unknown rank, are refused. 2.x exports
    it right and keeps its own symbolic. Returns the function that puts torch's symbolic back."""
    if not _torch_1x(torch):
        return lambda: None
    helper, symbolic_opset9, symbolic_opset11 = _exporter("symbolic_helper", "symbolic_opset9", "symbolic_opset11")

    def pad(g, input, pad, mode, value):
        own = symbolic_opset11.pad if g.opset >= 11 else symbolic_opset9.pad
        if helper._parse_arg(mode, "s") != "circular":
            return own(g, input, pad, mode, value)
        padding, rank = symbolic_opset9._convert_padding_node(pad), helper._get_tensor_rank(input)
        if rank is None or len(padding) % 2 or len(padding) // 2 > rank or min(padding) < 0:
            raise TightfitError(f"from_torch: circular padding {list(padding)} of an input of rank {rank}: only "
                                "non-negative widths of an input of known rank export right under PyTorch 1.x")
        out = input
        for i in range(len(padding) // 2):
            axis, left, right = rank - 1 - i, padding[2 * i], padding[2 * i + 1]
            parts = [helper._slice_helper(g, out, axes=[axis], starts=[-left], ends=[2 ** 62])] if left else []
            parts.append(out)
            if right:
                parts.append(helper._slice_helper(g, out, axes=[axis], starts=[0], ends=[right]))
            out = g.op("Concat", *parts, axis_i=axis) if len(parts) > 1 else out
        return out

    return _register_symbolic(torch, "aten::pad", pad, (9, 11))


def _frobenius_norm_as_l2(torch):
    """PyTorch 1.x exports x.norm(dim=...) (aten::frobenius_norm) as Sqrt(ReduceSum(Mul(x, x))), whose
    square root differentiates to 0.5 / 0 at a zero row (NaN through a masked, all-zero row), where
    PyTorch's norm backward gives it 0. Under 1.x the export writes ReduceL2, which the importer reads
    as PyTorch's norm (import/onnx_reduce.c); 2.x writes ReduceL2 itself. Returns the function that
    puts torch's symbolic back."""
    if not _torch_1x(torch):
        return lambda: None
    helper, = _exporter("symbolic_helper")

    def frobenius_norm(g, x, dim=None, keepdim=False):
        keep = 0 if keepdim is None or helper._is_none(keepdim) else helper._get_const(keepdim, "i", "keepdim")
        axes = None if dim is None or helper._is_none(dim) else helper._get_const(dim, "is", "dim")
        if not axes:  # torch.norm(x, p="fro") passes dim=[]: every axis (an empty axes attribute is invalid)
            return g.op("ReduceL2", x, keepdims_i=keep)
        return g.op("ReduceL2", x, axes_i=axes, keepdims_i=keep)

    return _register_symbolic(torch, "aten::frobenius_norm", frobenius_norm, (9, 13))


def _zero_as_zeros_like(torch):
    """Gives PyTorch 1.x's exporter a symbolic for `x.zero_()` (aten::zero; 2.x has one): zeros of x's
    shape and type, which the exporter writes into a sliced tensor as a slice assignment (torchvision's
    Swin v2 zeroes the key third of a copy of its qkv bias). Returns the function that removes it."""
    if not _torch_1x(torch):
        return lambda: None

    def zero(g, x):
        return g.op("ConstantOfShape", g.op("Shape", x), value_t=torch.tensor([0], dtype=_dtype_of(torch, x)))

    return _register_symbolic(torch, "aten::zero", zero, (9,))


def _rms_norm_as_ops(torch, opset):
    """Gives torch.nn.RMSNorm / F.rms_norm (aten::rms_norm, PyTorch 2.4+) a symbolic where the
    exporter has none at `opset` (ONNX's RMSNormalization is opset 23): x * (1 / sqrt(mean(x^2) + eps))
    * weight over the normalised axes, eps PyTorch's default (the dtype's machine epsilon) when None,
    which the importer reads as one rms_norm over the last axis. Returns the function that removes it."""
    if _registered("aten::rms_norm", opset) or not hasattr(torch.nn.functional, "rms_norm"):
        return lambda: None
    helper, = _exporter("symbolic_helper")

    def rms_norm(g, x, normalized_shape, weight=None, eps=None):
        axes = list(range(-len(helper._get_const(normalized_shape, "is", "normalized_shape")), 0))
        dtype = _dtype_of(torch, x)
        eps = None if eps is None or helper._is_none(eps) else helper._get_const(eps, "f", "eps")
        epsilon = torch.finfo(dtype).eps if eps is None else float(eps)
        mean = g.op("ReduceMean", g.op("Mul", x, x), axes_i=axes, keepdims_i=1)
        root = g.op("Sqrt", g.op("Add", mean, g.op("Constant", value_t=torch.tensor(epsilon, dtype=dtype))))
        y = g.op("Mul", x, g.op("Reciprocal", root))
        return y if weight is None or helper._is_none(weight) else g.op("Mul", y, weight)

    return _register_symbolic(torch, "aten::rms_norm", rms_norm, (9,))


def _exporter(*names):
    """The TorchScript exporter's modules `names` (symbolic_helper, symbolic_opset9, _type_utils, ...):
    torch.onnx.NAME in 1.x, torch.onnx._internal.torchscript_exporter.NAME from 2.9, where
    torch.onnx.NAME is a shim that star-imports only the public names (no _is_none, no __or_), and
    is what a module imported first (torchvision's ops) leaves in place of the real one."""
    import importlib
    found = []
    for name in names:
        try:
            found.append(importlib.import_module("torch.onnx._internal.torchscript_exporter." + name))
        except ImportError:
            found.append(importlib.import_module("torch.onnx." + name))
    return found


def _load_every_opset():
    """Imports each of the exporter's symbolic_opsetN modules, which register torch's symbolics as they load:
    2.x loads those of opset 10 and up only when an export starts, so the symbolics registered (or looked up
    to call) before it would miss them (opset 14's batch_norm, 16's scatter_add)."""
    import importlib
    for version in range(7, 21):
        for module in ("torch.onnx._internal.torchscript_exporter.", "torch.onnx."):
            try:
                importlib.import_module(f"{module}symbolic_opset{version}")
                break
            except ImportError:
                continue


def _registry():
    """The TorchScript exporter's symbolic registry (its module moved in 2.x), or None."""
    import importlib
    for module in ("torch.onnx._internal.torchscript_exporter.registration", "torch.onnx._internal.registration"):
        try:
            return importlib.import_module(module).registry
        except (ImportError, AttributeError):
            continue
    return None


def _registered(name, opset):
    """Whether torch's exporter has a symbolic for `name` at `opset`."""
    registry = _registry()
    return registry is not None and registry.is_registered_op(name, opset)


def _symbolic_of(name, opset):
    """The symbolic torch's exporter applies to `name` at `opset` now (a custom one first), or None."""
    registry = _registry()
    group = registry.get_function_group(name) if registry is not None else None
    return group.get(opset) if group is not None else None


def _bitwise_ops_of_masks(torch, opset):
    """Gives torch.bitwise_or/and/xor (and their in-place forms: Mistral's sliding-window mask,
    `diagonal_attend_mask.bitwise_or_(sliding_attend_mask)`) the symbolics of `|`, `&` and `^` (ONNX
    Or, And, Xor of bool masks) where torch's exporter has none (1.13 has none of the three). Returns
    the function that removes them."""
    symbolic_opset9, = _exporter("symbolic_opset9")
    added = []
    for name, same in (("bitwise_or", "__or_"), ("bitwise_and", "__and_"), ("bitwise_xor", "__xor_")):
        if not _registered("aten::" + name, opset) and hasattr(symbolic_opset9, same):
            torch.onnx.register_custom_op_symbolic("aten::" + name, getattr(symbolic_opset9, same), 9)
            added.append("aten::" + name)

    def restore():
        for name in added:
            torch.onnx.unregister_custom_op_symbolic(name, 9)
    return restore


def _hyperbolic_ops(torch, opset):
    """Gives torch.sinh, cosh, asinh, acosh and atanh the symbolics ONNX has for them since opset 9
    (Sinh, Cosh, Asinh, Acosh, Atanh) where torch's exporter has none (1.13's and 2.x's TorchScript
    exporter have none of the five). Returns the function that removes them."""
    added = []
    for name in ("sinh", "cosh", "asinh", "acosh", "atanh"):
        if not _registered("aten::" + name, opset):
            op_type = name[0].upper() + name[1:]
            torch.onnx.register_custom_op_symbolic("aten::" + name, lambda g, x, op_type=op_type: g.op(op_type, x), 9)
            added.append("aten::" + name)

    def restore():
        for name in added:
            torch.onnx.unregister_custom_op_symbolic(name, 9)
    return restore


def _convolution_mode_as_conv(torch, opset):
    """Gives convolutions with string padding (nn.Conv2d(padding="same" or "valid"): aten::_convolution_mode,
    SigLIP's patch embedding) a symbolic where torch's exporter has none (1.13): an ONNX Conv with explicit
    pads, "same" padding dilation (k - 1) in all per axis, its odd element after the input as PyTorch
    pads it. Returns the function that removes it."""
    if _registered("aten::_convolution_mode", opset):
        return lambda: None
    helper, = _exporter("symbolic_helper")

    def convolution_mode(g, x, weight, bias, stride, padding, dilation, groups):
        mode = helper._parse_arg(padding, "s")
        kernel = (helper._get_tensor_sizes(weight) or [])[2:]
        if mode not in ("same", "valid") or not kernel or any(not isinstance(k, int) for k in kernel):
            raise TightfitError(f"from_torch: a convolution with padding {mode!r} and a kernel of unknown size "
                                f"{kernel}: padding 'same' or 'valid' of a weight of known shape only")
        strides = helper._parse_arg(stride, "is")
        dilations = helper._parse_arg(dilation, "is")
        strides, dilations = [strides[0]] * len(kernel) if len(strides) == 1 else strides, \
            [dilations[0]] * len(kernel) if len(dilations) == 1 else dilations
        totals = [d * (k - 1) if mode == "same" else 0 for k, d in zip(kernel, dilations)]
        pads = [t // 2 for t in totals] + [t - t // 2 for t in totals]
        inputs = [x, weight] + ([] if helper._is_none(bias) else [bias])
        return g.op("Conv", *inputs, kernel_shape_i=kernel, strides_i=strides, dilations_i=dilations, pads_i=pads,
                    group_i=helper._parse_arg(groups, "i"))

    return _register_symbolic(torch, "aten::_convolution_mode", convolution_mode, (9,))


def _nearest_exact_as_resize(torch, opset):
    """Gives F.interpolate(mode="nearest-exact") (aten::_upsample_nearest_exact1d/2d/3d) a symbolic where
    torch's exporter has none (1.13's and 2.x's): torch's own nearest Resize, its mapping changed to
    PyTorch's nearest-exact, floor((o + 0.5) in / out) = half_pixel rounded half up. Returns the function
    that removes them."""
    restores = []
    for rank in (1, 2, 3):
        name = f"aten::_upsample_nearest_exact{rank}d"
        if _registered(name, opset):
            continue

        def nearest_exact(g, *args, rank=rank):
            own = _symbolic_of(f"aten::upsample_nearest{rank}d", g.opset)
            y = own(g, *args) if own is not None and g.opset >= 11 else None
            if y is None or y.node().kind() != "onnx::Resize":
                raise TightfitError(f"from_torch: F.interpolate(mode='nearest-exact') exports from opset 11 (at "
                                    f"{g.opset}, torch's nearest symbolic writes no Resize)")
            y.node().s_("coordinate_transformation_mode", "half_pixel")
            y.node().s_("nearest_mode", "round_prefer_ceil")
            return y

        restores.append(_register_symbolic(torch, name, nearest_exact, (9,)))
    return lambda: [restore() for restore in restores]


def _bernoulli_of_p_as_dropout(torch, opset):
    """Gives torch.bernoulli(x, p) of a number p (aten::bernoulli.p: SpeechT5's speech decoder prenet draws
    its "consistent dropout" masks so, in training and inference alike) a symbolic, which no torch has
    (their bernoulli symbolic reads a third argument as `out` and refuses it): a tensor of x's shape and
    type holding 1 with probability p, as Sign(Dropout(ones, ratio 1 - p)), the mask tightfit's dropout
    draws (its own random numbers, not PyTorch's); p <= 0 gives zeros and p >= 1 ones. bernoulli(probs)
    keeps torch's symbolic. Returns the function that removes it."""
    helper, = _exporter("symbolic_helper")
    own = _symbolic_of("aten::bernoulli", opset)

    def bernoulli(g, x, *args):
        p = None if not args or helper._is_none(args[0]) else helper._maybe_get_const(args[0], "f")
        if isinstance(p, torch.Tensor) and p.numel() == 1 and p.is_floating_point():
            p = float(p)  # (2.x reads the constant as a 0-d tensor)
        if not isinstance(p, float):
            if own is None:
                raise TightfitError("from_torch: torch.bernoulli of a tensor of probabilities has no symbolic here")
            return own(g, x, *args)
        dtype = _dtype_of(torch, x)
        shape = g.op("Shape", x)
        if p <= 0 or p >= 1:
            return g.op("ConstantOfShape", shape, value_t=torch.tensor([1.0 if p >= 1 else 0.0], dtype=dtype))
        ones = g.op("ConstantOfShape", shape, value_t=torch.tensor([1.0], dtype=dtype))
        ratio = g.op("Constant", value_t=torch.tensor(1.0 - p, dtype=dtype))
        dropped = g.op("Dropout", ones, ratio, g.op("Constant", value_t=torch.tensor(True)), outputs=2)[0]
        return g.op("Sign", dropped)

    return _register_symbolic(torch, "aten::bernoulli", bernoulli, (9, 15))


def _meshgrid_xy(torch):
    """PyTorch 1.x's export of torch.meshgrid(..., indexing="xy") indexes the traced list before unpacking
    it and fails (TypeError: 'Value' object is not subscriptable; SpeechT5's guided attention loss builds
    its masks so). Under 1.x the export writes the grids itself: each input flattened, reshaped to lie
    along its own axis and expanded to the grid's shape, the first two inputs' axes swapped for "xy".
    Returns the function that puts torch's symbolic back."""
    if not _torch_1x(torch):
        return lambda: None
    helper, = _exporter("symbolic_helper")

    def meshgrid(g, tensor_list, indexing=None):
        mode = "ij" if indexing is None or helper._is_none(indexing) else helper._parse_arg(indexing, "s")
        tensors = list(helper._unpack_list(tensor_list))
        if mode not in ("ij", "xy"):
            raise TightfitError(f"from_torch: torch.meshgrid indexing {mode!r} (ij or xy)")
        if mode == "xy" and len(tensors) > 1:
            tensors[0], tensors[1] = tensors[1], tensors[0]
        flat = [g.op("Reshape", t, g.op("Constant", value_t=torch.tensor([-1]))) for t in tensors]
        shapes = [g.op("Shape", t) for t in flat]
        grid = g.op("Concat", *shapes, axis_i=0)
        one = g.op("Constant", value_t=torch.ones(1, dtype=torch.int64))
        out = [g.op("Expand", g.op("Reshape", t, g.op("Concat", *[shapes[j] if j == i else one for j in
                                                                   range(len(flat))], axis_i=0)), grid)
               for i, t in enumerate(flat)]
        if mode == "xy" and len(out) > 1:
            out[0], out[1] = out[1], out[0]
        return g.op("prim::ListConstruct", *out)

    return _register_symbolic(torch, "aten::meshgrid", meshgrid, (9,))


def _unfold_negative_dimension(torch, opset):
    """torch's export of Tensor.unfold(dimension, size, step) (1.13's and 2.x's TorchScript exporter)
    unsqueezes and concatenates the windows at `dimension` counted in the output's rank, which for a
    negative dimension is one axis off: x.unfold(-1, 8, 4) of [N, T] came out [N, 8, windows] where
    PyTorch gives [N, windows, 8] (PatchTST's patches, audio framing), and onnxruntime refuses or runs
    the wrong file. The export makes the dimension non-negative (the input's rank known) before torch's
    own symbolic, or gathers the windows itself where torch's refuses an axis whose size it lost. Returns the
    function that puts torch's symbolics back."""
    helper, = _exporter("symbolic_helper")
    versions = [v for v in (9, 12) if _symbolic_of("aten::unfold", v) is not None]
    owns = {v: _symbolic_of("aten::unfold", v) for v in versions}

    def ints(g, values):
        return g.op("Constant", value_t=torch.tensor(values, dtype=torch.int64))

    def gathered_windows(g, x, axis, rank, size, step):
        """x's windows along `axis` whose size the exporter lost (torch's symbolic refuses them: HaloNet's
        blocks): a Gather by the table start + j of the (n - size) // step + 1 starts, n read from Shape
        (the importer folds it), its window axis moved last."""
        n = g.op("Gather", g.op("Shape", x), ints(g, [axis]), axis_i=0)
        count = g.op("Add", g.op("Div", g.op("Sub", n, ints(g, [size])), ints(g, [step])), ints(g, [1]))
        limit = g.op("Reshape", g.op("Mul", count, ints(g, [step])), ints(g, []))
        starts = g.op("Range", ints(g, 0), limit, ints(g, step))
        table = g.op("Add", g.op("Unsqueeze", starts, ints(g, [1])), ints(g, [list(range(size))]))
        windows = g.op("Gather", x, table, axis_i=axis)  # x[:axis] + [count, size] + x[axis + 1:]
        moved = list(range(axis + 1)) + list(range(axis + 2, rank + 1)) + [axis + 1]
        return g.op("Transpose", windows, perm_i=moved)

    def unfold(g, x, dimension, size, step):
        own = owns[max(v for v in versions if v <= g.opset)]
        axis, rank = helper._maybe_get_const(dimension, "i"), helper._get_tensor_rank(x)
        if isinstance(axis, torch.Tensor):
            axis = int(axis)
        if isinstance(axis, int) and axis < 0:
            if rank is None:
                raise TightfitError(f"from_torch: Tensor.unfold({axis}, ...) of a tensor of unknown rank")
            dimension = axis = axis + rank
        if isinstance(axis, int) and rank is not None and g.opset >= 11 and \
                helper._get_tensor_dim_size(x, axis) is None:
            return gathered_windows(g, x, axis, rank, helper._get_const(size, "i", "size"),
                                    helper._get_const(step, "i", "step"))
        return own(g, x, dimension, size, step)

    return _register_symbolic(torch, "aten::unfold", unfold, versions)


def _dtype_of(torch, x):
    """The torch dtype of traced value x (float32 where the trace does not say)."""
    type_utils, = _exporter("_type_utils")
    types = type_utils.JitScalarType
    if hasattr(types, "from_value"):  # 2.x
        return types.from_value(x, types.FLOAT).dtype()
    name = x.type().scalarType()  # 1.13
    return torch.float32 if name is None else types.from_name(name).dtype()


def _added_by_opset_17(error):
    """Whether torch.onnx.export refused an op that an opset up to 17 has ("Support for this operator was added
    in version 16": F.grid_sample under PyTorch 1.x, whose default opset is 14)."""
    import re
    found = re.search(r"added in version (\d+)", str(error))
    return type(error).__name__ == "UnsupportedOperatorError" and found is not None and int(found.group(1)) <= 17


def _export_options(torch, opset_version):
    """torch.onnx.export's version-dependent options. PyTorch 2.x also has the dynamo exporter (its default
    from 2.9), which writes opset 18 and later and decomposes what the TorchScript exporter keeps whole
    (GELU, LayerNorm, attention) and trains nothing differently: from_torch asks every version for the
    TorchScript exporter, at opset 17 unless told otherwise where the default would be newer."""
    import inspect
    options = {} if opset_version is None else {"opset_version": opset_version}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        options["dynamo"] = False
        options.setdefault("opset_version", 17)
    return options


def _modes_as_exported(torch, module, keep_dropout=False):
    """The layers in eval mode (no dropout noise) but a BatchNorm in training mode (batch statistics),
    MultiheadAttention and TransformerEncoderLayer in training mode with no attention dropout (in
    eval mode under no_grad they take PyTorch's fused inference kernels, which have no ONNX export and
    give a padded position's output as 0), and with `keep_dropout` each Dropout layer that trains
    (_kept_dropout). Returns the function that puts the modes back."""
    modes = {m: m.training for m in module.modules()}
    kept = [m for m in module.modules() if keep_dropout and _kept_dropout(torch, m)]
    batch_norms = [m for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.training]
    fast_path = [m for m in module.modules()
                 if isinstance(m, (torch.nn.MultiheadAttention, torch.nn.TransformerEncoderLayer))]
    attention_dropout = [(m, m.dropout) for m in fast_path if isinstance(m, torch.nn.MultiheadAttention)]
    module.eval()
    for m in batch_norms + fast_path + kept:
        m.training = True
    for m, _ in attention_dropout:
        m.dropout = 0.0

    def restore():
        for m, rate in attention_dropout:
            m.dropout = rate
        for m, training in modes.items():
            m.training = training
    return restore


def _custom_functions_recorded(torch, seen):
    """Each custom torch.autograd.Function the module applies while the export traces, named in `seen`
    (one without a `symbolic` of its own: the export inlines its forward, and its backward, a
    straight-through estimator's or a gradient reversal's, is lost). Returns the function that puts
    Function.apply back."""
    original = torch.autograd.Function.__dict__.get("apply")  # a classmethod on 2.x, inherited on 1.13

    def apply(cls, *args, **kwargs):
        if not hasattr(cls, "symbolic") and cls.__qualname__ not in seen:
            seen.append(cls.__qualname__)
        if original is None:
            return super(torch.autograd.Function, cls).apply(*args, **kwargs)
        return original.__func__(cls, *args, **kwargs)
    torch.autograd.Function.apply = classmethod(apply)

    def restore():
        if original is None:
            del torch.autograd.Function.apply
        else:
            torch.autograd.Function.apply = original
    return restore


def _export_parameters_as_they_are(torch, module, example_inputs, onnx_path, names, dynamic_axes, kwargs,
                                   keep_dropout, functions):
    """torch.onnx.export of `module` with its layers in eval mode (no dropout noise), but for each
    BatchNorm in training mode, which exports as one normalising by batch statistics (its running
    statistics restored after the export's trace, which would update them), and every parameter
    exported as itself, which training needs. An eval-mode export
    merges parameters of equal values (every LayerNorm's weight of ones becomes one tensor, trained as
    one) and constant-folds a Linear's transposed weight into a new initializer (a head tied to the
    embedding becomes a second, untied copy): torch 1.13 deduplicates initializers by value unless the
    top-level module is in training mode (then by storage only: tied weights stay one), and constant
    folding is turned off here (tightfit's importer folds what it needs itself).
    MultiheadAttention and TransformerEncoderLayer in eval mode under no_grad take PyTorch's fused
    inference kernels (aten::_native_multi_head_attention, aten::_transformer_encoder_layer_fwd: no
    ONNX export), and TransformerEncoder follows its first layer: they export in training mode, which
    takes the ordinary path (projections, softmax, masks as ONNX ops), each MultiheadAttention's
    dropout probability set to 0 meanwhile (in eval mode it is not applied either) and restored after.
    Their Dropout submodules, as every Dropout layer, train as tightfit's dropout with keep_dropout (else the
    identity). An Embedding's padding row gets no
    gradient, as in PyTorch (_padding_rows_as_torch_trains_them), a detached value none
    (_detach_as_stop_gradient), repeat_interleave by a constant is written without a Loop
    (_repeat_interleave_as_expand), bitwise_or/and/xor of masks as | & ^ (_bitwise_ops_of_masks) and
    PyTorch 1.x's circular padding as PyTorch computes it (_circular_pad_as_torch) and its x.norm(dim)
    as ReduceL2 (_frobenius_norm_as_l2); each custom autograd Function applied is named in `functions`
    (_custom_functions_recorded)."""
    import warnings
    buffers = [(b, b.detach().clone()) for b in module.buffers()]  # the trace updates some: put back after
    # float and complex buffers other than BatchNorm statistics (an attention mask, a positional table, a
    # rotation table) are constants that PyTorch never trains: held as plain attributes meanwhile, they
    # export as Constant nodes, which import as constants, where as initializers they would import as
    # parameters
    constant_buffers = [(m, dict(m._buffers)) for m in module.modules()
                        if not isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and
                        any(b is not None and (b.is_floating_point() or b.is_complex()) for b in m._buffers.values())]
    # torch.onnx.export fills every argument of forward() after the given ones with its default
    # (_decide_input_format) and exports a number among them as a graph input: transformers' causal
    # LMs' num_logits_to_keep=0 became an int64 input that the import then refused. Exported through
    # a forward that takes only the given inputs, the module runs as module(*example_inputs) runs, its
    # defaults constants.
    # (A TorchScript module exports its scripted forward itself, which must stay a script method.)
    scripted = isinstance(module, torch.jit.ScriptModule)
    own_forward = module.__dict__.get("forward")
    bound_forward = module.forward
    if not scripted:
        module.forward = lambda *args: bound_forward(*args)
    restores = [_modes_as_exported(torch, module, keep_dropout)]
    module.training = True  # the top level only: read by the deduplication, by no layer
    try:
        opset = kwargs.get("opset_version", 17)
        _load_every_opset()
        for patch in (_detach_as_stop_gradient, _repeat_interleave_as_expand, _circular_pad_as_torch,
                      _embedding_bags_as_lookups, _torchaudio_deltas_as_slices,
                      _frobenius_norm_as_l2, _zero_as_zeros_like):
            restores.append(patch(torch))
        restores.append(_padding_rows_as_torch_trains_them(torch, module))
        restores.append(_sparse_moe_blocks_densely(torch, module))
        restores.append(_no_generation_cache(module))
        restores.append(_bitwise_ops_of_masks(torch, opset))
        restores.append(_rms_norm_as_ops(torch, opset))
        restores.append(_hyperbolic_ops(torch, opset))
        restores.append(_convolution_mode_as_conv(torch, opset))
        restores.append(_nearest_exact_as_resize(torch, opset))
        restores.append(_bernoulli_of_p_as_dropout(torch, opset))
        restores.append(_meshgrid_xy(torch))
        restores.append(_unfold_negative_dimension(torch, opset))
        restores.append(_custom_functions_recorded(torch, functions))
        restores.append(_loss_symbolics.register(torch, opset, *_exporter("symbolic_helper"), _registered))
        restores.append(_math_symbolics.register(torch, opset, *_exporter("symbolic_helper"), _registered,
                                                 _symbolic_of))
        restores.append(_scatter_symbolics.register(torch, opset, *_exporter("symbolic_helper"), _registered,
                                                    _symbolic_of))
        restores.append(_order_symbolics.register(torch, opset, *_exporter("symbolic_helper"), _registered,
                                                  _symbolic_of))
        restores.append(_pointwise_symbolics.register(torch, opset, *_exporter("symbolic_helper"), _registered,
                                                      _symbolic_of))
        restores.append(_linalg_symbolics.register(torch, opset, *_exporter("symbolic_helper"), _registered,
                                                   _symbolic_of))
        complex_written = []  # one entry per Fourier transform or complex op the export writes as pairs
        restores.append(_complex_symbolics.register(torch, *_exporter("symbolic_helper"), _symbolic_of,
                                                    complex_written))
        restores.append(_complex_symbolics.complex_numbers_as_pairs(torch))
        restores.append(_spectral_symbolics.register(torch, opset, *_exporter("symbolic_helper"), _registered,
                                                     complex_written))
        for m, saved in constant_buffers:
            for name, b in saved.items():
                if b is not None and (b.is_floating_point() or b.is_complex()):
                    del m._buffers[name]
                    object.__setattr__(m, name, b)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                torch.onnx.export(module, example_inputs, onnx_path, input_names=names, output_names=["output"],
                                  dynamic_axes=dynamic_axes, training=torch.onnx.TrainingMode.PRESERVE,
                                  do_constant_folding=False, custom_opsets={STOP_GRADIENT_DOMAIN: 1}, **kwargs)
            except RuntimeError:  # the exporter's own failure on an op of complex pairs: name the op, if one
                if complex_written:
                    _complex_symbolics.refuse_unsupported_uses(torch, module, example_inputs)
                raise
            if complex_written:
                _complex_symbolics.refuse_unsupported_uses(torch, module, example_inputs)
    finally:
        for restore in reversed(restores):  # those registered before one that failed too
            if restore:
                restore()
        if scripted:
            pass
        elif own_forward is None:
            del module.forward
        else:
            module.forward = own_forward
        for m, saved in constant_buffers:
            for name in saved:
                m.__dict__.pop(name, None)
            m._buffers.clear()
            m._buffers.update(saved)
        with torch.no_grad():
            for b, saved in buffers:
                b.copy_(saved)


def _freeze_as_torch(torch, module, graph):
    """Freezes the graph's parameter of each module parameter whose requires_grad is False (found by its
    state_dict name, which the export gives its initializer; a tied parameter by any of its names). A
    frozen parameter the graph holds under no such name (the export renamed or transformed it) is
    named in a warning: it would train."""
    names = {}
    for prefix, m in module.named_modules():
        for local, p in m._parameters.items():
            if p is not None:
                names.setdefault(id(p), (p, []))[1].append(f"{prefix}.{local}" if prefix else local)
    missing = []
    _declare_trainable()
    for p, candidates in names.values():
        if p.requires_grad:
            continue
        found = [n for n in candidates if _lib.lib.tf_graph_find_tensor(graph._g, _bytes(n)) >= 0]
        for n in found:
            try:
                graph.set_trainable(n, False)
            except TightfitError:
                pass  # imported as a constant: never trained either
        if not found:
            missing.append(" = ".join(candidates))
    if missing:
        many = len(missing) > 1
        warnings.warn(f"from_torch: the frozen (requires_grad=False) parameter{'s' if many else ''} "
                      f"{', '.join(missing)} {'are' if many else 'is'} not in the imported graph under "
                      f"{'their names' if many else 'its name'} (the export renamed or transformed "
                      f"{'them' if many else 'it'}): {'they train' if many else 'it trains'}; freeze the graph's "
                      "names with compile(freeze=[...]) (tightfit dump lists them)", stacklevel=3)


# What the importer's message says where a dynamic axis meets a size the export fixed (import/onnx_values.c)
_FROZEN_AXIS = "a dynamic axis meets a fixed size here"


def from_torch(module, example_inputs, loss=None, batch_symbol="N", dynamic_batch=True, input_names=None,
               name=None, opset_version=None, label_length=None, verify=None, dropout=True):
    """Exports `module` with torch.onnx.export (example_inputs: a tensor or a tuple of them) and imports
    it with the C importer (tf_onnx_import, include/tightfit/onnx.h). The batch axis becomes symbol
    `batch_symbol` (fixed, with a warning, where the export froze it); loss ("cross_entropy", "mse", "bce_with_logits", "l1", "ctc") adds a `labels` input and the
    loss; "ctc" takes an output [N, T, C] and labels [N, label_length] (default T), each target ended by a
    negative label, as F.ctc_loss(log_softmax(output), reduction='mean'); "output": the module's output already
    is the scalar loss.
    The graph's weights are the module's, in a safetensors file beside the graph's temporary files.
    Parameters whose requires_grad is False are frozen in the graph (no gradient, optimizer state or update).
    verify: compare the graph's output with the module's on the example inputs (an inference plan on the
    CPU) and raise where they differ; None does so for modules of up to 2 GiB of parameters.
    dropout: each nn.Dropout layer that trains (p > 0, training mode) trains as tightfit's dropout (seeded
    masks); False leaves every dropout out (the identity: losses comparable with PyTorch's without dropout)."""
    if not _lib.HAS_ONNX:
        raise TightfitError(f"from_torch: {library_path()} has no tf_onnx_import: this libtightfit.so was built "
                            "without the ONNX importer (include/tightfit/onnx.h)", "unsupported")
    if loss not in _lib.ONNX_LOSSES:
        raise TightfitError("from_torch: loss must be one of cross_entropy, mse, bce_with_logits, l1, ctc, output or "
                            f"None, got {loss!r}")
    import torch
    if type(module).__name__ == "OptimizedModule" and isinstance(getattr(module, "_orig_mod", None), torch.nn.Module):
        module = module._orig_mod  # torch.compile's wrapper: the module it compiles, the same parameters
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    names = list(input_names) if input_names else (
        ["x"] if len(example_inputs) == 1 else [f"x{i}" for i in range(len(example_inputs))])
    directory = _workdir()
    onnx_path = os.path.join(directory, "model.onnx")
    # loss="output": the output is the model's scalar loss, which has no batch axis
    outputs = [] if loss == "output" else ["output"]
    dynamic_axes = {n: {0: batch_symbol} for n in names + outputs} if dynamic_batch else None
    kwargs = _export_options(torch, opset_version)
    for m in module.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.training and m.track_running_stats \
                and m.momentum is None:
            raise TightfitError("from_torch: a BatchNorm in training mode with momentum=None (a cumulative average "
                                "of its running statistics) is not supported; give it a momentum, or call eval()")
    spectral = _spectral_normed(torch, module)
    if spectral:
        raise TightfitError(f"from_torch: spectral_norm on {', '.join(repr(n) for n in spectral)} is not supported: in training it runs a "
                            "power iteration at every forward pass that updates its vectors u and v, state the "
                            "imported graph would not have (it would train with them frozen); remove it "
                            "(torch.nn.utils.remove_spectral_norm, or parametrize.remove_parametrizations)",
                            "unsupported")
    renormed = [name or "the module" for name, m in module.named_modules()
                if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and m.max_norm is not None]
    if renormed:
        raise TightfitError(f"from_torch: {', '.join(repr(n) for n in renormed)}: an embedding with max_norm is not "
                            "supported: at every forward pass PyTorch rescales the rows it looks up in place "
                            "(embedding_renorm_), a change of the weights outside the optimizer that a plan does not "
                            "make (it would train other weights); give max_norm=None, or rescale the rows yourself "
                            "between steps", "unsupported")
    # the export's trace updates the running statistics it writes: the values before it go back below
    running = _running_statistics(torch, module)
    functions = []
    try:
        _export_parameters_as_they_are(torch, module, example_inputs, onnx_path, names, dynamic_axes, kwargs, dropout,
                                       functions)
    except Exception as error:  # an op of a later opset than PyTorch 1.x's default 14: export again at 17
        later = isinstance(error, _spectral_symbolics.NeedsOpset17) or _added_by_opset_17(error)
        if not later or kwargs.get("opset_version", 14) >= 17:
            raise
        if opset_version is not None and isinstance(error, _spectral_symbolics.NeedsOpset17):
            raise TightfitError(f"from_torch: {error}, not opset_version={opset_version}", "unsupported") from None
        if opset_version is not None:
            raise
        kwargs["opset_version"] = 17
        functions.clear()
        _export_parameters_as_they_are(torch, module, example_inputs, onnx_path, names, dynamic_axes, kwargs, dropout,
                                       functions)
    if functions:
        warnings.warn(f"from_torch: the module applies custom autograd Functions ({', '.join(functions)}): the export "
                      "carries their forward only, so tightfit trains with the derivative of their forward ops, not "
                      "with their own backward (a straight-through estimator's or a gradient reversal's differs); "
                      "where that matters, write the gradient rule as ops (a straight-through estimator: "
                      "x + (f(x) - x).detach())", stacklevel=2)
    left_out = _dropout_left_out(torch, module, dropout)
    if left_out:
        warnings.warn(f"from_torch: dropout is left out of the imported graph (exported as in eval mode, the "
                      f"identity): {', '.join(left_out[:6])}{f' and {len(left_out) - 6} more' if len(left_out) > 6 else ''}"
                      f"; it trains without {'it' if len(left_out) == 1 else 'them'}"
                      f"{'' if dropout else ' (dropout=False)'}: docs/import.md", stacklevel=2)
    options = _lib.lib.tf_onnx_options_default() if hasattr(_lib.lib, "tf_onnx_options_default") \
        else _lib.OnnxOptions(ignore_index=-100)
    options.weights_path = _bytes(os.path.join(directory, "weights.safetensors"))
    options.symbol_defaults = _bytes(f"{batch_symbol}={example_inputs[0].shape[0]}") if dynamic_batch else None
    options.loss = _lib.ONNX_LOSSES[loss]
    options.label_length = int(label_length or 0)
    options.narrow_float64 = True  # PyTorch 1.13's float64 casts of where() of numbers; verify checks the result
    options.graph_name = _bytes(name or type(module).__name__)
    handle = _lib.c_graph_p()
    symbolic = dynamic_batch  # whether the graph's batch axis is symbol batch_symbol
    try:
        try:
            _lib.check(_lib.lib.tf_onnx_import(_bytes(onnx_path), ctypes.byref(options), ctypes.byref(handle)),
                       "from_torch")
        except TightfitError as error:
            if not dynamic_batch or _FROZEN_AXIS not in str(error):
                raise
            # the trace froze the batch size where the module read it as a number (CLIP's
            # torch.arange(len(logits)) labels): the traced computation at the traced batch, fixed
            warnings.warn(f"from_torch: the export froze the batch size {example_inputs[0].shape[0]} where the module "
                          f"reads it as a number ({str(error).split(' (a dynamic axis')[0].split(onnx_path + ': ')[-1]}): imported "
                          f"with the batch fixed at {example_inputs[0].shape[0]} (no symbol {batch_symbol}; "
                          "dynamic_batch=False says so); accumulation still makes larger global batches",
                          stacklevel=2)
            _export_parameters_as_they_are(torch, module, example_inputs, onnx_path, names, None, kwargs, dropout, [])
            options.symbol_defaults = None
            symbolic = False
            _lib.check(_lib.lib.tf_onnx_import(_bytes(onnx_path), ctypes.byref(options), ctypes.byref(handle)),
                       "from_torch")
    except TightfitError:
        shutil.rmtree(directory, True)
        raise
    graph = Graph(_handle=handle.value, _dir=directory)
    weakref.finalize(graph, shutil.rmtree, directory, True)
    weights = os.path.join(directory, "weights.safetensors")
    restored = _set_weights(weights, running) if running and os.path.exists(weights) else []
    if len(restored) != len(running):
        warnings.warn("from_torch: the running statistics " + ", ".join(sorted(set(running) - set(restored))) +
                      " were not found in the imported weights under their names: they start from the values "
                      "after the export's trace (one forward pass later)", stacklevel=2)
    if verify is None and _verify.parameter_bytes(module) > _verify.AUTO_LIMIT_BYTES:
        verify = False
        warnings.warn(f"from_torch: {_verify.parameter_bytes(module):,} bytes of parameters: the import is "
                      "not checked against the module (it would hold them three times more meanwhile: in float64, and the plan's); "
                      "from_torch(..., verify=True) checks it", stacklevel=2)
    if verify is not False:
        # a transformers model without its generation cache, as exported (training never uses one)
        _verify.compare(torch, module, example_inputs, graph, names, loss,
                        patches=(functools.partial(_modes_as_exported, torch), _no_generation_cache),
                        batch_symbol=batch_symbol if symbolic else None)
    _freeze_as_torch(torch, module, graph)
    frozen = _lib.lib.tf_onnx_frozen_batch_norms(handle) if hasattr(_lib.lib, "tf_onnx_frozen_batch_norms") else 0
    if frozen:
        warnings.warn(f"from_torch: {frozen} BatchNorm layer{'s' if frozen > 1 else ''} in eval mode imported "
                      f"frozen at {'their' if frozen > 1 else 'its'} running statistics (scale and bias train; a "
                      "layer in training mode normalises with batch statistics: docs/import.md)", stacklevel=2)
    return graph

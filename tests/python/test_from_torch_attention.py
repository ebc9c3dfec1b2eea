"""tightfit.from_torch on the pieces of transformer-style models as their code writes them, each trained
beside PyTorch from the same weights: Hugging Face's GPT-2 attention (one causal attention op), position
ids expanded over the batch, a Llama block (RMSNorm and SwiGLU written out) and Hugging Face's bf16
RMSNorm, nn.RMSNorm, LayerNorm over several axes, a padding mask given as an input, torch.einsum,
a densely routed mixture of experts (topk), LeViT's attention biases, a scaled embedding subclass with a
padding_idx, and a generation cache left out of the export. Fails, not skips, without the ONNX importer.
usage: test_from_torch_attention.py   (PYTHONPATH=python)"""
import json
import types

import numpy as np
import torch

import tightfit
from from_torch_cases import adamw_both, batch, beside_torch, case, dumped, finish, require_importer

require_importer()


# Hugging Face GPT-2's attention as its code writes it: the causal mask a registered bool buffer
# (`bias`, torch.tril of ones) sliced to [:, :, :t, :t], `torch.where(mask, scores, finfo.min)`, the
# scale a tensor made from `v.size(-1) ** 0.5` (Shape, Slice, Pow, Cast). It imports as one causal
# attention op, and the first loss is PyTorch's.
class HFAttention(torch.nn.Module):
    def __init__(self, width=32, heads=4, context=8):
        super().__init__()
        self.heads = heads
        self.c_attn, self.c_proj = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
        self.register_buffer("bias", torch.tril(torch.ones(context, context, dtype=torch.bool)).view(1, 1, context,
                                                                                                     context))
        self.head = torch.nn.Linear(width, 5)

    def forward(self, x):
        n, t, w = x.shape
        q, k, v = self.c_attn(x).split(w, dim=2)
        q, k, v = [a.view(n, t, self.heads, w // self.heads).permute(0, 2, 1, 3) for a in (q, k, v)]
        scores = torch.matmul(q, k.transpose(-1, -2)) / torch.full([], v.size(-1) ** 0.5, dtype=q.dtype)
        scores = torch.where(self.bias[:, :, :t, :t], scores, torch.tensor(torch.finfo(scores.dtype).min))
        y = torch.matmul(torch.softmax(scores, dim=-1), v).permute(0, 2, 1, 3).contiguous().view(n, t, w)
        return self.head(self.c_proj(y)).reshape(-1, 5)


def hf_attention():
    torch.manual_seed(2)
    model = HFAttention()
    xs, ys = torch.randn(batch, 8, 32), torch.randint(0, 5, (batch * 8,))
    graph = tightfit.from_torch(model, (xs,), loss="cross_entropy")
    dump = dumped(graph).replace(" ", "")
    loss = tightfit.Session(tightfit.compile(graph, set={"N": batch}), seed=0).forward(
        {"x": xs.numpy(), "labels": ys.numpy().astype(np.int32)})
    with torch.no_grad():
        expected = torch.nn.functional.cross_entropy(model(xs), ys).item()
    seen = f"first loss {loss:.7f} vs PyTorch's {expected:.7f}"
    if '"op":"attention"' not in dump or '"causal":true' not in dump:
        return "not imported as one causal attention op", seen
    return (None if abs(loss - expected) <= 1e-5 * abs(expected) else seen), seen


case("Hugging Face-style attention (a tril buffer, where(mask, scores, finfo.min)) is one causal attention",
     hf_attention)


# Position ids broadcast over the batch with Expand (`arange(t).unsqueeze(0).expand(n, t)`, n the
# dynamic batch): the first loss and 3 AdamW steps are PyTorch's.
class ExpandedPositions(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens, self.positions = torch.nn.Embedding(30, 8), torch.nn.Embedding(6, 8)
        self.head = torch.nn.Linear(8, 5)

    def forward(self, ids):
        n, t = ids.shape
        positions = torch.arange(t).unsqueeze(0).expand(n, t)
        return self.head(torch.tanh(self.tokens(ids) + self.positions(positions))).reshape(-1, 5)


def expanded_positions():
    torch.manual_seed(3)
    model = ExpandedPositions()
    ids, ys = torch.randint(0, 30, (batch, 6)), torch.randint(0, 5, (batch * 6,))
    losses, expected, worst = adamw_both(tightfit.from_torch(model, (ids,), loss="cross_entropy"), model, ids, ys, 3)
    seen = f"3 AdamW steps {losses} vs PyTorch {expected}, worst relative difference {worst:.1e}"
    return (None if worst <= 1e-5 else seen), seen


case("position ids expanded over the batch (ONNX Expand) train as PyTorch's", expanded_positions)


# A Llama-style block as PyTorch code writes it: RMSNorm spelled out (x * rsqrt(mean(x^2) + eps) *
# weight) and a SwiGLU MLP (down(silu(gate(x)) * up(x)), silu as F.silu and as x * sigmoid(x)):
# imported as rms_norm and silu ops, and 3 AdamW steps are PyTorch's.
class RMSNorm(torch.nn.Module):
    def __init__(self, width, epsilon=1e-6):
        super().__init__()
        self.weight, self.epsilon = torch.nn.Parameter(torch.ones(width)), epsilon

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.epsilon) * self.weight


class LlamaBlock(torch.nn.Module):
    def __init__(self, width=16, hidden=24):
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(width), RMSNorm(width)
        self.gate, self.up = torch.nn.Linear(width, hidden, bias=False), torch.nn.Linear(width, hidden, bias=False)
        self.down, self.head = torch.nn.Linear(hidden, width, bias=False), torch.nn.Linear(width, 5)

    def forward(self, x):
        h = self.norm1(x)
        gate = self.gate(h)
        h = x + self.down(torch.nn.functional.silu(gate) * self.up(h))
        u = self.norm2(h)
        return self.head(u * torch.sigmoid(u)).reshape(-1, 5)


def llama_block():
    torch.manual_seed(4)
    model = LlamaBlock()
    xs, ys = torch.randn(batch, 3, 16), torch.randint(0, 5, (batch * 3,))
    graph = tightfit.from_torch(model, (xs,), loss="cross_entropy")
    ops = [node["op"] for node in json.loads(dumped(graph))["nodes"]]
    losses, expected, worst = adamw_both(graph, model, xs, ys, 3)
    seen = f"ops {ops.count('rms_norm')} rms_norm, {ops.count('silu')} silu; 3 AdamW steps, worst relative difference {worst:.1e}"
    if ops.count("rms_norm") != 2 or ops.count("silu") != 2 or "sigmoid" in ops or "sqrt" in ops:
        return f"not fused: {ops}", seen
    return (None if worst <= 1e-5 else f"tightfit {losses} vs PyTorch {expected}"), seen


case("a Llama-style block (RMSNorm and SwiGLU written out) imports as rms_norm and silu", llama_block)


# Hugging Face's RMSNorm on a bf16 model normalises in f32 between casts (h.to(float32) ... .to(dtype),
# then weight * h): still one rms_norm op (it computes in f32 and rounds once, where PyTorch rounds
# before the weight too: the first loss within 2^-7 of PyTorch's bf16 module's).
class HFRMSNorm(torch.nn.Module):
    def __init__(self, width, epsilon=1e-6):
        super().__init__()
        self.weight, self.epsilon = torch.nn.Parameter(torch.ones(width)), epsilon

    def forward(self, h):
        dtype = h.dtype
        h = h.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.epsilon)
        return self.weight * h.to(dtype)


def hf_rms_norm_bf16():
    torch.manual_seed(5)
    model = torch.nn.Sequential(HFRMSNorm(16), torch.nn.SiLU(), torch.nn.Linear(16, 5)).to(torch.bfloat16)
    xs, ys = torch.randn(batch, 16).to(torch.bfloat16), torch.randint(0, 5, (batch,))
    graph = tightfit.from_torch(model, (xs,), loss="cross_entropy")
    ops = [node["op"] for node in json.loads(dumped(graph))["nodes"]]
    loss = tightfit.Session(tightfit.compile(graph, set={"N": batch}), seed=0).forward(
        {"x": xs.float().numpy(), "labels": ys.numpy().astype(np.int32)})
    with torch.no_grad():
        expected = torch.nn.functional.cross_entropy(model(xs).float(), ys).item()
    seen = f"ops {ops}; first loss {loss:.6f} vs PyTorch's bf16 {expected:.6f}"
    if ops.count("rms_norm") != 1 or "sqrt" in ops or "div" in ops:
        return f"not one rms_norm: {ops}", seen
    return (None if abs(loss - expected) <= abs(expected) / 128 else seen), seen


case("Hugging Face's RMSNorm on a bf16 model (f32 between casts) is one rms_norm", hf_rms_norm_bf16)


# nn.RMSNorm (PyTorch 2.4+; aten::rms_norm has no symbolic below ONNX's opset 23): from_torch writes it
# out, which imports as one rms_norm, and trains as PyTorch's, with eps given or PyTorch's default, and
# without a weight. Where this PyTorch has no nn.RMSNorm the case says so.
def torch_rms_norm():
    if not hasattr(torch.nn, "RMSNorm"):
        return None, f"PyTorch {torch.__version__} has no nn.RMSNorm"
    torch.manual_seed(22)
    seen = []
    for norm in (torch.nn.RMSNorm(8, eps=1e-5), torch.nn.RMSNorm(8), torch.nn.RMSNorm(8, elementwise_affine=False)):
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), norm, torch.nn.Linear(8, 5))
        problem, text, ops = beside_torch(model, torch.randn(batch, 8), torch.randint(0, 5, (batch,)), ["rms_norm"])
        if problem:
            return problem, text
        if norm.weight is not None and ops.count("rms_norm") != 1:
            return f"expected one rms_norm: {ops}", text
        seen.append(text)
    return None, "; ".join(seen)


case("nn.RMSNorm (eps given, default, no weight) trains as PyTorch's", torch_rms_norm)


# nn.LayerNorm over several trailing axes (normalized_shape [C, H, W] after a conv, [T, D] without
# elementwise affine): PyTorch 2.x exports LayerNormalization from axis -3 and -2 (refused before: "only
# the last axis"), which imports as one layer_norm over the axes flattened.
class WideNorms(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 3, 3, padding=1)
        self.image_norm = torch.nn.LayerNorm([3, 4, 4])
        self.sequence_norm = torch.nn.LayerNorm([3, 16], elementwise_affine=False)
        self.head = torch.nn.Linear(48, 5)
        with torch.no_grad():  # away from PyTorch's ones and zeros, so a misplaced element shows
            self.image_norm.weight.uniform_(0.5, 1.5)
            self.image_norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):  # x [N, 16]: 4 x 4 images
        h = self.image_norm(self.conv(x.reshape(-1, 1, 4, 4)))
        return self.head(self.sequence_norm(torch.tanh(h).reshape(-1, 3, 16)).reshape(-1, 48))


def wide_norms():
    torch.manual_seed(28)
    problem, seen, ops = beside_torch(WideNorms(), torch.randn(batch, 16), torch.randint(0, 5, (batch,)),
                                      ["layer_norm"])
    return problem, seen


case("nn.LayerNorm over several trailing axes ([C, H, W], [T, D] without affine) trains as PyTorch's", wide_norms)


# A padding mask from data, given as a second input: masked_fill(mask == 0, -inf) before the softmax
# and a mean over the tokens that count (import/onnx_mask.c); 3 AdamW steps are PyTorch's.
class MaskedEncoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed, self.qkv, self.head = torch.nn.Embedding(30, 8), torch.nn.Linear(8, 24), torch.nn.Linear(8, 5)

    def forward(self, tokens, mask):
        x = self.embed(tokens)
        q, k, v = self.qkv(x).split(8, dim=-1)
        scores = (q @ k.transpose(1, 2)).masked_fill(mask[:, None, :] == 0, float("-inf"))
        x = x + torch.softmax(scores, dim=-1) @ v
        return self.head((x * mask[:, :, None].to(x.dtype)).sum(1) / mask.to(x.dtype).sum(1, keepdim=True))


def padding_mask():
    torch.manual_seed(5)
    model = MaskedEncoder()
    tokens, ys = torch.randint(0, 30, (batch, 6)), torch.randint(0, 5, (batch,))
    mask = (torch.arange(6)[None, :] < torch.tensor([6, 1, 3, 5])[:, None]).to(torch.int64)
    graph = tightfit.from_torch(model, (tokens, mask), loss="cross_entropy", input_names=["tokens", "mask"])
    losses, expected, worst = adamw_both(graph, model, None, ys, 3, inputs={"tokens": tokens, "mask": mask})
    seen = f"3 AdamW steps {losses} vs PyTorch {expected}, worst relative difference {worst:.1e}"
    return (None if worst <= 1e-5 else seen), seen


case("a padding mask given as a second input (Equal, Where on data) trains as PyTorch's", padding_mask)


# torch.einsum exports as ONNX's Einsum, which imports as transposes, reshapes, sums and batched
# matmuls: attention's scores and context, an ellipsis, a dot product, a sum, an implicit output, an
# outer product and three operands, trained as PyTorch trains them; of known values it folds (XLNet's
# sinusoid table from a float Range counting down).
class Einsums(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)
        self.w = torch.nn.Parameter(torch.randn(8, 4) * 0.3)
        self.u = torch.nn.Parameter(torch.randn(4, 5) * 0.3)
        self.v = torch.nn.Parameter(torch.randn(6) * 0.3)

    def forward(self, x):  # x [N, 6, 8]
        q = self.q(x).reshape(-1, 6, 2, 4)
        k = self.k(x).reshape(-1, 6, 2, 4)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k).softmax(-1)
        context = torch.einsum("bhqk,bkhd->bqhd", scores, k).reshape(-1, 6, 8)
        y = torch.einsum("...ij,jk->...ik", context, self.w)  # [N, 6, 4]
        # XLNet's sinusoids: float positions counting down (Range), an outer product of known values
        positions, frequencies = torch.arange(6.0, 0.0, -1.0), 1 / 100 ** (torch.arange(0, 8, 2.0) / 8)
        y = y + torch.sin(torch.einsum("i,d->id", positions, frequencies))
        dots = torch.einsum("bti,bti->bt", y, y)  # [N, 6]
        pooled = torch.einsum("bt,t->b", dots, self.v)  # [N]
        outer = torch.einsum("bi,bj->bij", y.sum(1), y.mean(1)).sum(-1)  # [N, 4]
        total = torch.einsum("btij->bi", torch.einsum("bti,bj->btij", y, outer))
        return torch.einsum("bi,ij", total + outer, self.u) + torch.einsum("b,i,ij->bj", pooled, y[0, 0], self.u)


def einsums():
    torch.manual_seed(9)
    return beside_torch(Einsums(), torch.randn(batch, 6, 8), torch.randint(0, 5, (batch,)), ["matmul", "sum"])[:2]


case("torch.einsum (attention, an ellipsis, dots, sums, an implicit output, three operands, a folded table) trains "
     "as PyTorch's",
     einsums)


# torch.topk of data (ONNX TopK): a mixture of experts routed densely (the router's top 2 of 4 experts
# by softmax, renormalised, scattered back over the experts: the gradient reaches the chosen
# probabilities only), the smallest 2 along a middle axis, and k = 1.
class DenseRouted(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = torch.nn.Linear(8, 4)
        self.experts = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(4))
        self.head = torch.nn.Linear(8 + 3 + 5, 5)

    def forward(self, x):  # x [N, 6, 8]
        probs = self.gate(x).softmax(-1)
        top, chosen = torch.topk(probs, 2, dim=-1)
        weights = torch.zeros_like(probs).scatter(-1, chosen, top / top.sum(-1, keepdim=True))
        mixed = sum(weights[..., e:e + 1] * torch.tanh(expert(x)) for e, expert in enumerate(self.experts))
        smallest = torch.topk(x[..., :3], 2, dim=1, largest=False).values.mean(1)  # [N, 3]
        first = torch.topk(x.mean(-1), 1).values * torch.ones(1, 5)  # [N, 5]
        return self.head(torch.cat([mixed.mean(1), smallest, first], -1))


def dense_routed():
    torch.manual_seed(19)
    return beside_torch(DenseRouted(), torch.randn(batch, 6, 8), torch.randint(0, 5, (batch,)), ["concat"])[:2]


case("torch.topk of data (a densely routed mixture of experts, the smallest along a middle axis, k = 1) trains as "
     "PyTorch's", dense_routed)


# Indexing by known positions along an axis other than a 2-d table's rows (LeViT's attention biases,
# attention_biases[:, idxs]: a [heads, offsets] parameter by a [T, T] table; a middle axis of a cube).
class BiasTable(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 12), torch.nn.Linear(12, 5)
        self.biases = torch.nn.Parameter(torch.randn(3, 5) * 0.5)
        self.cube = torch.nn.Parameter(torch.randn(2, 4, 3) * 0.5)
        self.register_buffer("idxs", torch.tensor([[0, 1, 4, 2], [4, 4, 3, 0], [1, 2, 3, 4], [0, 0, 2, 1]]))
        self.register_buffer("rows", torch.tensor([3, 0, 0, 2]))

    def forward(self, x):  # x [N, 8]
        h = self.a(x).reshape(x.shape[0], 3, 4)
        bias = self.biases[:, self.idxs]  # [3, 4, 4], offsets repeated
        mixed = (h[:, :, :, None] * bias).sum(-1)  # [N, 3, 4]
        picked = self.cube[:, self.rows, :].sum(0)  # [4, 3], row 0 twice
        return self.b(torch.tanh(mixed + picked.t()).reshape(x.shape[0], 12))


def bias_table():
    torch.manual_seed(16)
    return beside_torch(BiasTable(), torch.randn(batch, 8), torch.randint(0, 5, (batch,)), ["embedding"])[:2]


case("indexing a parameter along its second axis by a known table (LeViT's biases) trains as PyTorch's", bias_table)


# An embedding subclass with its own forward around the lookup (BioGPT's and M2M100's scaled word
# embeddings: super().forward(ids) * sqrt(d)) and a padding_idx: the scale stays, and the padding row,
# looked up by the batch, gets no gradient (AdamW would move it by lr), as in PyTorch. BioGPT's default
# attention mask, torch.ones(shape, dtype=torch.bool), is a u8 constant filled with ones.
class ScaledEmbedding(torch.nn.Embedding):
    def forward(self, ids):
        return super().forward(ids) * 4.0


class ScaledLookup(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.words = ScaledEmbedding(10, 8, padding_idx=1)
        with torch.no_grad():
            self.words.weight[1] = 0.25  # a padding row that is not zero
        self.head = torch.nn.Linear(8, 5)

    def forward(self, ids):  # ids [N, 6]
        mask = torch.ones(ids.shape, dtype=torch.bool)
        counted = torch.cumsum(mask.long(), dim=1) * mask  # 1 ... 6
        return self.head((torch.tanh(self.words(ids)) * counted[..., None]).mean(1))


def scaled_lookup():
    torch.manual_seed(17)
    model = ScaledLookup()
    ids = torch.randint(0, 10, (batch, 6))
    ids[:, 0] = 1
    return beside_torch(model, ids, torch.randint(0, 5, (batch,)), ["embedding"])[:2]


case("an embedding subclass's own forward (a scale) around a lookup with a padding_idx trains as PyTorch's",
     scaled_lookup)


class CachingBody(torch.nn.Module):
    """Like a transformers model's body: in eval mode (the export's) with config.use_cache it builds a
    key/value cache and reads its length from the cache's data (Gemma 2's HybridCache), which training
    never does."""
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.a = torch.nn.Linear(8, 5)

    def forward(self, x):  # x [N, 8]
        h = self.a(x)
        if self.config.use_cache and not self.training:
            cache = torch.zeros_like(h)
            cache[:, :2] = h[:, :2].detach()
            seen = (cache != 0).any(0).sum()
            h = h + torch.arange(seen, seen + 5, dtype=torch.float32)
        return h


class GenerationCache(torch.nn.Module):
    """A transformers-like model around CachingBody: from_torch turns config.use_cache off while it
    exports (the body then computes what it trains), and puts it back."""
    def __init__(self):
        super().__init__()
        self.config = types.SimpleNamespace(use_cache=True)
        self.body = CachingBody(self.config)

    def forward(self, x):
        return self.body(x)


def generation_cache():
    torch.manual_seed(21)
    model = GenerationCache()
    problem, seen = beside_torch(model, torch.randn(batch, 8), torch.randint(0, 5, (batch,)), [])[:2]
    return problem or (None if model.config.use_cache is True else "config.use_cache was not put back"), seen


case("a transformers-like model's generation cache (config.use_cache in eval mode) is left out of the export",
     generation_cache)


finish("from_torch_attention")

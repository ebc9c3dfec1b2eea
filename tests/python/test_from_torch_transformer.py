"""tightfit.from_torch on PyTorch's own attention modules (issue 44): nn.MultiheadAttention
(batch_first True and False, a key padding mask, a float and a bool causal attn_mask,
need_weights=False), nn.TransformerEncoder of 2 TransformerEncoderLayers (post- and pre-norm, relu and
gelu) and nn.TransformerDecoderLayer (a causal target mask, cross-attention on a memory input). In eval
mode under no_grad these modules take PyTorch's fused inference kernels, which have no ONNX export;
from_torch exports them on the ordinary path. Each model (d 16..32, 2 heads, T 5..7, batch 3) is
imported with loss "mse" or "cross_entropy", trained 10 AdamW steps from the module's own weights,
and compared with PyTorch training the same module (train mode, dropout 0): every loss within 1e-5
relative, every weight after training within 1e-5 (Session.state_dict against the module's
state_dict, by the module's own names). The modules' training flags and dropout probabilities are
the same after from_torch as before it.
usage: test_from_torch_transformer.py   (PYTHONPATH=python)"""
import warnings

import torch

import tightfit
from tally import case, finish
from torch_training import BATCH, flags, train_both

print("library:", tightfit.library_path())
torch.set_num_threads(1)


class Attention(torch.nn.Module):
    """x [N, T, d] -> a MultiheadAttention (self-attention) -> a Linear head per token ([N*T, classes]
    for cross_entropy, [N, T, classes] for mse). batch_first=False transposes around the attention."""

    def __init__(self, d=16, classes=5, batch_first=True, attn_mask=None, need_weights=True, flat=True):
        super().__init__()
        self.attention = torch.nn.MultiheadAttention(d, 2, batch_first=batch_first)
        self.head = torch.nn.Linear(d, classes)
        self.batch_first, self.need_weights, self.flat, self.classes = batch_first, need_weights, flat, classes
        self.register_buffer("attn_mask", attn_mask)

    def forward(self, x, key_padding_mask=None):
        h = x if self.batch_first else x.transpose(0, 1)
        h, _ = self.attention(h, h, h, key_padding_mask=key_padding_mask, attn_mask=self.attn_mask,
                              need_weights=self.need_weights)
        h = h if self.batch_first else h.transpose(0, 1)
        y = self.head(h + x)
        return y.reshape(-1, self.classes) if self.flat else y


def mha_batch_first():
    torch.manual_seed(1)
    xs, ys = torch.randn(BATCH, 5, 16), torch.randint(0, 5, (BATCH * 5,))
    return train_both(Attention(), {"x": xs}, ys, "cross_entropy")


def mha_sequence_first():
    torch.manual_seed(2)
    xs, ys = torch.randn(BATCH, 6, 16), torch.randn(BATCH, 6, 4)
    return train_both(Attention(batch_first=False, classes=4, flat=False), {"x": xs}, ys, "mse")


def mha_causal_float():
    torch.manual_seed(3)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(7)  # 0 and -inf
    xs, ys = torch.randn(BATCH, 7, 16), torch.randint(0, 5, (BATCH * 7,))
    return train_both(Attention(attn_mask=mask), {"x": xs}, ys, "cross_entropy")


def mha_causal_bool():
    torch.manual_seed(4)
    mask = torch.triu(torch.ones(6, 6, dtype=torch.bool), diagonal=1)  # True: not attended
    xs, ys = torch.randn(BATCH, 6, 24), torch.randint(0, 5, (BATCH * 6,))
    return train_both(Attention(d=24, attn_mask=mask, need_weights=False), {"x": xs}, ys, "cross_entropy")


def mha_key_padding():
    torch.manual_seed(5)
    xs, ys = torch.randn(BATCH, 6, 16), torch.randint(0, 5, (BATCH * 6,))
    padding = torch.arange(6)[None, :] >= torch.tensor([6, 2, 4])[:, None]  # True: padding
    return train_both(Attention(need_weights=False), {"x": xs, "padding": padding}, ys, "cross_entropy")


case("MultiheadAttention, batch_first=True (need_weights left True)", mha_batch_first)
case("MultiheadAttention, batch_first=False, mse", mha_sequence_first)
case("MultiheadAttention, a float causal attn_mask", mha_causal_float)
case("MultiheadAttention, a bool causal attn_mask, need_weights=False", mha_causal_bool)
case("MultiheadAttention, a key_padding_mask input", mha_key_padding)


class Encoder(torch.nn.Module):
    """An nn.TransformerEncoder of 2 layers and a Linear head per token."""

    def __init__(self, d, norm_first, activation, causal=None, classes=5):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(d, 2, 2 * d, dropout=0.0, activation=activation, batch_first=True,
                                                 norm_first=norm_first)
        self.encoder = torch.nn.TransformerEncoder(layer, 2)
        self.head, self.classes = torch.nn.Linear(d, classes), classes
        self.register_buffer("mask", causal)

    def forward(self, x, padding=None):
        return self.head(self.encoder(x, mask=self.mask, src_key_padding_mask=padding)).reshape(-1, self.classes)


def encoder_post_norm_relu():
    torch.manual_seed(6)
    xs, ys = torch.randn(BATCH, 5, 16), torch.randint(0, 5, (BATCH * 5,))
    return train_both(Encoder(16, False, "relu"), {"x": xs}, ys, "cross_entropy")


def encoder_pre_norm_gelu_causal():
    torch.manual_seed(7)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(6)
    xs, ys = torch.randn(BATCH, 6, 32), torch.randn(BATCH * 6, 5)
    return train_both(Encoder(32, True, "gelu", causal=mask), {"x": xs}, ys, "mse")


def encoder_padding():
    torch.manual_seed(12)
    xs, ys = torch.randn(BATCH, 7, 16), torch.randint(0, 5, (BATCH * 7,))
    padding = torch.arange(7)[None, :] >= torch.tensor([7, 3, 5])[:, None]
    return train_both(Encoder(16, False, "gelu"), {"x": xs, "padding": padding}, ys, "cross_entropy")


case("TransformerEncoder, 2 post-norm layers, relu", encoder_post_norm_relu)
case("TransformerEncoder, 2 pre-norm layers, gelu, a causal mask, mse", encoder_pre_norm_gelu_causal)
case("TransformerEncoder, 2 post-norm layers, gelu, src_key_padding_mask", encoder_padding)


class Decoder(torch.nn.Module):
    """An nn.TransformerDecoderLayer (a causal target mask, cross-attention on `memory`) and a head."""

    def __init__(self, d=16, norm_first=False, classes=5):
        super().__init__()
        self.decoder = torch.nn.TransformerDecoderLayer(d, 2, 2 * d, dropout=0.0, batch_first=True,
                                                        norm_first=norm_first)
        self.head, self.classes = torch.nn.Linear(d, classes), classes
        self.register_buffer("mask", torch.nn.Transformer.generate_square_subsequent_mask(5))

    def forward(self, x, memory):
        return self.head(self.decoder(x, memory, tgt_mask=self.mask)).reshape(-1, self.classes)


def decoder_layer():
    torch.manual_seed(9)
    xs, memory, ys = torch.randn(BATCH, 5, 16), torch.randn(BATCH, 7, 16), torch.randint(0, 5, (BATCH * 5,))
    return train_both(Decoder(), {"x": xs, "memory": memory}, ys, "cross_entropy")


def decoder_layer_pre_norm_mse():
    torch.manual_seed(10)
    xs, memory, ys = torch.randn(BATCH, 5, 16), torch.randn(BATCH, 6, 16), torch.randn(BATCH * 5, 3)
    return train_both(Decoder(norm_first=True, classes=3), {"x": xs, "memory": memory}, ys, "mse")


case("TransformerDecoderLayer, a causal target mask, cross-attention on a memory input", decoder_layer)
case("TransformerDecoderLayer, pre-norm, mse", decoder_layer_pre_norm_mse)


# Dropout with p > 0 (a TransformerEncoderLayer's default 0.1): its Dropout layers train as tightfit's
# dropout (seeded masks), MultiheadAttention's attention dropout is left out (the fused attention has
# none) with a warning naming it; dropout=False leaves every one out, naming each; the module keeps its
# dropout probabilities and training flags either way.
def dropout_kept_or_left_out():
    torch.manual_seed(11)
    model = torch.nn.Sequential(torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True), torch.nn.Flatten(),
                                torch.nn.Linear(5 * 16, 4))
    before = flags(model)
    seen = []
    for keep in (True, False):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            graph = tightfit.from_torch(model, (torch.randn(BATCH, 5, 16),), loss="cross_entropy", dropout=keep)
        said = [str(w.message) for w in caught if "dropout is left out" in str(w.message)]
        ops = [n["op"] for n in __import__("json").loads(tightfit._run("dump", [graph._file()])[1])["nodes"]]
        seen.append(f"dropout={keep}: {ops.count('dropout')} dropout nodes, warned {said}")
        if flags(model) != before:
            return "from_torch changed the module's training flags or dropout probabilities", "; ".join(seen)
        layers = ("0.dropout (p=0.1)", "0.dropout1 (p=0.1)", "0.dropout2 (p=0.1)")
        named = [name for name in layers if said and name in said[0]]
        if len(said) != 1 or "0.self_attn (attention dropout p=0.1)" not in said[0] or \
                named != ([] if keep else list(layers)) or ops.count("dropout") != (3 if keep else 0):
            return "expected the three layers kept (or, with dropout=False, named as left out)", "; ".join(seen)
    return None, "; ".join(seen)


class FunctionalDropout(torch.nn.Module):
    """transformers' way (BART, Whisper): the rate kept as a number for F.dropout(training=self.training)."""
    def __init__(self):
        super().__init__()
        self.dropout, self.activation_dropout = 0.2, 0.0
        self.a = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.a(torch.nn.functional.dropout(x, p=self.dropout, training=self.training))


def functional_dropout_named():
    torch.manual_seed(12)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tightfit.from_torch(torch.nn.Sequential(FunctionalDropout()), (torch.randn(BATCH, 8),), loss="cross_entropy")
    said = [str(w.message) for w in caught if "dropout is left out" in str(w.message)]
    if len(said) != 1 or "0.dropout (F.dropout p=0.2)" not in said[0] or "activation_dropout" in said[0]:
        return f"expected one warning naming 0.dropout (and not the rate of 0): {said}", ""
    return None, said[0][:140] + "..."


case("a rate F.dropout reads (transformers' functional dropout) is named as left out", functional_dropout_named)
case("dropout p > 0: Dropout layers train as tightfit's dropout, attention dropout left out with a warning; "
     "dropout=False leaves every one out; the module unchanged", dropout_kept_or_left_out)
finish("from_torch_transformer")

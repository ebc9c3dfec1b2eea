#!/usr/bin/python3
"""PyTorch reference of the tightfit model zoo (models/*.c).

The same architectures as plain nn.Modules, whose state_dict keys are the zoo's parameter names.
Prints, for every preset and a few overridden configurations, the parameter count and every
parameter's name and shape, in the format of tests/zoo/zoo_dump.c:

    config gpt layers=2
    count 406912
    param wte.weight [128,128]
    ...
    end

Run with /usr/bin/python3 (Debian's python3-torch). Exits 77 (ctest's skip) without torch.
"""
import math
import sys

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as error:  # pragma: no cover - depends on the machine
    print(f"torch_reference.py: skipped, cannot import torch ({error})")
    sys.exit(77)


# ---- presets: family defaults, preset settings, derived knobs (mirrors models/zoo.c) ----

FAMILY_DEFAULTS = {
    "mlp": dict(inputs=64, hidden=128, layers=2, classes=10),
    "cnn": dict(image=8, channels=1, classes=10),
    "gpt": dict(vocab=128, ctx=256, d_model=128, layers=4, heads=4, seq=64),
    "vit": dict(image=224, patch=16, d_model=768, layers=12, heads=None, classes=1000, mlp=None),
    "asr": dict(d_model=256, enc_layers=12, dec_layers=6, heads=None, vocab=5000, mels=80,
                max_frames=1500, max_tokens=448, ffn=None),
    "xtts": dict(layers=30, d_model=1024, heads=16, text_vocab=6681, audio_vocab=1026,
                 text_positions=404, audio_positions=608, text_length=64),
    "dcgan": dict(z_dim=100, g_channels=64, d_channels=64, mels=128, frames=64),
}

# knob -> (source, multiply, divide): the default unless set explicitly.
DERIVED = {
    "vit": {"heads": ("d_model", 1, 64), "mlp": ("d_model", 4, 1)},
    "asr": {"heads": ("d_model", 1, 64), "ffn": ("d_model", 4, 1)},
}

PRESETS = {
    "mlp": ("mlp", {}),
    "cnn": ("cnn", {}),
    "gpt": ("gpt", {}),
    "gpt2-small": ("gpt", dict(vocab=50257, ctx=1024, d_model=768, layers=12, heads=12, seq=128)),
    "vit-b16": ("vit", {}),
    "asr-256-12-6": ("asr", {}),
    "asr-192-8-4": ("asr", dict(d_model=192, enc_layers=8, dec_layers=4)),
    "asr-128-6-3": ("asr", dict(d_model=128, enc_layers=6, dec_layers=3)),
    "xtts-gpt": ("xtts", {}),
    "dcgan": ("dcgan", {}),
}

# Every preset, then overridden configurations.
CONFIGS = list(PRESETS) + [
    "mlp layers=3 hidden=64 classes=4",
    "cnn image=16 channels=3 classes=7",
    "gpt layers=2",
    "gpt2-small layers=2 vocab=1000",
    "vit-b16 layers=2",
    "vit-b16 image=64 patch=8 d_model=192 layers=3 classes=10",
    "asr-128-6-3 vocab=300",
    "asr-256-12-6 d_model=192",
    "asr-192-8-4 heads=2 ffn=256 mels=40",
    "xtts-gpt layers=2 d_model=256 heads=4",
    "dcgan mels=64 frames=32 g_channels=8 d_channels=16 z_dim=20",
]


def resolve(config):
    words = config.split()
    family, settings = PRESETS[words[0]]
    knobs = dict(FAMILY_DEFAULTS[family])
    explicit = set(settings)
    knobs.update(settings)
    for word in words[1:]:
        name, value = word.split("=")
        assert name in knobs, f"{config}: unknown knob {name}"
        knobs[name] = int(value)
        explicit.add(name)
    for name, (source, multiply, divide) in DERIVED.get(family, {}).items():
        if name not in explicit:
            knobs[name] = max(1, knobs[source] * multiply // divide)
    return family, knobs


# ---- shared blocks ----

class CausalSelfAttention(nn.Module):
    """Fused qkv Linear(d, 3d) and output projection; GPT-2 names (c_attn, c_proj)."""

    def __init__(self, d, heads, causal, qkv_name="c_attn", proj_name="c_proj"):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.qkv_name, self.proj_name = qkv_name, proj_name
        setattr(self, qkv_name, nn.Linear(d, 3 * d))
        setattr(self, proj_name, nn.Linear(d, d))

    def forward(self, x):
        q, k, v = getattr(self, self.qkv_name)(x).chunk(3, dim=-1)
        return getattr(self, self.proj_name)(attention(q, k, v, self.heads, self.causal))


class CrossAttention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj, self.v_proj = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.out_proj = nn.Linear(d, d)

    def forward(self, x, memory):
        q, k, v = self.q_proj(x), self.k_proj(memory), self.v_proj(memory)
        return self.out_proj(attention(q, k, v, self.heads, False))


def attention(q, k, v, heads, causal):
    """q [N, Tq, H*D], k and v [N, Tk, H*D] -> [N, Tq, H*D], scale 1/sqrt(D) (tf_attention)."""
    n, tq, e = q.shape
    tk = k.shape[1]
    d = e // heads
    q = q.view(n, tq, heads, d).transpose(1, 2)
    k = k.view(n, tk, heads, d).transpose(1, 2)
    v = v.view(n, tk, heads, d).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)
    if causal:
        mask = torch.ones(tq, tk, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
    return (scores.softmax(-1) @ v).transpose(1, 2).reshape(n, tq, e)


class GPT2MLP(nn.Module):
    def __init__(self, d, ffn, approximate):
        super().__init__()
        self.c_fc, self.c_proj = nn.Linear(d, ffn), nn.Linear(ffn, d)
        self.approximate = "tanh" if approximate else "none"

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate=self.approximate))


class GPT2Block(nn.Module):
    """Pre-LN block: x += attn(ln_1(x)); [x += cross_attn(ln_cross(x), memory)]; x += mlp(ln_2(x))."""

    def __init__(self, d, heads, ffn, causal=True, approximate=True, cross=False, eps=1e-5):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d, eps=eps)
        self.attn = CausalSelfAttention(d, heads, causal)
        if cross:
            self.ln_cross = nn.LayerNorm(d, eps=eps)
            self.cross_attn = CrossAttention(d, heads)
        self.ln_2 = nn.LayerNorm(d, eps=eps)
        self.mlp = GPT2MLP(d, ffn, approximate)

    def forward(self, x, memory=None):
        x = x + self.attn(self.ln_1(x))
        if memory is not None:
            x = x + self.cross_attn(self.ln_cross(x), memory)
        return x + self.mlp(self.ln_2(x))


# ---- families ----

class MLP(nn.Module):
    def __init__(self, inputs, hidden, layers, classes):
        super().__init__()
        widths = [inputs] + [hidden] * layers
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.head = nn.Linear(widths[-1], classes)

    def forward(self, x):
        for layer in self.hidden:
            x = F.relu(layer(x))
        return self.head(x)


class CNN(nn.Module):
    def __init__(self, image, channels, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        pooled = image // 2 // 2
        self.fc = nn.Linear(32 * pooled * pooled, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2, 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2, 2)
        return self.fc(x.flatten(1))


class GPT(nn.Module):
    def __init__(self, vocab, ctx, d_model, layers, heads, seq):
        super().__init__()
        self.wte = nn.Embedding(vocab, d_model)
        self.wpe = nn.Embedding(ctx, d_model)
        self.h = nn.ModuleList(GPT2Block(d_model, heads, 4 * d_model) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d_model)

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.h:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # tied head: no parameter of its own


class ViTAttention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return self.proj(attention(q, k, v, self.heads, False))


class ViTMLP(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class ViTBlock(nn.Module):
    def __init__(self, d, heads, mlp):
        super().__init__()
        self.norm1 = nn.LayerNorm(d, eps=1e-6)
        self.attn = ViTAttention(d, heads)
        self.norm2 = nn.LayerNorm(d, eps=1e-6)
        self.mlp = ViTMLP(d, mlp)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class PatchEmbed(nn.Module):
    def __init__(self, patch, d):
        super().__init__()
        self.proj = nn.Conv2d(3, d, patch, stride=patch)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class ViT(nn.Module):
    """timm's VisionTransformer names: cls_token, pos_embed, patch_embed.proj, blocks.i, norm, head."""

    def __init__(self, image, patch, d_model, layers, heads, classes, mlp):
        super().__init__()
        patches = (image // patch) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d_model))
        self.pos_embed = nn.Parameter(torch.zeros(1, patches + 1, d_model))
        self.patch_embed = PatchEmbed(patch, d_model)
        self.blocks = nn.ModuleList(ViTBlock(d_model, heads, mlp) for _ in range(layers))
        self.norm = nn.LayerNorm(d_model, eps=1e-6)
        self.head = nn.Linear(d_model, classes)

    def forward(self, image):
        x = self.patch_embed(image)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])


class ASREncoder(nn.Module):
    def __init__(self, d, layers, heads, mels, max_frames, ffn):
        super().__init__()
        self.conv1 = nn.Conv1d(mels, d, 3, stride=2, padding=1)
        self.conv2 = nn.Conv1d(d, d, 3, stride=2, padding=1)
        self.embed_positions = nn.Embedding(max_frames, d)
        self.blocks = nn.ModuleList(
            GPT2Block(d, heads, ffn, causal=False, approximate=False) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, mel):
        x = F.gelu(self.conv2(F.gelu(self.conv1(mel)))).transpose(1, 2)
        x = x + self.embed_positions(torch.arange(x.shape[1], device=x.device))
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x)


class ASRDecoder(nn.Module):
    def __init__(self, d, layers, heads, vocab, max_tokens, ffn):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d)
        self.embed_positions = nn.Embedding(max_tokens, d)
        self.blocks = nn.ModuleList(
            GPT2Block(d, heads, ffn, causal=True, approximate=False, cross=True) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, tokens, memory):
        x = self.embed_tokens(tokens) + self.embed_positions(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x, memory)
        return F.linear(self.ln_f(x), self.embed_tokens.weight)  # tied head


class ASR(nn.Module):
    def __init__(self, d_model, enc_layers, dec_layers, heads, vocab, mels, max_frames, max_tokens, ffn):
        super().__init__()
        self.encoder = ASREncoder(d_model, enc_layers, heads, mels, max_frames, ffn)
        self.decoder = ASRDecoder(d_model, dec_layers, heads, vocab, max_tokens, ffn)

    def forward(self, mel, tokens):
        return self.decoder(tokens, self.encoder(mel))


class XTTSGPT(nn.Module):
    def __init__(self, layers, d_model, heads, text_vocab, audio_vocab, text_positions, audio_positions,
                 text_length):
        super().__init__()
        self.text_embedding = nn.Embedding(text_vocab, d_model)
        self.text_pos_embedding = nn.Embedding(text_positions, d_model)
        self.mel_embedding = nn.Embedding(audio_vocab, d_model)
        self.mel_pos_embedding = nn.Embedding(audio_positions, d_model)
        self.h = nn.ModuleList(GPT2Block(d_model, heads, 4 * d_model) for _ in range(layers))
        self.final_norm = nn.LayerNorm(d_model)
        self.text_head = nn.Linear(d_model, text_vocab)
        self.mel_head = nn.Linear(d_model, audio_vocab)

    def forward(self, text_tokens, audio_codes):
        tt, ta = text_tokens.shape[1], audio_codes.shape[1]
        text = self.text_embedding(text_tokens) + self.text_pos_embedding(torch.arange(tt, device=text_tokens.device))
        audio = self.mel_embedding(audio_codes) + self.mel_pos_embedding(torch.arange(ta, device=audio_codes.device))
        x = torch.cat([text, audio], dim=1)
        for block in self.h:
            x = block(x)
        x = self.final_norm(x)
        return self.text_head(x[:, :tt]), self.mel_head(x[:, tt:])


class Generator(nn.Module):
    def __init__(self, z_dim, channels, mels, frames):
        super().__init__()
        self.shape = (8 * channels, mels // 16, frames // 16)
        self.fc = nn.Linear(z_dim, 8 * channels * (mels // 16) * (frames // 16))
        widths = [8 * channels, 4 * channels, 2 * channels, channels, 1]
        self.deconv = nn.ModuleList(
            nn.ConvTranspose2d(a, b, 4, stride=2, padding=1) for a, b in zip(widths[:-1], widths[1:]))

    def forward(self, z):
        x = self.fc(z).view(z.shape[0], *self.shape)
        for layer in self.deconv:
            x = layer(F.relu(x))
        return torch.tanh(x)


class Discriminator(nn.Module):
    """LeakyReLU(0.2) as in the DCGAN paper; no batch norm (the zoo's op set has no batch statistics)."""

    def __init__(self, channels, mels, frames):
        super().__init__()
        widths = [1, channels, 2 * channels, 4 * channels, 8 * channels]
        self.conv = nn.ModuleList(
            nn.Conv2d(a, b, 4, stride=2, padding=1) for a, b in zip(widths[:-1], widths[1:]))
        self.fc = nn.Linear(8 * channels * (mels // 16) * (frames // 16), 1)

    def forward(self, x):
        for layer in self.conv:
            x = F.leaky_relu(layer(x), 0.2)
        return self.fc(x.flatten(1))


class DCGAN(nn.Module):
    def __init__(self, z_dim, g_channels, d_channels, mels, frames):
        super().__init__()
        self.generator = Generator(z_dim, g_channels, mels, frames)
        self.discriminator = Discriminator(d_channels, mels, frames)

    def forward(self, z, real):
        """Returns (discriminator loss, generator loss), as the zoo's graph does."""
        fake = self.generator(z)
        real_logit, fake_logit = self.discriminator(real), self.discriminator(fake)
        bce = F.binary_cross_entropy_with_logits
        d_loss = bce(real_logit, torch.ones_like(real_logit)) + bce(fake_logit, torch.zeros_like(fake_logit))
        return d_loss, bce(fake_logit, torch.ones_like(fake_logit))


FAMILIES = {"mlp": MLP, "cnn": CNN, "gpt": GPT, "vit": ViT, "asr": ASR, "xtts": XTTSGPT, "dcgan": DCGAN}


def build(config):
    family, knobs = resolve(config)
    return FAMILIES[family](**knobs)


def parameters(module):
    """(name, shape) of every distinct parameter; a tied weight counts once."""
    return [(name, tuple(p.shape)) for name, p in module.named_parameters()]


# Small configurations whose forward pass runs (--forward), with their inputs at N=2.
FORWARD_CHECKS = {
    "mlp": lambda: (torch.randn(2, 64),),
    "cnn": lambda: (torch.randn(2, 1, 8, 8),),
    "gpt layers=2": lambda: (torch.randint(0, 128, (2, 64)),),
    "vit-b16 image=64 patch=8 d_model=192 layers=3 classes=10": lambda: (torch.randn(2, 3, 64, 64),),
    "asr-128-6-3 vocab=300": lambda: (torch.randn(2, 80, 4 * 25), torch.randint(0, 300, (2, 12))),
    "xtts-gpt layers=2 d_model=256 heads=4": lambda: (torch.randint(0, 6681, (2, 64)),
                                                      torch.randint(0, 1026, (2, 40))),
    "dcgan mels=64 frames=32 g_channels=8 d_channels=16 z_dim=20": lambda: (torch.randn(2, 20),
                                                                            torch.randn(2, 1, 64, 32)),
}


def check_forward():
    """Runs the reference modules once, so that they are architectures and not just tables."""
    torch.manual_seed(0)
    for config, inputs in FORWARD_CHECKS.items():
        with torch.no_grad():
            outputs = build(config)(*inputs())
        if not isinstance(outputs, tuple):
            outputs = (outputs,)
        shapes = ", ".join(str(list(o.shape)) for o in outputs)
        assert all(torch.isfinite(o).all() for o in outputs), config
        print(f"forward {config}: {shapes}", file=sys.stderr)


def main():
    if "--forward" in sys.argv[1:]:
        check_forward()
    for config in CONFIGS:
        module = build(config)
        params = parameters(module)
        print(f"config {config}")
        print(f"count {sum(math.prod(shape) for _, shape in params)}")
        for name, shape in params:
            print(f"param {name} [{','.join(str(s) for s in shape)}]")
        print("end")
    return 0


if __name__ == "__main__":
    sys.exit(main())

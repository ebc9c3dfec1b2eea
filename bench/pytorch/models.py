"""The PyTorch side of bench/run-vs-pytorch: the zoo's models, their losses and their batches.

The architectures are not copied: they are tests/zoo/torch_reference.py's nn.Modules (the same
ones tests/train_vs_torch/compare.py trains from tightfit's initial weights and matches to 1e-4),
built from the same preset words tightfit's `zoo` command takes ("gpt2-small layers=2"). The
optimizer is the zoo's: AdamW lr 3e-4, betas (0.9, 0.999), eps 1e-8, weight decay 0.01, no
clipping, no accumulation (models/layers.c, tf_layers_adamw). Float32 throughout.
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "zoo"))
import torch_reference  # noqa: E402

LR, BETAS, EPS, WEIGHT_DECAY = 3e-4, (0.9, 0.999), 1e-8, 0.01


def build(config):
    """The nn.Module for a zoo configuration string and its family ("gpt", "asr", ...).

    The transformers get the zoo's initialisation scheme (weights normal(0, 0.02), biases zero;
    PyTorch's default N(0, 1) embeddings, tied to the head, start at a loss near 80): the same
    distribution, not the same values; step time does not depend on them."""
    family, _ = torch_reference.resolve(config)
    model = torch_reference.build(config)
    if family in ("gpt", "asr"):
        with torch.no_grad():
            for module in model.modules():
                if isinstance(module, (torch.nn.Linear, torch.nn.Embedding, torch.nn.Conv1d)):
                    module.weight.normal_(0.0, 0.02)
                    if getattr(module, "bias", None) is not None:
                        module.bias.zero_()
    return model, family


def optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)


def loss(model, family, batch):
    """Mean cross-entropy over the batch (every token for the sequence models), as the zoo's graphs."""
    if family == "gpt":
        logits = model(batch["tokens"])
    elif family == "asr":
        logits = model(batch["mel"], batch["tokens"])
    else:
        logits = model(batch["x"])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch["labels"].reshape(-1), ignore_index=-100)


class Batches:
    """Micro-batches from the same .npy files tightfit's feed reads (bench data folders).

    Per-sample files (x.npy, labels.npy, mel.npy, ...): consecutive slices of N samples, wrapping.
    A 1-D tokens.npy stream: random windows of T + 1 tokens, tokens = window[:-1], labels =
    window[1:]. Everything is loaded into memory before the measured part begins; making the torch
    tensors of a batch is inside each timed step, as tightfit's feed copy is inside its step.
    """

    def __init__(self, directory, family, n, t=None, shape=None):
        self.n, self.t, self.family, self.shape = n, t, family, shape
        self.arrays = {name[:-4]: np.load(os.path.join(directory, name)) for name in sorted(os.listdir(directory))
                       if name.endswith(".npy")}
        self.stream = "tokens" in self.arrays and self.arrays["tokens"].ndim == 1
        self.rng = np.random.default_rng(0)
        self.position = 0

    def next(self):
        if self.stream:
            stream = self.arrays["tokens"]
            starts = self.rng.integers(0, len(stream) - self.t - 1, size=self.n)
            windows = np.stack([stream[s:s + self.t + 1] for s in starts]).astype(np.int64)
            return {"tokens": torch.from_numpy(windows[:, :-1]), "labels": torch.from_numpy(windows[:, 1:])}
        count = len(next(iter(self.arrays.values())))
        index = (self.position + np.arange(self.n)) % count
        self.position = (self.position + self.n) % count
        batch = {}
        for name, array in self.arrays.items():
            value = torch.from_numpy(np.ascontiguousarray(array[index]))
            if value.dtype == torch.int32:
                value = value.long()
            if name == "x" and self.family == "cnn":
                value = value.reshape(self.n, 1, 8, 8)
            batch[name] = value
        return batch

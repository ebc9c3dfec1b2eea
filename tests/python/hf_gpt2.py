"""The tiny Hugging Face GPT-2 that the checkpoint tests (tests/init_from, tests/lora) load into the
zoo's gpt2-small of the same shape through `tightfit train --init-from`: the setup, the model's
config, the one batch both sides train on, the zoo graph, and the losses `tightfit train --json`
prints. Needs transformers (the .venv scripts/setup makes)."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import transformers

N, T, V = 2, 16, 64  # batch, sequence and context, vocabulary


def start(prefix):
    """Seeds torch (0) and quiets it and transformers; returns the tightfit program given on the
    command line and a new work folder."""
    torch.manual_seed(0)
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    return sys.argv[1], tempfile.mkdtemp(prefix=prefix)


def config():
    """2 layers, 2 heads, width 32, no dropout."""
    return transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=V, n_positions=T, resid_pdrop=0.0,
                                   embd_pdrop=0.0, attn_pdrop=0.0)


def run(cli, *args):
    """`cli args...`: (exit code, stdout, stderr)."""
    done = subprocess.run([cli, *args], capture_output=True, text=True)
    return done.returncode, done.stdout, done.stderr


def zoo_graph(cli, graph):
    """The zoo's gpt2-small of config()'s shape into `graph`: (exit code, stderr)."""
    code, _, err = run(cli, "zoo", "gpt2-small", "--param", "layers=2", "--param", "d_model=32", "--param", "heads=2",
                       "--param", f"vocab={V}", "--param", f"ctx={T}", "--param", f"seq={T}", "-o", graph)
    return code, err


def batch(work):
    """Random tokens and labels [N, T], also saved as tokens.npy and labels.npy in work/data: (tokens,
    labels, that folder)."""
    tokens, labels = torch.randint(0, V, (N, T)), torch.randint(0, V, (N, T))
    data = os.path.join(work, "data")
    os.makedirs(data)
    np.save(os.path.join(data, "tokens.npy"), tokens.numpy().astype(np.int32))
    np.save(os.path.join(data, "labels.npy"), labels.numpy().astype(np.int32))
    return tokens, labels, data


class Logits(torch.nn.Module):
    """A GPT2LMHeadModel (or a PEFT model over one) as a module of tokens [N, T] -> logits [N x T, V],
    for torch_training.adamw_losses against labels.reshape(-1)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, tokens):
        return self.model(input_ids=tokens, return_dict=False)[0].reshape(-1, V)


def train_losses(out):
    """The losses of the steps `tightfit train --json` printed."""
    return [json.loads(line)["loss"] for line in out.splitlines() if line.startswith("{") and '"step"' in line]

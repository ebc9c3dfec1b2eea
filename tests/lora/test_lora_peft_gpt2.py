"""LoRA on a GPT (issue 43): Hugging Face's GPT-2 (2 layers, d 32) with PEFT's LoRA (rank 4, alpha 8, on
the attention's c_attn and the MLP's c_fc, no dropout) against the zoo's gpt2-small at the same size
compiled with --lora 4:8 on the same weights, started from PEFT's own state (base weights and adapters,
A as PEFT drew it) through `train --init-from` and a map from PEFT's names: 5 AdamW steps, every loss
within 1e-6 relative. Then a from_torch of the PEFT model itself (its LoRA layers as they are, the base
frozen by requires_grad) trains as PyTorch does. Runs in the .venv scripts/setup makes (transformers,
peft, safetensors). usage: test_lora_peft_gpt2.py TIGHTFIT_CLI   (PYTHONPATH=python)"""
import copy
import os
import sys
import warnings

import numpy as np
import peft
import torch
import transformers
from safetensors.torch import save_file

import tightfit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))  # tally, hf_gpt2
import hf_gpt2  # noqa: E402
from tally import finish, verdict  # noqa: E402
from torch_training import adamw_losses  # noqa: E402

cli, work = hf_gpt2.start("tightfit-lora-peft-")
N, STEPS, LR, RANK, ALPHA = hf_gpt2.N, 5, 1e-2, 4, 8


def tightfit_cli(*args):
    return hf_gpt2.run(cli, *args)


base = transformers.GPT2LMHeadModel(hf_gpt2.config())
lora_config = peft.LoraConfig(r=RANK, lora_alpha=ALPHA, lora_dropout=0.0, target_modules=["c_attn", "c_fc"],
                              fan_in_fan_out=True, bias="none")
model = peft.get_peft_model(base, lora_config)
with torch.no_grad():  # B starts at zero; a nonzero start makes the adapters count in the first loss
    for name, p in model.named_parameters():
        if "lora_B" in name:
            p.normal_(0, 0.05)
state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items() if "lm_head" not in k}
checkpoint = os.path.join(work, "peft.safetensors")
save_file(state, checkpoint)
peft_map = os.path.join(work, "peft-gpt2.map")
with open(peft_map, "w") as f:
    f.write("prefix base_model.model.transformer.\n"
            "rename *.base_layer.weight *.weight\nrename *.base_layer.bias *.bias\n"
            "rename *.lora_A.default.weight *.lora_A.weight\nrename *.lora_B.default.weight *.lora_B.weight\n"
            "ignore *.attn.bias\nignore *.attn.masked_bias\n"
            "transpose *.attn.c_attn.weight\ntranspose *.attn.c_proj.weight\n"
            "transpose *.mlp.c_fc.weight\ntranspose *.mlp.c_proj.weight\n")

tokens, labels, data = hf_gpt2.batch(work)
expected = adamw_losses(hf_gpt2.Logits(copy.deepcopy(model)), (tokens,), labels.reshape(-1), STEPS, LR)

graph, plan = os.path.join(work, "g.tfg"), os.path.join(work, "g.tfplan")
code, err = hf_gpt2.zoo_graph(cli, graph)
assert code == 0, err
code, out, err = tightfit_cli("compile", graph, "--set", f"N={N}", "--optimizer", "adamw", "--lr", str(LR),
                              "--weight-decay", "0", "--lora", f"{RANK}:{ALPHA}", "--lora-targets",
                              "*.attn.c_attn.weight", "--lora-targets", "*.mlp.c_fc.weight", "-o", plan)
verdict("gpt2-small compiles with --lora on c_attn and c_fc", code == 0, err.strip()[-300:])
code, out, err = tightfit_cli("train", plan, "--data", data, "--steps", str(STEPS), "--json", "--init-from", checkpoint,
                              "--init-map", peft_map)
losses = hf_gpt2.train_losses(out)
worst = max((abs(a - b) / abs(b) for a, b in zip(losses, expected)), default=float("inf"))
verdict("PEFT's GPT-2 state into gpt2-small --lora: the losses of 5 AdamW steps",
        code == 0 and len(losses) == STEPS and worst <= 1e-6,
        f"exit {code}; tightfit {[round(x, 6) for x in losses]}, PEFT {[round(x, 6) for x in expected]}, "
        f"worst {worst:.1e}; {err.strip()[-300:]}")


wrapped = hf_gpt2.Logits(copy.deepcopy(model))
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    g = tightfit.from_torch(wrapped, (tokens,), loss="cross_entropy")
session = tightfit.Session(tightfit.compile(g, set={"N": N}, optimizer="adamw", lr=LR, weight_decay=0, clip=0), seed=0)
feed = {"x": tokens.numpy().astype(np.int64), "labels": labels.reshape(-1).numpy().astype(np.int32)}
got = [session.step(feed) for _ in range(STEPS)]
worst = max(abs(a - b) / abs(b) for a, b in zip(got, expected))
frozen = sum(1 for _, p in model.named_parameters() if not p.requires_grad)
verdict("from_torch of the PEFT model as it is (LoRA layers, base frozen by requires_grad): the same losses",
        worst <= 1e-6, f"tightfit {[round(x, 6) for x in got]}, worst {worst:.1e}; {frozen} frozen in PyTorch")

finish("lora_peft_gpt2")

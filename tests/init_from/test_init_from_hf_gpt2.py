"""`tightfit train --init-from` (issue 43, item 3): a Hugging Face GPT-2 checkpoint in its own layout
(GPT2LMHeadModel.save_pretrained: names under "transformer.", Conv1D weights stored [in, out], the
causal-mask buffers, the LM head tied to wte) loads into the zoo's gpt2-small preset (at 2 layers,
d 32, 2 heads, vocabulary 64, context 16) through the builtin map hf-gpt2, and its first loss is
Hugging Face's on the same tokens within 1e-5; the next steps train as PyTorch's AdamW does. Every
kind of mismatch is refused with the tensor named and nothing trained: a file without a parameter,
with a tensor the plan lacks, with a mis-shaped one, a transposed one the map does not declare, and a
map with a bad line. Runs in the .venv scripts/setup makes (transformers, safetensors).
usage: test_init_from_hf_gpt2.py TIGHTFIT_CLI"""
import os
import sys

import torch
import transformers
from safetensors.torch import save_file

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))  # tally, hf_gpt2
import hf_gpt2  # noqa: E402
from tally import finish, verdict  # noqa: E402
from torch_training import adamw_losses  # noqa: E402

cli, work = hf_gpt2.start("tightfit-init-from-")
N, STEPS, LR = hf_gpt2.N, 5, 1e-3


def tightfit(*args):
    return hf_gpt2.run(cli, *args)


config = hf_gpt2.config()
model = transformers.GPT2LMHeadModel(config)
model.save_pretrained(os.path.join(work, "hf"), safe_serialization=True)
checkpoint = os.path.join(work, "hf", "model.safetensors")

graph, plan = os.path.join(work, "g.tfg"), os.path.join(work, "g.tfplan")
code, err = hf_gpt2.zoo_graph(cli, graph)
assert code == 0, err
code, out, err = tightfit("compile", graph, "--set", f"N={N}", "--optimizer", "adamw", "--lr", str(LR),
                          "--weight-decay", "0", "-o", plan)
assert code == 0, err

tokens, labels, data = hf_gpt2.batch(work)


def reference_losses():
    """PyTorch training the Hugging Face model on the same batch: the loss before each step."""
    return adamw_losses(hf_gpt2.Logits(model), (tokens,), labels.reshape(-1), STEPS, LR)


def train(*extra):
    code, out, err = tightfit("train", plan, "--data", data, "--steps", str(STEPS), "--json", *extra)
    return code, hf_gpt2.train_losses(out), err


expected = reference_losses()
code, losses, err = train("--init-from", checkpoint, "--init-map", "hf-gpt2")
said = [line for line in err.splitlines() if line.startswith("initialised from")]
worst = max((abs(a - b) / abs(b) for a, b in zip(losses, expected)), default=float("inf"))
verdict("a Hugging Face GPT-2 checkpoint into gpt2-small through hf-gpt2: the losses of 5 AdamW steps",
        code == 0 and len(losses) == STEPS and worst <= 1e-5,
        f"exit {code}; tightfit {[round(x, 6) for x in losses]}, PyTorch {[round(x, 6) for x in expected]}, worst "
        f"{worst:.1e} relative; {said} {err.strip()[-300:] if code else ''}")
verdict("it says what it loaded", said and said[0].endswith(": 28 tensors (8 read transposed, 0 converted)"), said)
renamed = os.path.join(work, "renamed.map")
with open(renamed, "w") as f:  # the same as hf-gpt2, through rename lines and comments
    f.write("# GPT2LMHeadModel's names\nrename transformer.* *\nignore *.attn.bias   # buffers\n"
            "transpose *.c_attn.weight\ntranspose *.c_proj.weight\ntranspose *.c_fc.weight\n")
code, losses2, err = train("--init-from", checkpoint, "--init-map", renamed)
verdict("a map file with a rename line and comments loads the same", code == 0 and losses2 == losses,
        f"exit {code}; {losses2[:2]} {err.strip()[-200:]}")
code, losses, _ = train()
verdict("without --init-from the preset's own initial weights give another loss", code == 0 and losses and
        abs(losses[0] - expected[0]) > 1e-3, f"{losses[:1]} vs {expected[:1]}")

state = {k: v.contiguous() for k, v in model.state_dict().items()}
state.pop("lm_head.weight", None)  # tied to wte: safetensors stores a tensor once

# A bf16 checkpoint: converted on load, the losses those of the model with its weights rounded to bf16.
half = os.path.join(work, "bf16.safetensors")
save_file({k: v.to(torch.bfloat16) for k, v in state.items()}, half)
model = transformers.GPT2LMHeadModel(config)
with torch.no_grad():
    for k, v in model.state_dict().items():
        if k in state:
            v.copy_(state[k].to(torch.bfloat16).float())
expected = reference_losses()
code, losses, err = train("--init-from", half, "--init-map", "hf-gpt2")
worst = max((abs(a - b) / abs(b) for a, b in zip(losses, expected)), default=float("inf"))
verdict("a bf16 checkpoint: converted to the plan's f32, the losses of the bf16-rounded weights",
        code == 0 and worst <= 1e-5 and "28 converted" in err,
        f"exit {code}; worst {worst:.1e} relative; {err.strip()[-200:]}")


def refused(label, tensors, expect, map_text=None, map_name="hf-gpt2"):
    path = os.path.join(work, "bad.safetensors")
    save_file(tensors, path)
    map_arg = map_name
    if map_text is not None:
        map_arg = os.path.join(work, "bad.map")
        with open(map_arg, "w") as f:
            f.write(map_text)
    code, losses, err = train("--init-from", path, "--init-map", map_arg)
    verdict(label, code == 2 and not losses and all(e in err for e in expect), f"exit {code}: {err.strip()[:400]}")


missing = dict(state)
missing.pop("transformer.h.1.ln_2.bias")
refused("a parameter missing from the file", missing,
        ["1 problem loading it into plan", "the plan's parameter 'h.1.ln_2.bias' [32] is not in the file"])
extra = dict(state)
extra["transformer.h.9.extra.weight"] = torch.zeros(3)
refused("a tensor the plan lacks", extra,
        ["'transformer.h.9.extra.weight' (as 'h.9.extra.weight') is in the file, and the plan has no parameter"])
shaped = dict(state)
shaped["transformer.ln_f.weight"] = torch.ones(33)
refused("a mis-shaped tensor", shaped, ["'transformer.ln_f.weight' is [33] in the file, the plan's 'ln_f.weight' is [32]"])
# The attention's c_proj is square (32 x 32): no shape tells its transpose apart, which is why the map
# says which weights are stored transposed. The other six are named.
refused("Conv1D weights without the map's transpose lines: each non-square one named, with the hint",
        state, ["6 problems", "'transformer.h.0.attn.c_attn.weight' is [32,96] in the file, the plan's "
                "'h.0.attn.c_attn.weight' is [96,32] (stored transposed?"],
        map_text="prefix transformer.\nignore *.attn.bias\nignore *.attn.masked_bias\n")
refused("a map with a bad line", state, ["bad.map:2: 'transposed' is no map line"],
        map_text="prefix transformer.\ntransposed *.attn.c_attn.weight\n")
code, _, err = tightfit("train", plan, "--data", data, "--steps", "1", "--init-map", "hf-gpt2")
verdict("--init-map without --init-from is a usage error", code == 2 and "--init-map needs --init-from" in err, err.strip())
code, _, err = tightfit("train", plan, "--data", data, "--steps", "1", "--init-from", os.path.join(work, "none"))
verdict("a file that is not there", code == 2 and "none" in err, err.strip())

finish("init_from_hf_gpt2")

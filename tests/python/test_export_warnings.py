"""`tightfit import` warns when an ONNX file shows what an eval-mode torch.onnx.export changed
(tf_onnx_export_warnings, docs/import.md): a BatchNorm folded into the convolution before it, fresh
LayerNorms merged into one parameter through Identity nodes, a head tied to the embedding untied by
constant folding, the two layers of a TransformerEncoder merged. Each warning names the tensors; the
last line says how to export instead. The same models exported as tightfit.from_torch exports them
import without a warning.
usage: test_export_warnings.py   (PYTHONPATH=python)"""
import json
import os
import tempfile
import warnings

import inspect

import torch

import tightfit
from tally import check, finish

print("library:", tightfit.library_path())
torch.manual_seed(0)
folder = tempfile.mkdtemp()


def imported(path):
    """`tightfit import path --json`: the warnings it gives, and the text form's warning lines."""
    out = tightfit._run("import", [path, "-o", path[:-5] + ".tfg", "--json"])[1]
    text = tightfit._run("import", [path, "-o", path[:-5] + ".tfg"])[1]
    return json.loads(out)["warnings"], [line for line in text.splitlines() if line.startswith("warning: ")]


# The TorchScript exporter, whose eval-mode export these warnings are about: PyTorch 2.x also has the
# dynamo exporter (its default from 2.9, test_dynamo_export.py), and its TorchScript exporter's default
# opset is 20 (tightfit reads 7 to 21; these tests pin 17, as from_torch does), where 1.13's is 14.
TORCHSCRIPT = {"dynamo": False, "opset_version": 17} if "dynamo" in inspect.signature(torch.onnx.export).parameters \
    else {}


def eval_export(model, inputs, name, **options):
    """The README-style export of `model` in eval mode (torch's defaults but for `options`)."""
    path = os.path.join(folder, name + ".onnx")
    model.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, inputs, path, **options, **TORCHSCRIPT)
    return path


def from_torch_export(model, inputs, loss, dynamic_batch=True):
    """The ONNX file tightfit.from_torch wrote for `model` (kept in its graph's folder)."""
    model.train()
    graph = tightfit.from_torch(model, inputs, loss=loss, dynamic_batch=dynamic_batch)
    return graph, os.path.join(graph._dir, "model.onnx")


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.ln1, self.ln2 = torch.nn.Embedding(20, 8), torch.nn.LayerNorm(8), torch.nn.LayerNorm(8)
        self.head = torch.nn.Linear(8, 20, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, x):
        return self.head(self.ln2(self.ln1(self.emb(x)))).reshape(-1, 20)


HOW = "export with training=torch.onnx.TrainingMode.PRESERVE"
cnn = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3, bias=False), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                          torch.nn.Flatten(), torch.nn.Linear(4 * 9, 3))
cnn_inputs = (torch.randn(3, 2, 5, 5),)
# Conv+BatchNorm in eval mode, even without constant folding: PyTorch 1.13 folds the BatchNorm into
# the Conv, whose weight and (new) bias are initializers the exporter named; PyTorch 2.x keeps the
# BatchNormalization node but merges its fresh running statistics with the equal-valued weight and
# bias (ones and zeros), which would train as one.
said, lines = imported(eval_export(cnn, cnn_inputs, "cnn", do_constant_folding=False))
if TORCHSCRIPT:
    check("Conv+BatchNorm exported in eval mode: the running statistics merged with the weights are named",
          None if len(said) == 2 and "2 parameters tied to another initializer through Identity nodes" in said[0] and
          "'1.running_var' is '1.weight'" in said[0] and "'1.running_mean' is '1.bias'" in said[0] and
          HOW in said[1] and lines == ["warning: " + s for s in said]
          else "expected the tie warning and the how-to line, in --json and as text", said)
else:
    check("Conv+BatchNorm exported in eval mode: the folded BatchNorm is named",
          None if len(said) == 2 and "1 convolution reads weights the exporter computed" in said[0] and
          "'onnx::Conv_" in said[0] and "a BatchNorm folded into it" in said[0] and
          "no BatchNormalization node left" in said[0] and HOW in said[1] and lines == ["warning: " + s for s in said]
          else "expected the folding warning and the how-to line, in --json and as text", said)

tied, tied_inputs = Tied(), (torch.randint(0, 20, (3, 5)),)
said, _ = imported(eval_export(tied, tied_inputs, "tied"))
check("LayerNorms and a tied head exported in eval mode: the merged and the untied parameters are named",
      None if len(said) == 3 and "2 parameters tied to another initializer through Identity nodes" in said[0] and
      "'ln2.weight' is 'ln1.weight'" in said[0] and "'ln2.bias' is 'ln1.bias'" in said[0] and
      "a copy of the transpose of 'emb.weight': a tie the export broke" in said[1] else
      "expected the Identity ties, the broken tie and the how-to line", said)

encoder = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 2).eval()
for m in encoder.modules():  # off the fused inference path, which has no ONNX export
    if isinstance(m, (torch.nn.MultiheadAttention, torch.nn.TransformerEncoderLayer)):
        m.training = True
path = os.path.join(folder, "encoder.onnx")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    torch.onnx.export(encoder, (torch.randn(5, 3, 8),), path, training=torch.onnx.TrainingMode.PRESERVE, **TORCHSCRIPT)
said, _ = imported(path)
check("a TransformerEncoder whose top level is in eval mode: its two layers' parameters merged",
      None if len(said) == 3 and "15 parameters tied" in said[0] and "and 11 more" in said[0] and
      "3 matrix products read weights the exporter computed" in said[1] else "expected 15 ties and 3 folded weights",
      said)

# The same three models as from_torch exports them: no warning. The encoder is sequence-first, so
# axis 0 is its time axis, which PyTorch 2.x's export of MultiheadAttention fixes (k.shape[0] traced as
# a number): no dynamic axis there.
for label, model, inputs, loss, dynamic in (("Conv+BatchNorm", cnn, cnn_inputs, "cross_entropy", True),
                                            ("LayerNorms and a tied head", tied, tied_inputs, "cross_entropy", True),
                                            ("TransformerEncoder", encoder, (torch.randn(3, 5, 8),), "mse", False)):
    graph, path = from_torch_export(model, inputs, loss, dynamic)
    said, lines = imported(path)
    check(f"{label} as from_torch exports it: no warning", None if not said and not lines else "warned", said)
finish("export_warnings")

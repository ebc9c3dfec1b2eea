"""tightfit.from_torch on PyTorch's recurrent layers (issue 44): nn.LSTM, nn.GRU and nn.RNN, exported as
ONNX LSTM/GRU/RNN nodes and imported unrolled over time (include/tightfit/recurrent.h). Models: an embedding ->
2-layer bidirectional LSTM -> Linear head with cross_entropy; a GRU regressor on its last hidden state
with mse; a reverse-free single-direction LSTM without biases; initial states (h0, c0) given as model
inputs; a time-major (batch_first=False) LSTM with a fixed batch; a 2-layer GRU without biases; a
2-layer bidirectional tanh RNN and a relu RNN with h0 as an input; an LSTMCell unrolled over time whose
input's size the exporter loses (its gates split by unsafe_chunk of an axis of unknown size). Each is
trained 10 AdamW steps in tightfit and in PyTorch from the same weights (the tagger also with
--remat checkpoints, whose plan must recompute: more steps, a smaller arena): every loss within 1e-5
relative, every weight after training within 1e-5. One model also runs on the Vulkan backend
(lavapipe here) with the same losses. The tagger also imports at opsets 13 to 17 (first loss as
PyTorch's) and from the plain eval-mode export through `tightfit import` (10 AdamW steps as PyTorch's). A time-major input with a dynamic batch (its time axis then is
the batch symbol) is refused with a message that says what to do.
usage: test_from_torch_recurrent.py   (PYTHONPATH=python)"""
import copy
import inspect
import warnings

import numpy as np
import torch

import tightfit
from tally import case, finish, relative_apart
from torch_training import adamw_losses, pytorch_steps  # the same STEPS and LR as below

print("library:", tightfit.library_path())
torch.set_num_threads(1)
BATCH, STEPS, LR = 3, 10, 1e-2
plans = {}  # the cpu plan's summary of the last train_both call


def feed_of(inputs, labels, loss):
    feed = {name: t.numpy() if t.is_floating_point() else t.numpy().astype(np.int64) for name, t in inputs.items()}
    feed["labels"] = labels.numpy().astype(np.int32) if loss == "cross_entropy" else labels.numpy()
    return feed


def train_both(model, inputs, labels, loss, dynamic_batch=True, devices=("cpu",), **compile_options):
    """Imports `model` (inputs: {name: tensor}, given to the model in that order) with `loss`, trains
    STEPS AdamW steps in tightfit on each of `devices`, then in PyTorch from the same weights; returns a
    problem (None when the losses and the trained weights agree within 1e-5) and what was seen."""
    start = copy.deepcopy(model.state_dict())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's own export warnings on LSTM batch sizes
        graph = tightfit.from_torch(model, tuple(inputs.values()), loss=loss, input_names=list(inputs),
                                    dynamic_batch=dynamic_batch)
    bound = {"set": {"N": BATCH}} if dynamic_batch else {}
    feed = feed_of(inputs, labels, loss)
    runs = {}
    for device in devices:
        plan = tightfit.compile(graph, target=device, optimizer="adamw", lr=LR, weight_decay=0, clip=0, **bound,
                                **compile_options)
        try:
            session = tightfit.Session(plan, seed=0, device=device)
        except tightfit.TightfitError as error:
            if device != "cpu" and ("no Vulkan" in str(error) or "unsupported" in str(error).lower()):
                print(f"  ({device} skipped: {error})")
                continue
            raise
        plans[device] = plan.summary
        runs[device] = ([session.step(feed) for _ in range(STEPS)], session.state_dict())
        session.close()
    model.load_state_dict(start)
    expected, first_gradients = pytorch_steps(model, inputs, labels, loss)
    reference = {k: v.detach().numpy() for k, v in model.named_parameters()}
    seen, problems = [], []
    for device, (losses, trained) in runs.items():
        worst_loss = relative_apart(losses, expected)
        # an element whose first gradient nearly cancels moves by AdamW's lr g / (|g| + eps) on
        # rounding alone: left out of the weight comparison and counted (as in
        # test_from_torch_transformer.py)
        missing = sorted(set(reference) - set(trained))
        apart, noisy = {}, 0
        for k, v in reference.items():
            if k in trained:
                decided = first_gradients[k].abs().numpy() >= 1e-6
                noisy += int(v.size - decided.sum())
                apart[k] = float(np.max(np.abs(trained[k].reshape(v.shape) - v)[decided], initial=0.0))
        worst_name = max(apart, key=apart.get) if apart else "-"
        worst_weight = apart.get(worst_name, 0.0)
        seen.append(f"{device}: {len(reference)} tensors; {STEPS} AdamW steps {losses[0]:.6f} -> {losses[-1]:.6f} "
                    f"(PyTorch {expected[0]:.6f} -> {expected[-1]:.6f}), worst loss difference {worst_loss:.1e} "
                    f"relative, worst weight difference {worst_weight:.1e} ({worst_name}; {noisy} elements left out)")
        if missing:
            problems.append(f"{device}: the trained weights lack {missing}")
        elif worst_loss > 1e-5:
            problems.append(f"{device}: losses {losses} vs PyTorch's {expected}")
        elif noisy > sum(v.size for v in reference.values()) // 20:
            problems.append(f"{device}: over 5% of the elements left out of the weight comparison")
        elif worst_weight > 1e-5:
            problems.append(f"{device}: the trained weights are not PyTorch's")
    return ("; ".join(problems) or None), "; ".join(seen)


class Tagger(torch.nn.Module):
    """tokens [N, T] -> Embedding -> 2-layer bidirectional LSTM (batch_first) -> Linear per token."""

    def __init__(self, vocab=11, d=6, hidden=5, classes=4):
        super().__init__()
        self.embedding = torch.nn.Embedding(vocab, d)
        self.rnn = torch.nn.LSTM(d, hidden, num_layers=2, bidirectional=True, batch_first=True)
        self.head = torch.nn.Linear(2 * hidden, classes)
        self.classes = classes

    def forward(self, tokens):
        y, _ = self.rnn(self.embedding(tokens))
        return self.head(y).reshape(-1, self.classes)


class Regressor(torch.nn.Module):
    """x [N, T, I] (or [T, N, I]) -> a recurrent layer -> Linear on the last layer's last hidden state."""

    def __init__(self, kind, inputs=4, hidden=6, outputs=2, **options):
        super().__init__()
        self.rnn = getattr(torch.nn, kind)(inputs, hidden, **options)
        self.head = torch.nn.Linear(hidden * (2 if options.get("bidirectional") else 1), outputs)
        self.kind = kind

    def forward(self, x):
        _, state = self.rnn(x)
        h = state[0] if self.kind == "LSTM" else state
        last = torch.cat([h[-2], h[-1]], dim=1) if self.rnn.bidirectional else h[-1]
        return self.head(last)


class WithStates(torch.nn.Module):
    """x [N, T, I] and initial states as inputs -> LSTM or GRU (batch_first) -> Linear per step."""

    def __init__(self, kind, inputs=3, hidden=4, outputs=2, **options):
        super().__init__()
        self.rnn = getattr(torch.nn, kind)(inputs, hidden, batch_first=True, **options)
        self.head = torch.nn.Linear(hidden * (2 if options.get("bidirectional") else 1), outputs)
        self.kind = kind

    def forward(self, x, h0, c0=None):
        y, _ = self.rnn(x, (h0, c0) if self.kind == "LSTM" else h0)
        return self.head(y)


def lstm_tagger(**compile_options):
    def run():
        torch.manual_seed(1)
        tokens, tags = torch.randint(0, 11, (BATCH, 7)), torch.randint(0, 4, (BATCH * 7,))
        problem, seen = train_both(Tagger(), {"tokens": tokens}, tags, "cross_entropy", **compile_options)
        steps, arena = plans["cpu"]["steps"], plans["cpu"]["regions"]["arena"]
        seen += f"; plan: {steps} steps, arena {arena} bytes"
        if compile_options and not problem and not (steps > plans_without[0] and arena < plans_without[1]):
            problem = f"recompute changed nothing: {steps} steps, arena {arena} bytes, as without it {plans_without}"
        if not compile_options:
            plans_without[:] = [steps, arena]
        return problem, seen
    return run


plans_without = [0, 0]  # the tagger's plan without recompute: steps, arena bytes


def gru_regressor(devices):
    def run():
        torch.manual_seed(2)
        x, y = torch.randn(BATCH, 6, 4), torch.randn(BATCH, 2)
        return train_both(Regressor("GRU", batch_first=True), {"x": x}, y, "mse", devices=devices)
    return run


def gru_two_layers_no_bias():
    torch.manual_seed(3)
    x, y = torch.randn(BATCH, 5, 4), torch.randn(BATCH, 2)
    return train_both(Regressor("GRU", num_layers=2, bias=False, bidirectional=True, batch_first=True), {"x": x}, y,
                      "mse")


def lstm_no_bias():
    torch.manual_seed(4)
    x, y = torch.randn(BATCH, 5, 4), torch.randn(BATCH, 2)
    return train_both(Regressor("LSTM", bias=False, batch_first=True), {"x": x}, y, "mse")


def lstm_time_major():
    torch.manual_seed(5)
    x, y = torch.randn(6, BATCH, 4), torch.randn(BATCH, 2)
    return train_both(Regressor("LSTM", num_layers=2, bidirectional=True), {"x": x}, y, "mse", dynamic_batch=False)


def lstm_initial_states():
    torch.manual_seed(6)
    x, y = torch.randn(BATCH, 5, 3), torch.randn(BATCH, 5, 2)
    h0, c0 = torch.randn(4, BATCH, 4), torch.randn(4, BATCH, 4)
    model = WithStates("LSTM", num_layers=2, bidirectional=True)
    return train_both(model, {"x": x, "h0": h0, "c0": c0}, y, "mse", dynamic_batch=False)


def gru_initial_state():
    torch.manual_seed(7)
    x, y = torch.randn(BATCH, 4, 3), torch.randn(BATCH, 4, 2)
    h0 = torch.randn(1, BATCH, 4)
    return train_both(WithStates("GRU"), {"x": x, "h0": h0}, y, "mse", dynamic_batch=False)


def rnn_two_layers():
    torch.manual_seed(10)
    x, y = torch.randn(BATCH, 6, 4), torch.randn(BATCH, 2)
    return train_both(Regressor("RNN", num_layers=2, bidirectional=True, batch_first=True), {"x": x}, y, "mse",
                      devices=("cpu", "vulkan"))


def rnn_relu_initial_state():
    torch.manual_seed(11)
    x, y = torch.randn(BATCH, 5, 3), torch.randn(BATCH, 5, 2)
    h0 = torch.randn(1, BATCH, 4)
    return train_both(WithStates("RNN", nonlinearity="relu"), {"x": x, "h0": h0}, y, "mse", dynamic_batch=False)


def opsets():
    """The tagger through from_torch at opsets 13 to 17: the first loss equals PyTorch's."""
    torch.manual_seed(8)
    model = Tagger()
    tokens, tags = torch.randint(0, 11, (BATCH, 7)), torch.randint(0, 4, (BATCH * 7,))
    with torch.no_grad():
        expected = torch.nn.functional.cross_entropy(model(tokens), tags).item()
    seen, problems = [], []
    for opset in range(13, 18):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph = tightfit.from_torch(model, (tokens,), loss="cross_entropy", input_names=["tokens"],
                                        opset_version=opset)
        session = tightfit.Session(tightfit.compile(graph, set={"N": BATCH}), seed=0)
        loss = session.forward(feed_of({"tokens": tokens}, tags, "cross_entropy"))
        seen.append(f"opset {opset}: {loss:.7f}")
        if abs(loss - expected) > 1e-5 * abs(expected):
            problems.append(f"opset {opset}: first loss {loss} vs PyTorch's {expected}")
    return ("; ".join(problems) or None), f"PyTorch {expected:.7f}; " + ", ".join(seen)


# The README's export is the TorchScript exporter's: PyTorch 2.x's default, the dynamo exporter, writes
# opset 18 and later (and cannot write 14).
TORCHSCRIPT = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}


def plain_export_cli():
    """The README's plain export (eval mode, constant folding: W, R and B become initializers of their
    own) through `tightfit import --loss cross_entropy`: 10 AdamW steps give PyTorch's losses (AdamW is
    elementwise, so the folded copies train as the module's parameters do)."""
    import os
    import tempfile
    torch.manual_seed(9)
    model = Tagger()
    tokens, tags = torch.randint(0, 11, (BATCH, 7)), torch.randint(0, 4, (BATCH * 7,))
    start = copy.deepcopy(model.state_dict())
    with tempfile.TemporaryDirectory() as folder:
        onnx_path, tfg = os.path.join(folder, "tagger.onnx"), os.path.join(folder, "tagger.tfg")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model.eval(), (tokens,), onnx_path, input_names=["tokens"], output_names=["logits"],
                              dynamic_axes={"tokens": {0: "N"}, "logits": {0: "N"}}, opset_version=14, **TORCHSCRIPT)
        code, out, err = tightfit._lib.run_cli(["import", onnx_path, "--loss", "cross_entropy", "-o", tfg])
        if code != 0:
            return f"tightfit import exited {code}: {err.strip()}", out.strip()
        plan = tightfit.compile(tfg, set={"N": BATCH}, optimizer="adamw", lr=LR, weight_decay=0, clip=0)
        session = tightfit.Session(plan, seed=0)
        feed = feed_of({"tokens": tokens}, tags, "cross_entropy")
        losses = [session.step(feed) for _ in range(STEPS)]
        session.close()
    model.load_state_dict(start)
    model.train()
    expected = adamw_losses(model, (tokens,), tags, STEPS, LR)
    worst = relative_apart(losses, expected)
    seen = (f"{out.strip().splitlines()[0]}; {STEPS} AdamW steps {losses[0]:.6f} -> {losses[-1]:.6f} (PyTorch "
            f"{expected[0]:.6f} -> {expected[-1]:.6f}), worst loss difference {worst:.1e} relative")
    return (f"losses {losses} vs PyTorch's {expected}" if worst > 1e-5 else None), seen


class DecoderCell(torch.nn.Module):
    """An LSTMCell unrolled over time, its input the step's features beside a context whose feature size the
    exporter loses (a squeeze of an axis it cannot see is 1, as Tacotron 2's attention context): the trace
    splits the cell's gates with unsafe_chunk, which torch refuses for an axis of unknown size."""

    def __init__(self):
        super().__init__()
        self.cell, self.head = torch.nn.LSTMCell(8, 8), torch.nn.Linear(8, 3)

    def forward(self, x):
        n = x.shape[0]
        h, c = torch.zeros(n, 8, dtype=x.dtype), torch.zeros(n, 8, dtype=x.dtype)
        for t in range(x.shape[1]):
            context = h[:, :4].reshape(n, -1, 4).squeeze(1)
            h, c = self.cell(torch.cat((x[:, t], context), -1), (h, c))
        return self.head(h)


def lstm_cell_lost_size():
    torch.manual_seed(41)
    return train_both(DecoderCell(), {"x": torch.randn(BATCH, 3, 4)}, torch.randint(0, 3, (BATCH,)), "cross_entropy")


def time_major_dynamic_refused():
    x = torch.randn(6, BATCH, 4)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tightfit.from_torch(Regressor("LSTM"), (x,), loss="mse")
    except tightfit.TightfitError as error:
        text = str(error)
        wanted = ["LSTM", "time axis", "symbolic ('N')", "batch_first=True", "dynamic_batch=False"]
        lacking = [w for w in wanted if w not in text]
        return (f"the message lacks {lacking}" if lacking else None), text
    return "a time-major LSTM with a dynamic batch imported", ""


case("Embedding -> 2-layer bidirectional LSTM (batch_first) -> Linear, cross_entropy", lstm_tagger())
case("the same with activations recomputed (remat checkpoints)", lstm_tagger(remat="checkpoints"))
case("GRU regressor on h_n, mse, on cpu and vulkan", gru_regressor(("cpu", "vulkan")))
case("2-layer bidirectional GRU without biases, mse", gru_two_layers_no_bias)
case("LSTM without biases, mse", lstm_no_bias)
case("time-major 2-layer bidirectional LSTM (batch_first=False, fixed batch), mse", lstm_time_major)
case("2-layer bidirectional LSTM with h0, c0 as inputs, mse", lstm_initial_states)
case("GRU with h0 as an input, mse", gru_initial_state)
case("2-layer bidirectional RNN (tanh), mse, on cpu and vulkan", rnn_two_layers)
case("RNN (relu) with h0 as an input, mse", rnn_relu_initial_state)
case("the tagger through from_torch at opsets 13..17: first loss as PyTorch's", opsets)
case("the tagger's plain eval-mode export through `tightfit import`, 10 AdamW steps", plain_export_cli)
case("time-major LSTM with a dynamic batch: refused, saying what to do", time_major_dynamic_refused)
case("an LSTMCell unrolled, its gates' size lost by the exporter (unsafe_chunk), cross_entropy", lstm_cell_lost_size)
finish("from_torch recurrent")

"""tightfit.from_torch on timm's image models as they are (timm.create_model, random weights, no download),
each at its smallest size with 5 classes, in train mode with dropout and stochastic depth at 0: one model of
each family whose code takes a path the others do not. Each is imported and takes one SGD step, checked as
test_from_torch_torchvision.py checks torchvision's (gradient_check.py: the loss, every parameter's gradient
and the running statistics against PyTorch's in float64, within ten times PyTorch's own float32 noise on
each). AdamW steps at train_both's learning rate send these deep models' losses up and down by factors of
5 within ten steps, where a rounding difference grows: one step measures the import and the gradients.

- VOLO: outlook attention folds its patches back (F.fold, col2im: ONNX's Col2Im is opset 18), its output
  size traced from x.shape;
- HaloNet: its blocks' halos by Tensor.unfold along an axis whose size the exporter lost (torch refused it);
- NF-ResNet: scaled weight standardisation in every convolution, no normalisation layers;
- EfficientViT (MIT's M series): cascaded group attention with per-head attention biases gathered by index;
- MaxViT: block and grid partitions (window attention both ways) with relative position tables, MBConv;
- EVA-02: rotary position embeddings and SwiGLU;
- Hiera: mask-unit attention over unrolled, reordered tokens (its zero-initialised head drawn at random
  here, so that the first steps train the body too);
- XCiT: cross-covariance attention (over channels, L2-normalised) and local patch interaction;
- MambaOut: gated CNN blocks; GC ViT: global query tokens repeated over windows; ResNeSt: split attention
  (a radix softmax); LeViT: attention biases by index tables, hard-swish, BatchNorm on linear layers.

timm is pinned in scripts/requirements-torch2.txt (.venv-torch2): python_from_torch_timm_torch2 (PyTorch 2.x
only, for CI's time: the same models pass under Debian's PyTorch 1.13 with timm 1.0.12 beside it, 3 minutes
on the 2-core VM); SKIP where scripts/setup installed no timm.
usage: test_from_torch_timm.py   (PYTHONPATH=python)"""
import os
import warnings

for _pool in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_pool, "1")

import torch  # noqa: E402

try:
    import timm  # noqa: E402
except ImportError as error:
    print(f"SKIP: timm does not import here ({error}): scripts/setup installs it")
    raise SystemExit(77)

import tightfit  # noqa: E402
from tally import case, finish  # noqa: E402
from gradient_check import compare  # noqa: E402

print("library:", tightfit.library_path(), "torch", torch.__version__, "timm", timm.__version__)
torch.set_num_threads(1)
warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", category=UserWarning)

# name, image size, keyword arguments of timm.create_model beyond the defaults below
MODELS = [
    ("volo_d1_224", 64, {"img_size": 64}),
    ("halonet26t", 256, {}),
    ("nf_resnet26", 64, {}),
    ("efficientvit_m0", 64, {"img_size": 64, "drop_path_rate": None}),
    ("maxvit_nano_rw_256", 64, {"img_size": 64}),
    ("eva02_tiny_patch14_224", 56, {"img_size": 56}),
    ("hiera_tiny_224", 64, {"img_size": 64}),
    ("xcit_nano_12_p16_224", 64, {"img_size": 64}),
    ("mambaout_femto", 64, {}),
    ("gcvit_xxtiny", 64, {"img_size": 64}),
    ("resnest14d", 64, {}),
    ("levit_128s", 64, {"img_size": 64}),
]


BATCH = 4


def build(name, size, extra):
    torch.manual_seed(0)
    arguments = {"pretrained": False, "num_classes": 5, "drop_rate": 0.0, "drop_path_rate": 0.0, **extra}
    model = timm.create_model(name, **{k: v for k, v in arguments.items() if v is not None})
    head = model.get_classifier()
    if isinstance(head, torch.nn.Linear) and not head.weight.abs().sum():  # zero-initialised: draw it
        torch.nn.init.normal_(head.weight, std=0.02)
    model.train()
    return model, torch.randn(BATCH, 3, size, size)


def one(name, size, extra):
    def run():
        model, images = build(name, size, extra)
        return compare(model, images, torch.randint(0, 5, (BATCH,)), "cross_entropy", False)
    return run


for _name, _size, _extra in MODELS:
    case(f"timm {_name} at {_size} x {_size} trains as PyTorch's", one(_name, _size, _extra))

finish("from_torch_timm")

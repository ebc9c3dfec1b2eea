"""tightfit.from_torch on torchvision's models as they are: ResNet, MobileNet v2/v3, EfficientNet,
ShuffleNet, SqueezeNet, GoogLeNet, ConvNeXt, Swin and Swin v2, a small ViT, the DeepLabV3 and LR-ASPP
segmentation heads, the video ResNets r3d_18 and mc3_18 (Conv3d), and MaxViT (under PyTorch 2.x),
built with random weights (no download), in train mode (BatchNorm on each batch's statistics), dropout
and stochastic depth at 0.

Each is imported with torchvision imported first (as a user's script has it: torchvision registers its
ONNX ops on import, which under PyTorch 2.9+ left from_torch without the exporter's private helpers),
then one SGD step is taken in tightfit at a learning rate of 1e7, so that (w0 - w1) / lr is each
parameter's gradient to f32's precision. Checked against PyTorch on the same batch in float64: the
loss, every parameter's gradient, and the BatchNorm running statistics after the step.

Deep BatchNorm networks on small batches are ill-conditioned (a random 2^-24 change of the weights,
float32's rounding, moves some of DenseNet-121's float64 gradients by 2% at 4 x 64 x 64, RegNetY-400MF's
by 0.8%), so each tensor's tolerance is ten times PyTorch's own noise on it (the farthest from float64
of PyTorch's float32 result and of float64's after two such changes of the weights), and at least 1e-4
(1e-5 for the running statistics and the loss): a wrong op or gradient is off by far more. A rounding
that flips an activation at a ReLU's kink moves a gradient in one jump, which two roundings may miss:
each model's seed is one where eight roundings moved no gradient by more than 1e-3. RegNetY-400MF,
DenseNet-121 and r2plus1d_18 are left out: none of the seeds tried was such (RegNetY at 4 x 64 x 64, seeds
1-4 and 7: 1.6e-2 to 3.1e-2; DenseNet-121 at 64 and 128: 1.7e-2 to 1.2e-1; r2plus1d_18: 8.7e-3 to
2.3e-2). ResNet-18, MobileNet v3 and mc3_18 also run on Vulkan (lavapipe here), checked the same way, under
PyTorch 1.13 only.

Runs under Debian's PyTorch 1.13 (python3-torchvision 0.14) and PyTorch 2.x (.venv-torch2, torchvision
from scripts/requirements-torch2.txt). usage: test_from_torch_torchvision.py   (PYTHONPATH=python)"""
import os
import warnings

# One thread in each pool: ctest runs two tests at a time on CI's two cores, where teams of two
# (OpenMP spinning at each barrier, OpenBLAS's own pool) in each of two such tests took 3-4 times
# their time alone. Set before numpy and torch load their BLAS.
for _pool in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_pool, "1")

import torch  # noqa: E402
import torchvision  # noqa: E402 (first, as a user's script imports it)

import tightfit  # noqa: E402
from gradient_check import compare  # noqa: E402
from tally import case, finish  # noqa: E402

BATCH = 4
# Vulkan's kernels do not depend on which exporter wrote the graph: the run under Debian's PyTorch
# checks them, the 2.x run the CPU only (CI time: lavapipe runs these steps 10-100 times slower).
ON_VULKAN = torch.__version__.startswith("1.")
ALSO_VULKAN = ", also on Vulkan" if ON_VULKAN else ""
torch.set_num_threads(1)
warnings.filterwarnings("ignore")
M = torchvision.models
print("library:", tightfit.library_path(), "torch", torch.__version__, "torchvision", torchvision.__version__)


def without_dropout(model):
    """Dropout and stochastic depth at 0: the rest of the training forward pass is deterministic."""
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout) or type(m).__name__ == "StochasticDepth":
            m.p = 0.0
    return model


class Segmentation(torch.nn.Module):
    """A torchvision segmentation model's "out" map (its forward returns a dict)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def classifier(build, size=64, vulkan=False, seed=7, frames=None):
    """An image classifier (a video one: `frames` planes) of 5 classes, cross_entropy."""
    def run():
        torch.manual_seed(seed)
        model = without_dropout(build())
        x = torch.randn(BATCH, 3, *((frames,) if frames else ()), size, size)
        return compare(model, x, torch.randint(0, 5, (BATCH,)), "cross_entropy", vulkan and ON_VULKAN)
    return run


def segmentation(build, size=64):
    def run():
        torch.manual_seed(7)
        model = Segmentation(without_dropout(build()))
        x = torch.randn(BATCH, 3, size, size)
        with torch.no_grad():
            target = torch.randn_like(model(x))
        return compare(model, x, target, "mse", False)
    return run


case(f"torchvision resnet18 (BatchNorm, max pool, residual adds){ALSO_VULKAN}",
     classifier(lambda: M.resnet18(num_classes=5), vulkan=True))
case("torchvision mobilenet_v2 (width 0.5: depthwise convolutions, ReLU6)",
     classifier(lambda: M.mobilenet_v2(num_classes=5, width_mult=0.5), seed=2))
case(f"torchvision mobilenet_v3_small (hardswish, squeeze-excitation with hardsigmoid){ALSO_VULKAN}",
     classifier(lambda: M.mobilenet_v3_small(num_classes=5), vulkan=True))
case("torchvision efficientnet_b0 (SiLU, squeeze-excitation, stochastic depth at 0)",
     classifier(lambda: M.efficientnet_b0(num_classes=5)))
case("torchvision shufflenet_v2_x0_5 (channel shuffle: reshape, transpose, split)",
     classifier(lambda: M.shufflenet_v2_x0_5(num_classes=5)))
case("torchvision squeezenet1_1 (fire modules, ceil_mode max pools)",
     classifier(lambda: M.squeezenet1_1(num_classes=5)))
case("torchvision googlenet (inception branches concatenated, no auxiliary heads)",
     classifier(lambda: M.googlenet(num_classes=5, aux_logits=False, init_weights=True), seed=1))
case("torchvision convnext_tiny (7x7 depthwise, LayerNorm over permuted channels, layer scale 1e-6)",
     classifier(lambda: M.convnext_tiny(num_classes=5)))
case("torchvision swin_t (shifted windows by torch.roll, relative position bias)",
     classifier(lambda: M.swin_t(num_classes=5)))
case("torchvision VisionTransformer (2 layers, d 32, 8x8 patches, class token)",
     classifier(lambda: M.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32,
                                            mlp_dim=64, num_classes=5), size=32))
case("torchvision deeplabv3_mobilenet_v3_large (ASPP: global pooling upsampled bilinearly), mse",
     segmentation(lambda: M.segmentation.deeplabv3_mobilenet_v3_large(num_classes=5, weights_backbone=None)))
case("torchvision lraspp_mobilenet_v3_large (bilinear upsampling of two scales), mse",
     segmentation(lambda: M.segmentation.lraspp_mobilenet_v3_large(num_classes=5, weights_backbone=None)))
case("torchvision video r3d_18 (Conv3d, BatchNorm3d; 4 frames of 32 x 32)",
     classifier(lambda: M.video.r3d_18(num_classes=5), size=32, frames=4))
case(f"torchvision video mc3_18 (3-d then 2-d-in-3-d convolutions){ALSO_VULKAN}",
     classifier(lambda: M.video.mc3_18(num_classes=5), size=32, frames=4, vulkan=True))
if hasattr(M, "swin_v2_t"):  # torchvision 0.14 (Debian's) has it too
    case("torchvision swin_v2_t (cosine attention with a learned logit scale, log-spaced position MLP)",
         classifier(lambda: M.swin_v2_t(num_classes=5)))
if hasattr(M, "maxvit_t") and not torch.__version__.startswith("1."):  # 224 x 224: the 2.x run only (CI time)
    case("torchvision maxvit_t (MBConv, block and grid attention; 224 x 224, its smallest)",
         classifier(lambda: M.maxvit_t(num_classes=5), size=224))
finish("from_torch_torchvision")

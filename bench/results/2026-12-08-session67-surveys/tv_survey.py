import sys, time, warnings, os
os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch, numpy as np, torchvision
sys.path[:0] = ["/work/main/python"]
import tightfit
warnings.filterwarnings("ignore"); torch.set_num_threads(1)
M = torchvision.models
def run(name, build, shape, loss="cross_entropy"):
    t0 = time.time(); torch.manual_seed(0)
    try:
        model = build()
        for m in model.modules():
            if isinstance(m, torch.nn.Dropout) or type(m).__name__ == "StochasticDepth": m.p = 0.0
        model.train()
        x = torch.randn(*shape)
        with torch.no_grad(): out = model(x)
        if loss == "cross_entropy": y = torch.randint(0, 5, (shape[0],))
        graph = tightfit.from_torch(model, (x,), loss=loss)
        s = tightfit.Session(tightfit.compile(graph, set={"N": shape[0]}, optimizer="sgd", lr=1e-9), seed=0)
        l = s.step({"x": x.numpy(), "labels": y.numpy().astype(np.int32)})
        ref = float(torch.nn.functional.cross_entropy(model(x), y))
        rel = abs(l - ref) / abs(ref)
        print(f"{name} {'OK' if rel < 1e-4 else 'DIFF'} loss {l:.6f} torch {ref:.6f} rel {rel:.1e} ({time.time()-t0:.0f}s)", flush=True)
    except Exception as e:
        print(f"{name} ERROR {type(e).__name__}: {' / '.join(str(e).strip().splitlines()[:2])[:300]} ({time.time()-t0:.0f}s)", flush=True)
B = 2
which = sys.argv[1:]
cases = {
 "alexnet": (lambda: M.alexnet(num_classes=5), (B, 3, 64, 64)),
 "vgg11_bn": (lambda: M.vgg11_bn(num_classes=5), (B, 3, 32, 32)),
 "densenet121": (lambda: M.densenet121(num_classes=5), (B, 3, 64, 64)),
 "inception_v3": (lambda: M.inception_v3(num_classes=5, aux_logits=False, init_weights=True), (B, 3, 96, 96)),
 "mnasnet0_5": (lambda: M.mnasnet0_5(num_classes=5), (B, 3, 64, 64)),
 "regnet_y_400mf": (lambda: M.regnet_y_400mf(num_classes=5), (B, 3, 64, 64)),
 "resnext50": (lambda: M.resnext50_32x4d(num_classes=5), (B, 3, 64, 64)),
 "wide_resnet50_2": (lambda: M.wide_resnet50_2(num_classes=5), (B, 3, 32, 32)),
 "efficientnet_v2_s": (lambda: M.efficientnet_v2_s(num_classes=5), (B, 3, 64, 64)),
 "convnext_tiny": (lambda: M.convnext_tiny(num_classes=5), (B, 3, 64, 64)),
 "vit_b_16": (lambda: M.vit_b_16(num_classes=5, image_size=32), (B, 3, 32, 32)),
 "swin_v2_t": (lambda: M.swin_v2_t(num_classes=5), (B, 3, 64, 64)),
 "maxvit_t": (lambda: M.maxvit_t(num_classes=5), (B, 3, 224, 224)),
 "s3d": (lambda: M.video.s3d(num_classes=5), (B, 3, 8, 64, 64)),
 "r2plus1d_18": (lambda: M.video.r2plus1d_18(num_classes=5), (B, 3, 4, 32, 32)),
 "mvit_v2_s": (lambda: M.video.mvit_v2_s(num_classes=5), (B, 3, 16, 224, 224)),
 "swin3d_t": (lambda: M.video.swin3d_t(num_classes=5), (B, 3, 4, 64, 64)),
}
for name, (build, shape) in cases.items():
    if not which or name in which:
        run(name, build, shape)

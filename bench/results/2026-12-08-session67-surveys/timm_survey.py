import sys, time, warnings, traceback, os
os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch, numpy as np
import timm
sys.path[:0] = ["/work/main/python"]
import tightfit
warnings.filterwarnings("ignore")
torch.set_num_threads(1)
names = sys.argv[1:]
for name in names:
    t0 = time.time()
    torch.manual_seed(0)
    try:
        kwargs = dict(pretrained=False, num_classes=5, drop_rate=0.0)
        sized = True
        native = os.environ.get("NATIVE")
        try:
            if native:
                raise TypeError
            model = timm.create_model(name, drop_path_rate=0.0, img_size=64, **kwargs)
        except TypeError:
            sized = False
            try:
                model = timm.create_model(name, drop_path_rate=0.0, **kwargs)
            except TypeError:
                model = timm.create_model(name, **kwargs)
        size = 64
        cfg = getattr(model, "pretrained_cfg", {}) or {}
        if native or (not sized and cfg.get("fixed_input_size")):
            size = cfg["input_size"][-1]
        x = torch.randn(2, 3, size, size)
        y = torch.randint(0, 5, (2,))
        model.train()
        with torch.no_grad():
            model(x)
        graph = tightfit.from_torch(model, (x,), loss="cross_entropy")
        plan = tightfit.compile(graph, set={"N": 2}, optimizer="sgd", lr=1e-9)
        s = tightfit.Session(plan, seed=0)
        loss = s.step({"x": x.numpy(), "labels": y.numpy().astype(np.int32)})
        ref = float(torch.nn.functional.cross_entropy(model(x), y))
        rel = abs(loss - ref) / abs(ref)
        print(f"{name} {'OK' if rel < 1e-4 else 'DIFF'} loss {loss:.6f} torch {ref:.6f} rel {rel:.1e} ({time.time()-t0:.0f}s)", flush=True)
    except Exception as e:
        msg = " / ".join(str(e).strip().splitlines()[:2])[:300]
        print(f"{name} ERROR {type(e).__name__}: {msg} ({time.time()-t0:.0f}s)", flush=True)

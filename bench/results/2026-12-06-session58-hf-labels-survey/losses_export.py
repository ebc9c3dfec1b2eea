import sys, torch, torch.nn.functional as F, io, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, "/work/main/python")
import tightfit
cases = {
 "mse": lambda a, b: F.mse_loss(a, b), "mse_sum": lambda a, b: F.mse_loss(a, b, reduction="sum"),
 "l1": lambda a, b: F.l1_loss(a, b), "smooth_l1": lambda a, b: F.smooth_l1_loss(a, b, beta=0.5),
 "huber": lambda a, b: F.huber_loss(a, b, delta=0.7), "bce": lambda a, b: F.binary_cross_entropy(torch.sigmoid(a), torch.sigmoid(b)),
 "bce_logits": lambda a, b: F.binary_cross_entropy_with_logits(a, torch.sigmoid(b)),
 "kl_div": lambda a, b: F.kl_div(F.log_softmax(a, -1), F.softmax(b, -1), reduction="batchmean"),
 "cosine_emb": lambda a, b: F.cosine_embedding_loss(a, b, torch.ones(a.shape[0])),
 "margin_rank": lambda a, b: F.margin_ranking_loss(a[:, 0], b[:, 0], torch.ones(a.shape[0])),
 "soft_margin": lambda a, b: F.soft_margin_loss(a, torch.sign(b)),
 "poisson": lambda a, b: F.poisson_nll_loss(a, b.abs()),
 "gaussian_nll": lambda a, b: F.gaussian_nll_loss(a, b, torch.ones_like(a)),
 "triplet": lambda a, b: F.triplet_margin_loss(a, b, -b), "triplet_p1_swap": lambda a, b: F.triplet_margin_loss(a, b, 0.5 * b, p=1, swap=True),
 "hinge_emb": lambda a, b: F.hinge_embedding_loss(a, torch.sign(b)),
 "multilabel_soft": lambda a, b: F.multilabel_soft_margin_loss(a, (b > 0).float()),
 "cos_sim": lambda a, b: (1 - F.cosine_similarity(a, b)).mean(),
}
class M(torch.nn.Module):
    def __init__(s, f): super().__init__(); s.l = torch.nn.Linear(6, 4); s.f = f
    def forward(s, x, t): return s.f(s.l(x), t)
for name, f in cases.items():
    torch.manual_seed(0)
    m = M(f); x, t = torch.randn(5, 6), torch.randn(5, 4)
    try:
        g = tightfit.from_torch(m, (x, t), loss="output", input_names=["x", "t"])
        plan = tightfit.compile(g, set={"N": 5}, optimizer="sgd", lr=1e-3)
        s = tightfit.Session(plan, seed=0)
        got = s.forward({"x": x.numpy(), "t": t.numpy()})
        want = m(x, t).item()
        print(f"{'OK  ' if abs(got - want) <= 1e-5 * max(1, abs(want)) else 'DIFF'} {name}: {got:.6f} vs {want:.6f}")
    except Exception as e:
        print(f"FAIL {name}: {type(e).__name__}: {str(e)[:160]}")

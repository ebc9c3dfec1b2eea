import sys, copy, torch, numpy as np, torch.nn.functional as F
sys.path.insert(0, "/work/main/python")
import tightfit
torch.set_num_threads(2)
class E(torch.nn.Module):
    def __init__(s):
        super().__init__(); s.c1 = torch.nn.Conv1d(8, 32, 3, padding=1); s.c2 = torch.nn.Conv1d(32, 32, 3, stride=2, padding=1)
    def forward(s, x, t):
        h = F.gelu(s.c2(F.gelu(s.c1(x))))
        return ((h.permute(0, 2, 1) - t) ** 2).mean()
torch.manual_seed(0)
m = E(); start = copy.deepcopy(m)
x, t = torch.randn(4, 8, 16), torch.randn(4, 8, 32)
g = tightfit.from_torch(m, (x, t), loss="output", input_names=["x", "t"])
s = tightfit.Session(tightfit.compile(g, set={"N": 4}, optimizer="sgd", lr=1.0, weight_decay=0, clip=0), seed=0)
s.step({"x": x.numpy(), "t": t.numpy()})
start(x, t).backward()
for name, p in start.named_parameters():
    mine = p.detach().numpy() - s.read(name, tuple(p.shape)); ref = p.grad.numpy()
    print(name, np.abs(mine - ref).max() / np.abs(ref).max())
print("p0", start.c1.bias.detach().numpy()[:4], "read", s.read("c1.bias", (32,))[:4])
s2 = tightfit.Session(tightfit.compile(g, set={"N": 4}, optimizer="sgd", lr=1.0, weight_decay=0, clip=0), seed=0)
print("fresh read", s2.read("c1.bias", (32,))[:4])
print("mine", (start.c2.bias.detach().numpy() - s.read("c2.bias", (32,)))[:4])
print("ref ", start.c2.bias.grad.numpy()[:4])
m3 = copy.deepcopy(start); m3.zero_grad(); m3(x, t).backward(); print("ref again", m3.c2.bias.grad.numpy()[:4])

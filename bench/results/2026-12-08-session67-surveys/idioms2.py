import sys, warnings, torch
import torch.nn.functional as F
sys.path[:0] = ["/work/main/python", "/work/main/tests/python"]
import tightfit
from torch_training import train_both
warnings.filterwarnings("ignore")
B = 3
class M(torch.nn.Module):
    def __init__(s, body, ins=8): super().__init__(); s.lin = torch.nn.Linear(ins, 8); s.body = body; s.head = torch.nn.LazyLinear(4)
    def forward(s, x): return s.head(s.body(s, s.lin(x)).reshape(x.shape[0], -1))
cases = {}
def case(f): cases[f.__name__] = f; return f
def sq(h): return h.view(-1, 2, 2, 2)[:, 0]  # [N, 2, 2]
@case
def det():
    return M(lambda s, h: torch.det(sq(h) + 2 * torch.eye(2)).unsqueeze(-1) * h)
@case
def slogdet():
    return M(lambda s, h: torch.slogdet(sq(h) + 2 * torch.eye(2))[1].unsqueeze(-1) * h)
@case
def logdet_weight():
    m = M(lambda s, h: h @ s.w + torch.slogdet(s.w)[1]); m.w = torch.nn.Parameter(torch.eye(8) + 0.1 * torch.randn(8, 8)); return m
@case
def inverse():
    return M(lambda s, h: torch.inverse(sq(h) + 3 * torch.eye(2)).flatten(1))
@case
def solve():
    return M(lambda s, h: torch.linalg.solve(sq(h) + 3 * torch.eye(2), h.view(-1, 4, 2)[:, :2]).flatten(1))
@case
def cholesky():
    return M(lambda s, h: torch.linalg.cholesky(sq(h) @ sq(h).transpose(1, 2) + torch.eye(2)).flatten(1))
@case
def trace_diag():
    return M(lambda s, h: torch.stack([torch.trace(a) for a in sq(h)]).unsqueeze(-1) + torch.diagonal(sq(h), dim1=1, dim2=2).sum(-1, keepdim=True))
@case
def diagonal():
    return M(lambda s, h: torch.diagonal(sq(h), dim1=-2, dim2=-1))
@case
def einsum_diag():
    return M(lambda s, h: torch.einsum("bii->bi", sq(h)))
@case
def diag_embed():
    return M(lambda s, h: torch.diag_embed(h[:, :3]).flatten(1))
@case
def kron_outer():
    return M(lambda s, h: torch.einsum("bi,bj->bij", h[:, :3], h[:, 3:6]).flatten(1) + torch.outer(h[0, :9], h[0, :1]).sum())
@case
def cross():
    return M(lambda s, h: torch.cross(h[:, :3], h[:, 3:6], dim=-1))
@case
def cdist():
    return M(lambda s, h: torch.cdist(h.view(-1, 4, 2), h.view(-1, 4, 2) * 2 + 1).flatten(1))
@case
def pairwise_distance():
    return M(lambda s, h: F.pairwise_distance(h[:, :4], h[:, 4:]).unsqueeze(-1))
@case
def bilinear():
    m = M(lambda s, h: s.b(h[:, :4], h[:, 4:])); m.b = torch.nn.Bilinear(4, 4, 3); return m
@case
def baddbmm_addcmul():
    return M(lambda s, h: torch.baddbmm(sq(h), sq(h), sq(h), beta=0.5, alpha=2).flatten(1) + torch.addcmul(h[:, :4], h[:, 4:], h[:, :4], value=0.3) .sum(-1, keepdim=True))
@case
def addcdiv_lerp():
    return M(lambda s, h: torch.addcdiv(h, h, h.abs() + 1, value=0.5) + torch.lerp(h, h * h, 0.3))
@case
def fmod_remainder_frac():
    return M(lambda s, h: torch.fmod(h * 3, 1.5) + torch.remainder(h * 3, 1.5) + torch.frac(h * 3))
@case
def atan2_logaddexp():
    return M(lambda s, h: torch.atan2(h[:, :4], h[:, 4:] + 0.1) + torch.logaddexp(h[:, :4], h[:, 4:]))
@case
def sinc_xlogy():
    return M(lambda s, h: torch.sinc(h) + torch.special.xlogy(h.abs(), h.abs() + 1) + torch.special.entr(h.sigmoid()))
@case
def i0_ndtri():
    return M(lambda s, h: torch.special.i0(h) + torch.special.ndtri(h.sigmoid() * 0.98 + 0.01))
@case
def polygamma():
    return M(lambda s, h: torch.polygamma(1, h.abs() + 0.5))
@case
def focal_loss():
    import torchvision
    return M(lambda s, h: torchvision.ops.sigmoid_focal_loss(h, (h.detach() > 0).float(), reduction="none"))
@case
def local_response_norm():
    return M(lambda s, h: F.local_response_norm(h.view(-1, 8, 1, 1), 3).flatten(1))
@case
def group_norm_noaffine():
    return M(lambda s, h: F.group_norm(h.view(-1, 4, 2), 2))
@case
def instance_norm_stats():
    m = M(lambda s, h: s.n(h.view(-1, 2, 4))); m.n = torch.nn.InstanceNorm1d(2, affine=True, track_running_stats=True); return m
@case
def batch_norm_functional():
    return M(lambda s, h: F.batch_norm(h, None, None, training=True))
@case
def index_select():
    return M(lambda s, h: torch.index_select(h, 1, torch.tensor([0, 3, 3, 7])))
@case
def repeat_interleave():
    return M(lambda s, h: torch.repeat_interleave(h, 2, dim=1) + torch.repeat_interleave(h, torch.tensor([1, 3, 0, 2, 2, 1, 2, 5]), dim=1)[:, :16])
@case
def tile_broadcast():
    return M(lambda s, h: torch.tile(h, (1, 2)) + torch.broadcast_to(h[:, :1], (h.shape[0], 16)))
@case
def meshgrid_cartesian():
    return M(lambda s, h: h[:, :4, None] * torch.stack(torch.meshgrid(torch.arange(4.0), torch.arange(3.0), indexing="ij"))[0][None] + torch.cartesian_prod(torch.arange(2.0), torch.arange(3.0)).sum())
@case
def block_diag():
    return M(lambda s, h: h @ torch.block_diag(torch.ones(4, 4), 2 * torch.ones(4, 4)))
@case
def tensor_split_movedim():
    return M(lambda s, h: torch.movedim(torch.stack(torch.tensor_split(h, 4, dim=1), 1), 1, 2).flatten(1))
@case
def amax_aminmax():
    return M(lambda s, h: torch.amax(h.view(-1, 2, 4), dim=(1, 2)).unsqueeze(-1) + torch.aminmax(h, dim=-1).min.unsqueeze(-1))
@case
def heaviside_signbit():
    return M(lambda s, h: h * torch.heaviside(h.detach(), torch.tensor(0.5)) + h * torch.signbit(h).float())
@case
def activations():
    return M(lambda s, h: F.celu(h) + F.selu(h) + F.mish(h) + F.hardswish(h) + F.hardsigmoid(h) + F.tanhshrink(h) + F.softshrink(h) + F.hardshrink(h) + F.threshold(h, 0.1, -1.0) + F.logsigmoid(h) + F.softplus(h, beta=2, threshold=5) + F.softmin(h, -1) + F.rrelu(h, training=False))
@case
def prelu_softmax2d():
    m = M(lambda s, h: s.p(h.view(-1, 2, 2, 2)) + torch.nn.Softmax2d()(h.view(-1, 2, 2, 2))); m.p = torch.nn.PReLU(2); return m
@case
def pixel_unshuffle():
    return M(lambda s, h: F.pixel_unshuffle(h.view(-1, 2, 2, 2), 2))
@case
def interpolate_area_exact():
    return M(lambda s, h: F.interpolate(h.view(-1, 1, 2, 4), size=(1, 3), mode="area").flatten(1) + F.interpolate(h.view(-1, 1, 2, 4), size=(3, 5), mode="nearest-exact").flatten(1).sum(-1, keepdim=True))
@case
def avg_pool_divisor():
    return M(lambda s, h: F.avg_pool2d(h.view(-1, 1, 2, 4), 2, divisor_override=3))
@case
def lp_pool():
    return M(lambda s, h: F.lp_pool2d(h.view(-1, 1, 2, 4), 2, 2) + F.lp_pool1d(h.view(-1, 1, 8), 2, 4).view(-1, 1, 1, 2))
@case
def conv_reflect():
    m = M(lambda s, h: s.c(h.view(-1, 1, 8))); m.c = torch.nn.Conv1d(1, 2, 3, padding=1, padding_mode="reflect"); return m
@case
def conv_circular2d():
    m = M(lambda s, h: s.c(h.view(-1, 1, 2, 4))); m.c = torch.nn.Conv2d(1, 2, 3, padding=1, padding_mode="circular"); return m
@case
def fftshift():
    return M(lambda s, h: torch.fft.fftshift(h, dim=-1) + torch.fft.ifftshift(h, dim=-1))
@case
def fft_abs():
    return M(lambda s, h: torch.fft.rfft(h).abs())
@case
def irfft():
    return M(lambda s, h: torch.fft.irfft(torch.fft.rfft(h) * 2, n=8))
@case
def cumprod_prod():
    return M(lambda s, h: torch.cumprod(h, -1) + torch.prod(h.view(-1, 2, 4), -1).sum(-1, keepdim=True))
@case
def var_mean():
    return M(lambda s, h: torch.stack(torch.var_mean(h.view(-1, 2, 4), -1), -1).flatten(1) + torch.std_mean(h, -1)[0].unsqueeze(-1))
@case
def count_nonzero_any():
    return M(lambda s, h: h * torch.count_nonzero(h.detach() > 0, -1).unsqueeze(-1).float() + h * (h.detach() > 1).any(-1, keepdim=True).float())
@case
def nansum_isclose():
    return M(lambda s, h: torch.nansum(h.view(-1, 2, 4), -1) + torch.isclose(h, h.round()).float().sum(-1, keepdim=True))
@case
def sliding_unfold():
    return M(lambda s, h: h.unfold(1, 3, 2).flatten(1))
@case
def narrow_scatter():
    return M(lambda s, h: torch.slice_scatter(h, h[:, :2] * 3, dim=1, start=4, end=6) + torch.select_scatter(h, h[:, 0] * 2, 1, 7))
@case
def diagonal_scatter():
    return M(lambda s, h: torch.diagonal_scatter(sq(h), sq(h)[:, 0] * 5, dim1=1, dim2=2).flatten(1))
@case
def index_put_accumulate():
    def f(s, h):
        out = torch.zeros_like(h)
        return out.index_put((torch.tensor([0, 2, 2, 5]),), h[:, :4].t(), accumulate=True) if False else out.index_put((torch.arange(h.shape[0])[:, None], torch.tensor([[0, 2, 2, 5]])), h[:, :4], accumulate=True)
    return M(f)
@case
def index_fill_masked_scatter():
    return M(lambda s, h: h.index_fill(1, torch.tensor([1, 3]), 0.5) + h.masked_scatter(h.detach() > 0, h * 2))
@case
def triu_indices():
    return M(lambda s, h: sq(h)[:, torch.triu_indices(2, 2)[0], torch.triu_indices(2, 2)[1]])
@case
def unique_consecutive():
    return M(lambda s, h: h * torch.unique(torch.tensor([1, 2, 2, 3])).float().sum())
@case
def gumbel_softmax():
    return M(lambda s, h: F.gumbel_softmax(h, tau=0.5, hard=True))
@case
def multinomial():
    return M(lambda s, h: h * torch.multinomial(h.softmax(-1), 1).float())
@case
def cosine_embedding_loss():
    return M(lambda s, h: F.cosine_embedding_loss(h[:, :4], h[:, 4:], torch.ones(h.shape[0]), reduction="none").unsqueeze(-1))
@case
def triplet_loss():
    return M(lambda s, h: F.triplet_margin_loss(h[:, :3], h[:, 3:6], h[:, 5:], reduction="none").unsqueeze(-1))
@case
def margin_ranking():
    return M(lambda s, h: F.margin_ranking_loss(h[:, 0], h[:, 1], torch.ones(h.shape[0]), reduction="none").unsqueeze(-1) + F.multi_margin_loss(h, torch.zeros(h.shape[0], dtype=torch.long), reduction="none").unsqueeze(-1))
@case
def gaussian_nll():
    return M(lambda s, h: F.gaussian_nll_loss(h[:, :4], h[:, 4:].detach(), h[:, 4:].exp(), reduction="none") + F.poisson_nll_loss(h[:, :4], h[:, 4:].abs(), reduction="none"))
@case
def kl_div():
    return M(lambda s, h: F.kl_div(h.log_softmax(-1), h.detach().softmax(-1), reduction="none") + F.huber_loss(h, h.detach() * 2, reduction="none", delta=0.5))
@case
def multilabel_soft_margin():
    return M(lambda s, h: F.multilabel_soft_margin_loss(h, (h.detach() > 0).float(), reduction="none").unsqueeze(-1) + F.hinge_embedding_loss(h, torch.ones_like(h), reduction="none"))
@case
def transformer_decoder():
    layer = torch.nn.TransformerDecoderLayer(4, 2, 8, dropout=0.0, batch_first=True)
    m = M(lambda s, h: s.d(h.view(-1, 2, 4), h.view(-1, 2, 4).flip(1), tgt_mask=torch.nn.Transformer.generate_square_subsequent_mask(2))); m.d = torch.nn.TransformerDecoder(layer, 2); return m
@case
def full_transformer():
    m = M(lambda s, h: s.t(h.view(-1, 2, 4), h.view(-1, 2, 4).flip(1))); m.t = torch.nn.Transformer(4, 2, 1, 1, 8, dropout=0.0, batch_first=True); return m
@case
def gru_rnn_cells():
    m = M(lambda s, h: s.g(h[:, :4], s.r(h[:, 4:], h[:, :3]))); m.g = torch.nn.GRUCell(4, 3); m.r = torch.nn.RNNCell(4, 3); return m
@case
def frac_only():
    return M(lambda s, h: torch.frac(h * 3) + h)
@case
def atan2_only():
    return M(lambda s, h: torch.atan2(h[:, :4], h[:, 4:]))
@case
def logaddexp_only():
    return M(lambda s, h: torch.logaddexp(h[:, :4], h[:, 4:] * 30) + torch.logaddexp2(h[:, 4:], h[:, :4]))
@case
def sinc_only():
    return M(lambda s, h: torch.sinc(h) + torch.sinc(h * torch.tensor([0.0, 1, 1, 1, 0, 1, 1, 1])))
@case
def signbit_only():
    return M(lambda s, h: h * torch.signbit(h).float())
@case
def addcdiv_only():
    return M(lambda s, h: torch.addcdiv(h, h, h.abs() + 1, value=0.5))
@case
def nansum_only():
    return M(lambda s, h: torch.nansum(torch.log(h).view(-1, 2, 4), -1) + torch.nansum(torch.log(h)))
@case
def trace_only():
    m = M(lambda s, h: torch.trace(s.w) * h + torch.trace(s.w[:, :3]) * h); m.w = torch.nn.Parameter(torch.randn(4, 5)); return m
@case
def fftshift_only():
    return M(lambda s, h: torch.fft.fftshift(h.view(-1, 2, 4), dim=-1).flatten(1) + torch.fft.ifftshift(h.view(-1, 2, 4), dim=(1, 2)).flatten(1) * 2 + torch.fft.fftshift(h[0].view(2, 4)).flatten().sum())
@case
def slice_scatter_only():
    return M(lambda s, h: torch.slice_scatter(h, h[:, :2] * 3, dim=1, start=4, end=6) + torch.slice_scatter(h, h[:, :3] * 2, dim=1, start=1, end=8, step=3) + torch.select_scatter(h, h[:, 0] * 2, 1, -1))
@case
def diagonal_scatter_only():
    return M(lambda s, h: torch.diagonal_scatter(h.view(h.shape[0], 2, 4), h[:, :2] * 5, 1, dim1=1, dim2=2).flatten(1) + torch.diagonal_scatter(h.view(h.shape[0], 2, 4), h[:, :2] * 5, 0, dim1=-1, dim2=1).flatten(1))
@case
def multi_margin_only():
    return M(lambda s, h: F.multi_margin_loss(h, (h.detach().abs() * 3).long().clamp(0, 7)[:, 0], reduction="none").unsqueeze(-1) + F.multi_margin_loss(h, (h.detach().abs() * 3).long().clamp(0, 7)[:, 1], p=2, margin=0.5, weight=torch.arange(1.0, 9.0)) + F.multi_margin_loss(h, torch.zeros(h.shape[0], dtype=torch.long), reduction="sum"))
@case
def avg_pool_divisor_only():
    return M(lambda s, h: F.avg_pool2d(h.view(-1, 1, 2, 4), 2, divisor_override=3) + F.avg_pool2d(h.view(-1, 1, 2, 4), 3, stride=1, padding=1, divisor_override=5)[:, :, :1, :2])
@case
def linalg_all():
    def f(s, h):
        a = h.view(-1, 2, 4)
        m3 = torch.stack([h[:, :3], h[:, 3:6], h[:, 5:8] * 2], 1) + torch.eye(3)  # [N, 3, 3]
        spd = m3 @ m3.transpose(1, 2) + torch.eye(3)
        L = torch.linalg.cholesky(spd)
        terms = [torch.det(m3).unsqueeze(-1), torch.linalg.slogdet(m3)[1].unsqueeze(-1), torch.slogdet(m3)[0].unsqueeze(-1),
                 torch.logdet(spd).unsqueeze(-1), torch.linalg.solve(m3, h[:, :3]), torch.linalg.solve(m3, a[:, :, :3].transpose(1, 2)).flatten(1),
                 torch.inverse(m3).flatten(1), torch.linalg.inv(spd).flatten(1), L.flatten(1), torch.linalg.cholesky(spd, upper=True).flatten(1),
                 torch.linalg.solve_triangular(L, h[:, :6].view(-1, 3, 2), upper=False).flatten(1),
                 torch.cholesky_solve(h[:, :6].view(-1, 3, 2), L).flatten(1), torch.det(s.w).reshape(1, 1).expand(h.shape[0], 1),
                 torch.linalg.slogdet(s.w)[1].reshape(1, 1).expand(h.shape[0], 1)]
        return torch.cat([t.tanh() for t in terms], 1)
    m = M(f); m.w = torch.nn.Parameter(torch.eye(5) + 0.3 * torch.randn(5, 5)); return m
@case
def glow_logdet():
    m = M(lambda s, h: (h @ s.w) + torch.slogdet(s.w)[1]); m.w = torch.nn.Parameter(torch.linalg.qr(torch.randn(8, 8))[0]); return m
@case
def pivot_needed():
    m = M(lambda s, h: torch.linalg.solve(s.w, h.t()).t() + torch.det(s.w)); m.w = torch.nn.Parameter(torch.tensor([[0.0, 1, 0, 0, 0, 0, 0, 0], [1.0, 0, 0, 0, 0, 0, 0, 0]] + [[0.0] * i + [2.0] + [0.0] * (7 - i) for i in range(2, 8)]) + 0.01 * torch.randn(8, 8)); return m
@case
def index_fill_only():
    return M(lambda s, h: h.index_fill(1, torch.tensor([1, 3]), 0.5) + h.view(h.shape[0], 2, 4).index_fill(2, torch.tensor([0]), -1.0).flatten(1))
@case
def index_copy_only():
    return M(lambda s, h: h.index_copy(1, torch.tensor([1, 3]), h[:, 4:6] * 2))
@case
def masked_scatter_only():
    return M(lambda s, h: h.masked_scatter(h.detach() > 0, h * 2))
@case
def index_add_const():
    return M(lambda s, h: h.index_add(1, torch.tensor([1, 3, 1]), h[:, :3] * 2))
@case
def put_along():
    return M(lambda s, h: h.scatter(1, torch.tensor([[1, 3]]).expand(h.shape[0], 2), h[:, :2] * 3))
@case
def bn_no_stats():
    m = M(lambda s, h: s.bn(h.view(h.shape[0], 2, 4)).flatten(1) + s.bn2(h)); m.bn = torch.nn.BatchNorm1d(2, track_running_stats=False); m.bn2 = torch.nn.BatchNorm1d(8, affine=False, track_running_stats=False); return m
@case
def in_stats():
    m = M(lambda s, h: s.n(h.view(h.shape[0], 2, 4)).flatten(1)); m.n = torch.nn.InstanceNorm1d(2, affine=True); return m
@case
def fold_only():
    return M(lambda s, h: F.fold(h.repeat(1, 2).view(h.shape[0], 4, 4), output_size=(3, 3), kernel_size=2).flatten(1) + F.fold(h.repeat(1, 5)[:, :36].reshape(h.shape[0], 4, 9), output_size=(4, 5), kernel_size=2, stride=2, padding=1, dilation=1).flatten(1).sum(-1, keepdim=True) + F.fold(h.repeat(1, 3).view(h.shape[0], 4, 6), output_size=(5, 4), kernel_size=(2, 2), dilation=(2, 1), stride=(1, 2)).flatten(1).sum(-1, keepdim=True))
only = sys.argv[1:]
for name, f in cases.items():
    if only and name not in only: continue
    torch.manual_seed(0)
    try:
        m = f(); x = torch.randn(B, 8)
        with torch.no_grad(): m(x)
        problem, seen = train_both(m, {"x": x}, torch.randn(B, 4), "mse")
        print(name, "OK" if problem is None else "FAIL " + problem[:200], "|", seen[:100], flush=True)
    except Exception as e:
        msg = str(e).strip().splitlines()
        print(name, "ERROR", type(e).__name__, " / ".join(msg[:2])[:300], flush=True)

"""Models written the way people write them, whose ops go through remat's
pointwise family and reductions (Pointwise, Reduce): a Llama-style decoder
(RMSNorm, rotary embeddings, SwiGLU), a CNN with squeeze-and-excitation and
layer scale, a MobileNetV3-style block stack (hardswish, hardsigmoid) and an
MLP through the rest of the family. Each builder returns (module,
example_input, loss_fn, labels): a cross-entropy over the labels (left out
of PyTorch's count, as parameters are); no dropout (remat's masks are its
own); no bias before a batch norm (its gradient is zero but for rounding)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d) + 0.1 * torch.randn(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class LlamaBlock(nn.Module):
    def __init__(self, d, heads, seq, norm=RMSNorm):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.attn_norm = norm(d)
        self.wq = nn.Linear(d, d, bias=False)
        self.wk = nn.Linear(d, d, bias=False)
        self.wv = nn.Linear(d, d, bias=False)
        self.wo = nn.Linear(d, d, bias=False)
        self.mlp_norm = norm(d)
        self.w1 = nn.Linear(d, 2 * d, bias=False)
        self.w3 = nn.Linear(d, 2 * d, bias=False)
        self.w2 = nn.Linear(2 * d, d, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd))
        freqs = torch.outer(torch.arange(seq).float(), inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos())
        self.register_buffer("sin", emb.sin())
        self.register_buffer("mask", torch.full((seq, seq), float("-inf")).triu(1))

    def forward(self, x):
        B, T, C = x.shape
        h = self.attn_norm(x)
        q = self.wq(h).view(B, T, self.heads, self.hd).transpose(1, 2)
        k = self.wk(h).view(B, T, self.heads, self.hd).transpose(1, 2)
        v = self.wv(h).view(B, T, self.heads, self.hd).transpose(1, 2)
        q = q * self.cos + rotate_half(q) * self.sin
        k = k * self.cos + rotate_half(k) * self.sin
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd) + self.mask
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.wo(y)
        h = self.mlp_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Llama(nn.Module):
    """norm(d) makes each RMSNorm: the one written out above, or torch 2.4+'s
    nn.RMSNorm (tests/python/test_capture_rmsnorm.py)."""

    def __init__(self, vocab=64, d=32, heads=4, seq=8, layers=2, norm=RMSNorm):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([LlamaBlock(d, heads, seq, norm) for _ in range(layers)])
        self.norm = norm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.tok(ids)
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x))


def llama():
    torch.manual_seed(0)
    net = Llama()
    ids = torch.randint(0, 64, (2, 8))
    labels = torch.randint(0, 64, (16,))
    return net, ids, (lambda out: F.cross_entropy(out.reshape(-1, out.shape[-1]), labels)), labels


class SqueezeExcite(nn.Module):
    def __init__(self, c, r=4, gate=nn.Sigmoid):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(c, c // r, 1)
        self.fc2 = nn.Conv2d(c // r, c, 1)
        self.gate = gate()

    def forward(self, x):
        return x * self.gate(self.fc2(F.relu(self.fc1(self.pool(x)))))


class ScaledBlock(nn.Module):
    """conv, batch norm, SE, layer scale (a learned per-channel gamma), residual."""

    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c)
        self.se = SqueezeExcite(c)
        self.gamma = nn.Parameter(0.1 + 0.05 * torch.randn(c, 1, 1))

    def forward(self, x):
        return x + self.gamma * self.se(F.relu(self.bn(self.conv(x))))


def se_layerscale():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), ScaledBlock(16), ScaledBlock(16), nn.AdaptiveAvgPool2d(1),
                        nn.Flatten(), nn.Linear(16, 10))
    x = torch.randn(2, 3, 8, 8)
    labels = torch.randint(0, 10, (2,))
    return net, x, (lambda out: F.cross_entropy(out, labels)), labels


class InvertedResidual(nn.Module):
    """MobileNetV3's bneck: expand 1x1, depthwise 3x3, SE with hardsigmoid, project 1x1; hardswish."""

    def __init__(self, c, e):
        super().__init__()
        self.expand = nn.Sequential(nn.Conv2d(c, e, 1, bias=False), nn.BatchNorm2d(e), nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(e, e, 3, padding=1, groups=e, bias=False), nn.BatchNorm2d(e), nn.Hardswish())
        self.se = SqueezeExcite(e, gate=nn.Hardsigmoid)
        self.project = nn.Sequential(nn.Conv2d(e, c, 1, bias=False), nn.BatchNorm2d(c))

    def forward(self, x):
        return x + self.project(self.se(self.dw(self.expand(x))))


def mobilenetv3():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(8), nn.Hardswish(),
                        InvertedResidual(8, 16), InvertedResidual(8, 24), nn.Conv2d(8, 32, 1), nn.Hardswish(),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    x = torch.randn(2, 3, 16, 16)
    labels = torch.randint(0, 10, (2,))
    return net, x, (lambda out: F.cross_entropy(out, labels)), labels


class FamilyMLP(nn.Module):
    """The rest of the family in one network: every unary function, products,
    quotients, maximum/minimum, pow by a constant and by a tensor, where with a
    constant mask, a learned bias added by broadcast, sum/mean/amax."""

    def __init__(self, d=16):
        super().__init__()
        self.fc1 = nn.Linear(d, d)
        self.fc2 = nn.Linear(d, d)
        self.fc3 = nn.Linear(d, d)
        self.bias = nn.Parameter(0.1 * torch.randn(d))
        self.register_buffer("keep", (torch.arange(d) % 3 != 0).float().view(1, d) > 0)
        self.out = nn.Linear(d, 10)

    def forward(self, x):
        a = self.fc1(x)
        b = self.fc2(x)
        c = torch.sigmoid(self.fc3(x)) + 0.5  # positive: log, sqrt, pow's base
        u = F.leaky_relu(a, 0.2) + F.elu(b, 0.7) + F.softplus(a) + F.mish(b) + torch.clamp(a, -0.5, 0.8)
        u = u + torch.sin(a) * torch.cos(b) - torch.erf(a) + torch.abs(b) + torch.exp(-a.pow(2))
        u = u + torch.log(c) + torch.sqrt(c) + torch.reciprocal(c) - torch.pow(c, b) + (-a)
        u = torch.maximum(u, a) + torch.minimum(u, b) + a / c + self.bias
        u = torch.where(self.keep, u, b) + F.hardtanh(a, 0.0, 6.0)
        s = u.sum(-1, keepdim=True) / 16 + u.amax(-1, keepdim=True) - u.mean(0)
        return self.out(u * torch.rsqrt(s.pow(2) + 1.0))


def family_mlp():
    torch.manual_seed(0)
    net = FamilyMLP()
    x = torch.randn(4, 16)
    labels = torch.randint(0, 10, (4,))
    return net, x, (lambda out: F.cross_entropy(out, labels)), labels


MODELS = {"llama": llama, "se_layerscale": se_layerscale, "mobilenetv3": mobilenetv3, "family_mlp": family_mlp}

"""The models test_apply.py puts remat's plans on: an MLP, a ResNet, a GPT
block and a Llama-style block (RMSNorm, rotary embeddings and a SwiGLU MLP
written in plain torch ops, as model code often does). No dropout: the bytes
are compared exactly and remat keeps a kept Dropout's noise, which PyTorch's
checkpoint regenerates instead. Each builder returns (module, make_input,
loss_fn); make_input() draws the same batch every time (seeded). `device`:
where the module, the batch and the target live (capture needs the CPU)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def _seeded(shape, device):
    def make():
        return torch.randn(shape, generator=torch.Generator().manual_seed(1)).to(device)
    return make


class ResidualMlp(nn.Module):
    """x + body(x), the body a Sequential: Linear, GELU, Linear, Tanh."""

    def __init__(self, d, hidden):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d, hidden), nn.GELU(), nn.Linear(hidden, d), nn.Tanh())

    def forward(self, x):
        return x + self.body(x)


def mlp(device="cpu"):
    """Linear 64 -> 128, four residual MLP blocks (128 -> 256 -> 128), Linear 128 -> 32; batch 8, MSE."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(64, 128), *[ResidualMlp(128, 256) for _ in range(4)], nn.Linear(128, 32))
    target = torch.randn(8, 32).to(device)
    return net.to(device), _seeded((8, 64), device), (lambda out: F.mse_loss(out, target))


class Residual(nn.Module):
    """relu(body(x) + x), the body a Sequential: conv, batch norm, ReLU, conv, batch norm."""

    def __init__(self, c):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(),
                                  nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c))
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.body(x) + x)


def resnet(device="cpu"):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                        Residual(16), Residual(16), Residual(16), Residual(16),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    labels = torch.randint(0, 10, (4,), generator=torch.Generator().manual_seed(2)).to(device)
    return net.to(device), _seeded((4, 3, 16, 16), device), (lambda out: F.cross_entropy(out, labels))


class Attention(nn.Module):
    def __init__(self, d, heads, seq):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.heads, self.d = heads, d
        self.register_buffer("mask", torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(self.d, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.heads))
        att = F.softmax(att.masked_fill(self.mask[:T, :T], float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


class GptBlock(nn.Module):
    def __init__(self, d=64, heads=4, seq=32):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads, seq)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


def gpt_block(device="cpu"):
    torch.manual_seed(0)
    net = nn.Sequential(GptBlock(), GptBlock())
    target = torch.randn(2, 32, 64).to(device)
    return net.to(device), _seeded((2, 32, 64), device), (lambda out: F.mse_loss(out, target))


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, d, heads, seq):
        super().__init__()
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, d, bias=False)
        self.v_proj = nn.Linear(d, d, bias=False)
        self.o_proj = nn.Linear(d, d, bias=False)
        self.heads, self.hd = heads, d // heads
        inv = 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd))
        freqs = torch.outer(torch.arange(seq).float(), inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos())
        self.register_buffer("sin", emb.sin())
        self.register_buffer("mask", torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (p(x).view(B, T, self.heads, self.hd).transpose(1, 2) for p in (self.q_proj, self.k_proj,
                                                                                   self.v_proj))
        cos, sin = self.cos[:T], self.sin[:T]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd)
        att = F.softmax(att.masked_fill(self.mask[:T, :T], float("-inf")), dim=-1)
        return self.o_proj((att @ v).transpose(1, 2).reshape(B, T, C))


class SwiGLU(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.gate_proj = nn.Linear(d, hidden, bias=False)
        self.up_proj = nn.Linear(d, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaBlock(nn.Module):
    def __init__(self, d=64, heads=4, seq=32):
        super().__init__()
        self.input_norm = RMSNorm(d)
        self.attn = LlamaAttention(d, heads, seq)
        self.post_norm = RMSNorm(d)
        self.mlp = SwiGLU(d, 3 * d)

    def forward(self, x):
        x = x + self.attn(self.input_norm(x))
        return x + self.mlp(self.post_norm(x))


def llama_block(device="cpu"):
    torch.manual_seed(0)
    net = nn.Sequential(LlamaBlock(), LlamaBlock())
    target = torch.randn(2, 32, 64).to(device)
    return net.to(device), _seeded((2, 32, 64), device), (lambda out: F.mse_loss(out, target))


MODELS = {"mlp": mlp, "resnet": resnet, "gpt_block": gpt_block, "llama_block": llama_block}

# Per model: the strategies whose plans test_apply.py (and gpu/torch_apply.py)
# try, in order: the checkpoint-set strategies (sqrt, every-k, manual,
# selective, auto, optimal, blocks, attention-core) and one nested one. The
# manual sets checkpoint the blocks' inputs and outputs (op ids of the
# captures: mlp's blocks end at 6, 11, 16, 21; resnet's at 10, 17, 24, 31, its
# stem at 3); optimal's budgets lie between each model's smallest and largest
# peaks (on the ResNet optimal's schedule is nested: refused). On the GPT and
# Llama blocks each budget is one where optimal's answer is a checkpoint set
# under both captures (PyTorch 1.13's and 2.6's), whatever the load: the GPT
# block's 550,000 B, where the branch and bound starts from the block DP's
# set (212,992 recompute FLOPs) and the only general schedule, the residency
# bound's, recomputes 761,856 (at 450,000 and 500,000 it recomputes less than
# any set found: nested); the Llama block's 800,000 B, where the residency
# bound proves its schedule least over all schedules in 0.1 s and it is a
# checkpoint set (18 ops recomputed under 1.13, 10 under 2.6; at 500,000 2.6's
# capture gets a nested one). `remat simulate --json` lists the solvers.
STRATEGIES = {
    "mlp": ["store-all", "sqrt", "every-k:5", "manual:1,6,11,16,21", "manual:1,11,21", "selective", "auto",
            "optimal:60000:60", "blocks", "attention-core", "recompute-all"],
    "resnet": ["store-all", "sqrt", "every-k:7", "manual:3,10,17,24,31", "manual:3,17,31", "selective", "auto",
               "optimal:800000:60", "blocks", "attention-core"],
    "gpt_block": ["store-all", "sqrt", "every-k:16", "selective", "auto", "optimal:550000:60", "blocks",
                  "attention-core"],
    "llama_block": ["store-all", "sqrt", "every-k:20", "selective", "auto", "optimal:800000:60", "blocks",
                    "attention-core"],
}


def build():
    """For `python3 -m remat_capture apply apply_models.py:build plan.json`: the MLP."""
    net, make, loss_fn = mlp()
    return net, make(), loss_fn


class InPlaceResidual(nn.Module):
    """torchvision's BasicBlock, in little: out = body(x); out += x; relu in place."""

    def __init__(self, d, hidden):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, d))
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        out = self.body(x)
        out += x
        return self.relu(out)


def inplace_mlp(device="cpu"):
    """Linear 32 -> 64, four in-place residual blocks (64 -> 128 -> 64), Linear 64 -> 8; batch 8, MSE."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(32, 64), *[InPlaceResidual(64, 128) for _ in range(4)], nn.Linear(64, 8))
    target = torch.randn(8, 8).to(device)
    return net.to(device), _seeded((8, 32), device), (lambda out: F.mse_loss(out, target))

"""The models the capture tests use: an MLP, torchvision's ResNet-18 and a
GPT-2-style block with causal attention (nanoGPT's, with nn.Dropout as users
write it); with PyTorch 2.x also an attention block through
F.scaled_dot_product_attention (sdpa_block, not in MODELS: checked apart). Each builder returns (module, example_input, loss_fn, target);
target is what loss_fn compares against (None: labels drawn inside), left out
of PyTorch's count like parameters and buffers."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def mlp():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, 128), nn.Tanh(),
                        nn.Linear(128, 32))
    x = torch.randn(8, 64)
    target = torch.randn(8, 32)
    return net, x, (lambda out: F.mse_loss(out, target)), target


def resnet18():
    import torchvision
    torch.manual_seed(0)
    net = torchvision.models.resnet18(num_classes=10)
    x = torch.randn(4, 3, 32, 32)
    labels = torch.randint(0, 10, (4,))
    return net, x, (lambda out: F.cross_entropy(out, labels)), labels


class CausalSelfAttention(nn.Module):
    def __init__(self, d, heads, seq):
        super().__init__()
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.attn_dropout = nn.Dropout(0.1)
        self.resid_dropout = nn.Dropout(0.1)
        self.heads, self.d = heads, d
        self.register_buffer("bias", torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.d, dim=2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class Block(nn.Module):
    def __init__(self, d=64, heads=4, seq=32):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads, seq)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(0.1))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class TinyGpt(nn.Module):
    """Token and position embeddings, one Block, the vocabulary projection."""

    def __init__(self, vocab=96, d=64, heads=4, seq=32):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq, d)
        self.block = Block(d, heads, seq)
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        pos = torch.arange(0, idx.size(1), dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        return self.lm_head(self.ln_f(self.block(x)))


def gpt_block():
    torch.manual_seed(0)
    net = TinyGpt()
    idx = torch.randint(0, 96, (2, 32))
    labels = torch.randint(0, 96, (2 * 32,))
    return net, idx, (lambda out: F.cross_entropy(out.view(-1, out.size(-1)), labels)), labels


class SdpaAttention(nn.Module):
    """Multi-head self-attention through F.scaled_dot_product_attention
    (PyTorch 2.x; on the CPU its fused kernel when there is no mask and no
    dropout): q, k, v split from one Linear, the heads' output projected."""

    def __init__(self, d=32, heads=4, is_causal=True, scale=None, mask=None):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.d, self.heads, self.is_causal, self.scale = d, heads, is_causal, scale
        self.register_buffer("mask", mask)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2)
                   for t in self.qkv(x).split(self.d, dim=2))
        extra = {} if self.scale is None else {"scale": self.scale}
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask, is_causal=self.is_causal, **extra)
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


def sdpa_block(**kw):
    """SdpaAttention on 2 x 16 tokens of width 32 (4 heads of 8), MSE loss.
    Only for PyTorch with F.scaled_dot_product_attention (test_capture checks)."""
    torch.manual_seed(0)
    net = SdpaAttention(**kw)
    x = torch.randn(2, 16, 32)
    target = torch.randn(2, 16, 32)
    return net, x, (lambda out: F.mse_loss(out, target)), target


MODELS = {"mlp": mlp, "resnet18": resnet18, "gpt_block": gpt_block}


def build():
    """For `python3 -m remat_capture capture_models.py:build`: the MLP, its input and loss."""
    net, x, loss_fn, _ = mlp()
    return net, x, loss_fn

"""nanoGPT with three blocks (tests/python/capture_models.py's Block: a fused
c_attn split into q, k, v, a causal mask buffer, dropout, a GELU MLP), d = 64,
4 heads, 32 tokens of a 96-word vocabulary, batch 2: captured into
nanogpt3-captured.json by
  PYTHONPATH=python /usr/bin/python3 -m remat_capture tests/parallel/models/nanogpt3.py:build -o tests/parallel/models/nanogpt3-captured.json
(PyTorch 1.13), for tests/parallel/test_tensor_split.cpp."""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from capture_models import Block  # noqa: E402


class Gpt(nn.Module):
    def __init__(self, layers=3, vocab=96, d=64, heads=4, seq=32):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq, d)
        self.drop = nn.Dropout(0.1)
        self.h = nn.ModuleList([Block(d, heads, seq) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        pos = torch.arange(0, idx.size(1), dtype=torch.long)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for b in self.h:
            x = b(x)
        return self.lm_head(self.ln_f(x))


def build():
    torch.manual_seed(0)
    net = Gpt()
    idx = torch.randint(0, 96, (2, 32))
    labels = torch.randint(0, 96, (2 * 32,))
    return net, idx, (lambda out: F.cross_entropy(out.view(-1, out.size(-1)), labels))

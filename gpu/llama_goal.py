"""The Llama-style decoder of issue 33's goal table (gpu/torch_goals.py): the
one tests/python/family_models.py defines (RMSNorm, rotary embeddings, causal
attention written out, SwiGLU MLP, untied head), at the size in
$REMAT_LLAMA_GOAL = LAYERS:D:HEADS:SEQ:BATCH:VOCAB (default below).

build() is what remat_capture takes, the step under CPU autocast (bf16):

    REMAT_LLAMA_GOAL=8:1024:16:1024:4:32000 PYTHONPATH=python python3 \\
        -m remat_capture gpu/llama_goal.py:build -o llama.json

For this model CPU and CUDA autocast give every op the same dtype: the
residual stream is f32 (the embedding's f32 rows plus bf16 branches), so the
ops whose lists differ (RMSNorm's pow, mean and rsqrt, softmax of the masked
scores) read f32 on both devices (docs/memory-model.md#mixed-precision-autocast).
module() gives the plain module and its data for PyTorch's side on any device."""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
import family_models  # noqa: E402

# 8 blocks of width 1024 (16 heads of 64, a SwiGLU of 2048), 1024 tokens, batch 4,
# a 32,000-token vocabulary: 84M parameters in the blocks, 65M in the embedding
# and the head; 3.3 TFLOP a training step (remat simulate: 0.3 a block, 0.8 the
# head), a store-all peak of about 7.5 GiB (2.23 GiB at 2 blocks). Its capture
# took 72 s and 6 GB at 2 blocks on the 2-core development machine.
DEFAULT = "8:1024:16:1024:4:32000"


def size():
    text = os.environ.get("REMAT_LLAMA_GOAL", DEFAULT)
    try:
        layers, d, heads, seq, batch, vocab = (int(x) for x in text.split(":"))
    except ValueError:
        raise SystemExit(f"REMAT_LLAMA_GOAL='{text}': expected LAYERS:D:HEADS:SEQ:BATCH:VOCAB (integers)")
    return layers, d, heads, seq, batch, vocab


def name():
    return "llama:" + ":".join(map(str, size()))


def module(device="cpu"):
    """(net, ids, labels) on device; seeded, so both sides start the same."""
    layers, d, heads, seq, batch, vocab = size()
    torch.manual_seed(0)
    net = family_models.Llama(vocab, d, heads, seq, layers)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (batch, seq), generator=g)
    labels = torch.randint(0, vocab, (batch * seq,), generator=g)
    return net.to(device), ids.to(device), labels.to(device)


def loss(out, labels):
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), labels)


class CpuAutocast(nn.Module):
    """The decoder's forward under torch.autocast("cpu", bfloat16), so that a
    capture records autocast's dtypes and casts."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, ids):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return self.net(ids)


def build():
    net, ids, labels = module()

    def loss_fn(out):  # under autocast too: cross-entropy then runs in f32, as on the GPU
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return loss(out, labels)

    return CpuAutocast(net), ids, loss_fn

"""Small modules whose training step PyTorch 2.x records with ops 1.13 never
emits, for test_capture_torch2.py:

- attention on PyTorch's math path, which calls aten._safe_softmax (2.5+):
  F.scaled_dot_product_attention forced onto it (SDPBackend.MATH) without a
  mask, causal, and with a float mask that leaves every row an element, and
  one whose mask blanks a whole row (which must stay Generic: there
  _safe_softmax gives zeros and a plain softmax NaN);
- nn.LSTM, which 2.x runs on the CPU as one aten.mkldnn_rnn_layer per layer
  (oneDNN's fused LSTM) where 1.13 ran the cell's ops: two layers batch
  first, one layer without biases, time first, and one whose initial h and
  c the model computes from its input.

Each builder returns (name, module, example_input, loss_fn, labels); the
loss is cross-entropy, so the test can run the module itself on remat's
dumped weights."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MathAttention(nn.Module):
    """x (B, T, D) -> qkv projection, 2 heads, attention on the math path,
    heads merged, a classifier over the mean token."""

    def __init__(self, d=16, heads=2, classes=5, causal=False, mask=None):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.head = nn.Linear(d, classes)
        self.register_buffer("mask", mask)

    def forward(self, x):
        from torch.nn.attention import SDPBackend, sdpa_kernel
        b, t, d = x.shape
        q, k, v = self.qkv(x).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        with sdpa_kernel(SDPBackend.MATH):
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask, is_causal=self.causal)
        y = self.proj(y.transpose(1, 2).reshape(b, t, d))
        return self.head(y.mean(1))


def _labels(n, classes, seed=1):
    return torch.randint(0, classes, (n,), generator=torch.Generator().manual_seed(seed))


def attention(variant):
    torch.manual_seed(0)
    t = 6
    mask = None
    if variant in ("float_mask", "blank_row"):
        mask = torch.zeros(t, t)
        mask[:, 4:] = float("-inf")  # every row keeps columns 0..3
        mask[1, 0] = -2.0
        if variant == "blank_row":
            mask[2, :] = float("-inf")  # row 2 has nothing left: _safe_softmax gives zeros there
    net = MathAttention(causal=variant == "causal", mask=mask)
    x = torch.randn(2, t, 16)
    labels = _labels(2, 5)
    return f"attention_{variant}", net, x, (lambda out: F.cross_entropy(out, labels)), labels


class LSTMHead(nn.Module):
    def __init__(self, inputs, hidden, layers, bias=True, batch_first=True, classes=5):
        super().__init__()
        self.batch_first = batch_first
        self.lstm = nn.LSTM(inputs, hidden, num_layers=layers, bias=bias, batch_first=batch_first)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        y = self.lstm(x)[0]
        return self.head(y[:, -1] if self.batch_first else y[-1])


def lstm_two_layers():
    torch.manual_seed(0)
    net, x = LSTMHead(16, 32, 2), torch.randn(2, 6, 16)
    labels = _labels(2, 5)
    return "lstm_two_layers", net, x, (lambda out: F.cross_entropy(out, labels)), labels


def lstm_no_bias():
    torch.manual_seed(0)
    net, x = LSTMHead(8, 12, 1, bias=False, batch_first=False), torch.randn(5, 3, 8)  # (T, N, I)
    labels = _labels(3, 5)
    return "lstm_no_bias", net, x, (lambda out: F.cross_entropy(out, labels)), labels


class StateLSTM(nn.Module):
    """An LSTM whose initial h and c are computed from the input (activations,
    which the first step's Linear and f·c0 keep)."""

    def __init__(self, inputs=6, hidden=10, classes=5):
        super().__init__()
        self.init = nn.Linear(inputs, 2 * hidden)
        self.lstm = nn.LSTM(inputs, hidden, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        h0, c0 = torch.tanh(self.init(x[:, 0])).chunk(2, dim=-1)
        y = self.lstm(x, (h0.unsqueeze(0).contiguous(), c0.unsqueeze(0).contiguous()))[0]
        return self.head(y[:, -1])


def lstm_given_state():
    torch.manual_seed(0)
    net, x = StateLSTM(), torch.randn(3, 4, 6)
    labels = _labels(3, 5)
    return "lstm_given_state", net, x, (lambda out: F.cross_entropy(out, labels)), labels


MODELS = [lambda: attention("plain"), lambda: attention("causal"), lambda: attention("float_mask"),
          lambda: attention("blank_row"), lstm_two_layers, lstm_no_bias, lstm_given_state]

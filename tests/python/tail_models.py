"""The tail models of issue 28, for test_capture_tail.py (captured) and
tests/exec/onnx_zoo_crosscheck.py (exported to ONNX): a U-Net with transposed
convolutions, nearest and bilinear upsampling and skip connections, a
GroupNorm network, a ViT front with a class token, torchvision's
mobilenet_v3_small (in-place hardswish and ReLU), and MobileNetV2 features
with a cosine classifier (ONNX only)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class UNet(nn.Module):
    """Two levels: conv blocks, max pooling down, a transposed convolution and
    a nearest upsample back up, skips concatenated, a bilinear upsample at the end."""

    def __init__(self):
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())  # no bias before a batch norm (its gradient is 0)
        self.enc2 = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.ReLU())
        self.bottom = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
        self.up2 = nn.ConvTranspose2d(16, 16, 2, stride=2)
        self.dec2 = nn.Sequential(nn.Conv2d(32, 8, 3, padding=1), nn.ReLU())
        self.dec1 = nn.Sequential(nn.Conv2d(16, 8, 3, padding=1), nn.ReLU())
        self.head = nn.Conv2d(8, 2, 1)

    def forward(self, x):
        e1 = self.enc1(x)                       # (N, 8, 16, 16)
        e2 = self.enc2(F.max_pool2d(e1, 2))     # (N, 16, 8, 8)
        b = self.bottom(F.max_pool2d(e2, 2))    # (N, 16, 4, 4)
        d2 = self.dec2(torch.cat([self.up2(b), e2], 1))                            # (N, 8, 8, 8)
        d1 = self.dec1(torch.cat([F.interpolate(d2, scale_factor=2.0, mode="nearest"), e1], 1))  # (N, 8, 16, 16)
        y = F.interpolate(self.head(d1), size=(24, 20), mode="bilinear", align_corners=False)
        return y


class GroupNormNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.n1 = nn.Conv2d(3, 16, 3, padding=1), nn.GroupNorm(4, 16)
        self.c2, self.n2 = nn.Conv2d(16, 16, 3, padding=1), nn.GroupNorm(8, 16, eps=1e-3)
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        x = F.silu(self.n1(self.c1(x)))
        x = F.relu(self.n2(self.c2(x)))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class ClassToken(nn.Module):
    def __init__(self, d=12, classes=4):
        super().__init__()
        self.embed = nn.Linear(6, d)
        self.cls = nn.Parameter(0.02 * torch.randn(1, 1, d))
        self.pos = nn.Parameter(0.02 * torch.randn(1, 6, d))
        self.norm = nn.LayerNorm(d, eps=1e-6)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        x = self.embed(x)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(F.gelu(self.norm(x))[:, 0].contiguous())  # the kernels read a Linear's input dense


class PlainNorms(nn.Module):
    """The three norms without affine parameters, each with an epsilon of
    its own: BatchNorm(affine=False), GroupNorm(affine=False),
    LayerNorm(elementwise_affine=False)."""

    def __init__(self):
        super().__init__()
        # No bias before the batch norm (as torchvision): its gradient would be 0
        # exactly, float32 noise that no tolerance relative to it can hold.
        self.c1, self.bn = nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8, affine=False, eps=1e-3)
        self.c2, self.gn = nn.Conv2d(8, 8, 3, padding=1), nn.GroupNorm(2, 8, affine=False, eps=1e-4)
        self.ln = nn.LayerNorm(8, elementwise_affine=False, eps=1e-6)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        x = F.relu(self.bn(self.c1(x)))
        x = F.silu(self.gn(self.c2(x)))
        return self.fc(self.ln(F.adaptive_avg_pool2d(x, 1).flatten(1)))


class CosineMobileNet(nn.Module):
    """torchvision's MobileNetV2 features (ReLU6: Clip in ONNX), pooled by
    x.mean((2, 3)) (ReduceMean), and a cosine classifier: the features scaled
    to unit length by x / x.pow(2).sum(-1, keepdim=True).sqrt() (Pow,
    ReduceSum, Sqrt, a broadcast Div of two activations)."""

    def __init__(self):
        super().__init__()
        import torchvision
        self.features = torchvision.models.mobilenet_v2(num_classes=10, width_mult=0.25).features
        self.fc = nn.Linear(1280, 10)

    def forward(self, x):
        p = self.features(x).mean((2, 3))
        return self.fc(p / p.pow(2).sum(-1, keepdim=True).sqrt())


def models():
    torch.manual_seed(0)
    unet, xu = UNet(), torch.randn(2, 3, 16, 16)
    target = torch.randn(2, 2, 24, 20)
    yield "unet", unet, xu, (lambda out: F.mse_loss(out, target)), target
    gn, xg = GroupNormNet(), torch.randn(2, 3, 8, 8)
    labels = torch.randint(0, 5, (2,))
    yield "groupnorm", gn, xg, (lambda out: F.cross_entropy(out, labels)), labels
    pn, xp = PlainNorms(), torch.randn(3, 3, 6, 6)
    labels_p = torch.randint(0, 5, (3,))
    yield "plain_norms", pn, xp, (lambda out: F.cross_entropy(out, labels_p)), labels_p
    ct, xc = ClassToken(), torch.randn(3, 5, 6)
    labels_c = torch.randint(0, 4, (3,))
    yield "class_token", ct, xc, (lambda out: F.cross_entropy(out, labels_c)), labels_c
    # In-place activations: hardswish(inplace=True) saves a clone of what it
    # overwrites, ReLU(inplace=True) its result; squeeze-and-excitation multiplies two activations.
    import torchvision
    mv3, xm = torchvision.models.mobilenet_v3_small(num_classes=10), torch.randn(2, 3, 64, 64)
    labels_m = torch.randint(0, 10, (2,))
    yield "mobilenet_v3_small", mv3, xm, (lambda out: F.cross_entropy(out, labels_m)), labels_m
    # Strided views into kernels that read rows: nn.TransformerEncoder with
    # batch_first (its attention's output transposed into the dropout), and
    # tests/io's ViT (patches transposed into the Concat with the class token,
    # the class token's features x[:, 0] into the head's Linear).
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, batch_first=True)
    enc, xe = nn.TransformerEncoder(layer, 2), torch.randn(2, 8, 32)
    target_e = torch.randn(2, 8, 32)
    yield "encoder_batch_first", enc, xe, (lambda out: F.mse_loss(out, target_e)), target_e
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "io"))
    import torch_saved_bytes
    vit, xv, _ = torch_saved_bytes.vit(2)
    labels_v = torch.randint(0, 10, (2,))
    yield "vit", vit, xv, (lambda out: F.cross_entropy(out, labels_v)), labels_v




class GRUHead(nn.Module):
    """nn.GRU, then a Linear on the last step's output: 1.13 runs the cell as
    its aten ops (W_hh·h + b_hh split in three before the input's gates are
    added in place, r·(W_hn·h + b_hn) in place), and with batch_first ends
    the layers with an in-place transpose_ of the stacked outputs."""

    def __init__(self, inputs, hidden, layers, bias=True, batch_first=True):
        super().__init__()
        self.gru = nn.GRU(inputs, hidden, num_layers=layers, bias=bias, batch_first=batch_first)
        self.head = nn.Linear(hidden, 5)

    def forward(self, x):
        y = self.gru(x)[0]
        return self.head(y[:, -1] if self.gru.batch_first else y[-1])


def rnn_models():
    """The GRUs test_capture_tail.py captures (not exported by onnx_zoo_crosscheck.py)."""
    torch.manual_seed(0)
    g1, x1 = GRUHead(8, 12, 1, batch_first=False), torch.randn(5, 3, 8)  # (T, N, I)
    labels_1 = torch.randint(0, 5, (3,))
    yield "gru_seq_first", g1, x1, (lambda out: F.cross_entropy(out, labels_1)), labels_1
    g2, x2 = GRUHead(6, 10, 2, bias=False), torch.randn(3, 4, 6)
    labels_2 = torch.randint(0, 5, (3,))
    yield "gru_no_bias", g2, x2, (lambda out: F.cross_entropy(out, labels_2)), labels_2

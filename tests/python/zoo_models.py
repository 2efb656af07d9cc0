"""The twelve architectures of issue 28 and a GRU, as people write them (torchvision's or
a few lines of PyTorch), at CI sizes, for test_zoo.py: a Llama-style decoder
(RMSNorm, rotary embeddings, SwiGLU), a ViT, ConvNeXt, MobileNetV3,
EfficientNet-B0, DenseNet, a U-Net, a 2-layer LSTM, an nn.TransformerEncoder,
ShuffleNetV2, a GroupNorm network (a diffusion U-Net's residual blocks) and a
mixture-of-experts layer with top-k routing. Each builder returns (module, example_input, loss_fn,
target): the target (labels or a regression target) is left out of
PyTorch's count, as parameters are."""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "io"))


def classify(net, x, classes=10, seed=0):
    labels = torch.randint(0, classes, (x.shape[0],), generator=torch.Generator().manual_seed(seed))
    return net, x, (lambda out: F.cross_entropy(out, labels)), labels


def llama():
    import family_models
    return family_models.llama()


def vit():
    import torch_saved_bytes
    net, x, _ = torch_saved_bytes.vit(2)
    return classify(net, x)


def convnext():
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    net = ConvNeXt([CNBlockConfig(16, 32, 1), CNBlockConfig(32, None, 1)], num_classes=10)
    return classify(net, torch.randn(2, 3, 32, 32))


def mobilenet_v3():
    return classify(torchvision.models.mobilenet_v3_small(num_classes=10), torch.randn(2, 3, 64, 64))


def efficientnet_b0():
    # Batch 4: at 2 x 3x32x32 its last stages are 1x1 pixels, so each batch norm
    # there normalises 2 values per channel, and the step is not determined to
    # float32's precision: on remat's dump weights (seed 3) the loss is 2.1255
    # in float64, 2.4200 in PyTorch's own float32 (torch 1.13; 2.0941 with 2.6)
    # and 2.3101 in remat's. At batch 4 the three agree to 4e-6 (docs/pytorch.md, the zoo).
    return classify(torchvision.models.efficientnet_b0(num_classes=10), torch.randn(4, 3, 32, 32))


def densenet():
    net = torchvision.models.DenseNet(growth_rate=8, block_config=(2, 2), num_init_features=16, bn_size=2,
                                      num_classes=10)
    return classify(net, torch.randn(2, 3, 32, 32))


def unet():
    import tail_models
    net, x = tail_models.UNet(), torch.randn(2, 3, 16, 16)
    target = torch.randn(2, 2, 24, 20)
    return net, x, (lambda out: F.mse_loss(out, target)), target


class LSTMHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(16, 32, num_layers=2, batch_first=True)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        return self.head(self.lstm(x)[0][:, -1])


def lstm():
    return classify(LSTMHead(), torch.randn(2, 6, 16))


class GRUHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(16, 32, num_layers=2, batch_first=True)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        return self.head(self.gru(x)[0][:, -1])


def gru():
    return classify(GRUHead(), torch.randn(2, 6, 16))


def encoder():
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, batch_first=True)
    net, x = nn.TransformerEncoder(layer, 2), torch.randn(2, 8, 32)
    target = torch.randn(2, 8, 32)
    return net, x, (lambda out: F.mse_loss(out, target)), target


def shufflenet():
    # 128x128: at 64x64 one output of its last batch norm (4.5e-5 in float64,
    # a difference of nearly equal values) falls on the other side of the
    # ReLU after it in float32, which then passes it no gradient
    # (docs/pytorch.md, the zoo).
    return classify(torchvision.models.shufflenet_v2_x0_5(num_classes=10), torch.randn(2, 3, 128, 128))


class GroupNormBlock(nn.Module):
    """A diffusion U-Net's residual block: GroupNorm, SiLU, convolution, twice."""

    def __init__(self, c, groups):
        super().__init__()
        self.norm1, self.conv1 = nn.GroupNorm(groups, c), nn.Conv2d(c, c, 3, padding=1)
        self.norm2, self.conv2 = nn.GroupNorm(groups, c, eps=1e-6), nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        h = self.conv1(F.silu(self.norm1(x)))
        return x + self.conv2(F.silu(self.norm2(h)))


class GroupNormNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.block1 = GroupNormBlock(16, 4)
        self.down = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.block2 = GroupNormBlock(32, 8)
        self.norm = nn.GroupNorm(8, 32)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        h = self.block2(self.down(self.block1(self.stem(x))))
        return self.head(F.silu(self.norm(h)).mean((2, 3)))


def groupnorm():
    return classify(GroupNormNet(), torch.randn(2, 3, 16, 16))


class MoE(nn.Module):
    """Top-k routing as Mixtral-style code writes it with static shapes: every
    expert's output stacked, the router's top k picked by gather and weighted
    by its renormalised probabilities."""

    def __init__(self, d, experts, k, hidden):
        super().__init__()
        self.k = k
        self.router = nn.Linear(d, experts, bias=False)
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(d, hidden), nn.SiLU(), nn.Linear(hidden, d))
                                     for _ in range(experts))

    def forward(self, x):
        b, t, d = x.shape
        x = x.reshape(b * t, d)
        weights, chosen = self.router(x).softmax(-1).topk(self.k, dim=-1)
        weights = weights / weights.sum(-1, keepdim=True)
        outs = torch.stack([expert(x) for expert in self.experts], dim=1)  # (tokens, experts, d)
        picked = outs.gather(1, chosen.unsqueeze(-1).expand(-1, -1, d))  # (tokens, k, d)
        return (picked * weights.unsqueeze(-1)).sum(1).reshape(b, t, d)


class MoENet(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(8, 16)
        self.norm = nn.LayerNorm(16)
        self.moe = MoE(16, experts=4, k=2, hidden=32)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        h = self.embed(x)
        h = h + self.moe(self.norm(h))
        return self.head(h.mean(1))


def moe():
    return classify(MoENet(), torch.randn(2, 6, 8))


class ESPCN(nn.Module):
    """ESPCN-style super-resolution (Shi et al. 2016): convolutions at the low
    resolution, then nn.PixelShuffle to the high one, trained by MSE."""

    def __init__(self, r=2):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 5, padding=2)
        self.c2 = nn.Conv2d(16, 8, 3, padding=1)
        self.c3 = nn.Conv2d(8, 3 * r * r, 3, padding=1)
        self.shuffle = nn.PixelShuffle(r)

    def forward(self, x):
        return self.shuffle(self.c3(torch.tanh(self.c2(torch.tanh(self.c1(x))))))


def espcn():
    x = torch.randn(2, 3, 12, 12)
    target = torch.randn(2, 3, 24, 24, generator=torch.Generator().manual_seed(1))
    return ESPCN(), x, (lambda out: F.mse_loss(out, target)), target


class UnshuffleNet(nn.Module):
    """nn.PixelUnshuffle as a U-Net's lossless downsampling (space to channels)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.down = nn.PixelUnshuffle(2)
        self.conv = nn.Conv2d(32, 16, 3, padding=1)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        h = self.conv(self.down(F.silu(self.stem(x))))
        return self.head(F.gelu(h).mean((2, 3)))


def unshuffle():
    return classify(UnshuffleNet(), torch.randn(2, 3, 16, 16))


class RunningMean(nn.Module):
    """A scan-style layer: a gated stream summed along the sequence
    (torch.cumsum of a chunk, a strided view) and divided by the count so far,
    as prefix-average and position-id code writes it."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 32)
        self.norm = nn.LayerNorm(16)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        a, b = self.fc(x).chunk(2, -1)
        count = torch.arange(1, x.shape[1] + 1, dtype=x.dtype).view(1, -1, 1)
        h = torch.cumsum(a, dim=1) * torch.sigmoid(b) / count
        return self.head(torch.cumsum(self.norm(h), dim=-1).mean(1))


def cumsum():
    return classify(RunningMean(), torch.randn(2, 6, 8))


def maxvit():
    """torchvision's MaxViT (MBConv, window and grid attention) at a small size:
    its last stage's grid of 2x2 partitions leaves each partition one pixel, so
    the departition is a view that is not laid out row-major (in PyTorch the add
    before it kept its input's strides), which the next block's MBConv adds to
    its residual branch, as maxvit_t's last stage does at 224x224."""
    from torchvision.models.maxvit import MaxVit
    net = MaxVit(input_size=(16, 16), stem_channels=8, partition_size=2, block_channels=[8, 16], block_layers=[1, 2],
                 head_dim=4, stochastic_depth_prob=0.0, num_classes=10)
    return classify(net, torch.randn(2, 3, 16, 16))


class MaskHead(nn.Module):
    """A binary segmentation head (a U-Net's last layers): one logit per pixel."""

    def __init__(self):
        super().__init__()
        # No bias before the batch norm, as such nets write it (its gradient would be 0 up to rounding).
        self.conv, self.norm = nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.head = nn.Conv2d(8, 1, 1)

    def forward(self, x):
        return self.head(F.relu(self.norm(self.conv(x))))


def mask_bce():
    """Trained with BCEWithLogitsLoss against a 0/1 mask."""
    mask = (torch.rand(2, 1, 8, 8, generator=torch.Generator().manual_seed(1)) > 0.5).float()
    return MaskHead(), torch.randn(2, 3, 8, 8), (lambda out: F.binary_cross_entropy_with_logits(out, mask)), mask


def multilabel_bce():
    """A multi-label classifier: nn.BCEWithLogitsLoss over 5 independent labels."""
    net = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 5))
    labels = (torch.rand(4, 5, generator=torch.Generator().manual_seed(2)) > 0.7).float()
    return net, torch.randn(4, 16), (lambda out: nn.BCEWithLogitsLoss()(out, labels)), labels


def squeezenet():
    # Its max pools round up (ceil_mode): 64x64 -> 31 -> 15 -> 7 -> 3 pixels.
    return classify(torchvision.models.squeezenet1_1(num_classes=10), torch.randn(2, 3, 64, 64))


def googlenet():
    # ceil_mode max pools in the stem, between stages and in every inception's pool branch.
    net = torchvision.models.googlenet(num_classes=10, aux_logits=False, init_weights=True)
    return classify(net, torch.randn(2, 3, 64, 64))


def small_classifier(features):
    """torchvision's AlexNet/VGG head at width 64 instead of 4096 (a 4096-wide
    head is 54M and 119M parameters): the pooling under test is before it."""
    return nn.Sequential(nn.Dropout(0.5), nn.Linear(features, 64), nn.ReLU(inplace=True), nn.Dropout(0.5),
                         nn.Linear(64, 64), nn.ReLU(inplace=True), nn.Linear(64, 10))


def alexnet():
    # At 160x160 its features are 4x4, pooled adaptively to 6x6: windows of 1
    # and 2 pixels, overlapping ([0,1), [0,2), [1,2), [2,3), [2,4), [3,4)).
    net = torchvision.models.alexnet(num_classes=10)
    net.classifier = small_classifier(256 * 6 * 6)
    return classify(net, torch.randn(2, 3, 160, 160))


def vgg11_bn():
    # At 64x64 its features are 2x2, pooled adaptively to 7x7 (the fourth
    # window spans both pixels).
    net = torchvision.models.vgg11_bn(num_classes=10)
    net.classifier = small_classifier(512 * 7 * 7)
    return classify(net, torch.randn(2, 3, 64, 64))


class AvgDown(nn.Module):
    """A hand-written net with timm's avg_down shortcut (AvgPool2d(2, 2,
    ceil_mode=True, count_include_pad=False)), an average pool whose padding is
    left out of the divisor and a dilated max pool, on odd sizes so that the
    last windows pass the edge."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.down = nn.Sequential(nn.AvgPool2d(2, 2, ceil_mode=True, count_include_pad=False), nn.Conv2d(8, 16, 1))
        self.body = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.head = nn.Linear(16 * 3 * 3, 10)

    def forward(self, x):
        x = self.stem(x)                                 # 15x15
        x = self.down(x) + self.body(x)                  # 8x8
        x = F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False)  # 5x5 (4x4 without ceil_mode)
        x = F.max_pool2d(x, 2, 1, dilation=2, ceil_mode=True)                  # 3x3
        return self.head(x.flatten(1))


def avg_down():
    return classify(AvgDown(), torch.randn(2, 3, 15, 15))


MODELS = {"llama": llama, "vit": vit, "convnext": convnext, "mobilenet_v3": mobilenet_v3,
          "efficientnet_b0": efficientnet_b0, "densenet": densenet, "unet": unet, "lstm": lstm, "gru": gru,
          "encoder": encoder, "shufflenet": shufflenet,
          "groupnorm": groupnorm, "moe": moe,
          "maxvit": maxvit, "espcn": espcn, "unshuffle": unshuffle,
          "mask_bce": mask_bce, "multilabel_bce": multilabel_bce}


# ---- padding and rolling (the Pad kind; torch.roll as Slice views and a Concat) ----

def swin_t():
    """torchvision's Swin-T at 2x3x32x32: stage 1's 8x8 tokens in 7x7 windows
    are padded to 14x14 (F.pad of (B, H, W, C)), its shifted blocks roll by
    -3 then back (torch.roll over two dimensions); the later stages' 4x4, 2x2
    and 1x1 tokens pad to one window, unshifted (the window covers them)."""
    return classify(torchvision.models.swin_t(num_classes=10), torch.randn(2, 3, 32, 32))


class _ResnetBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.body = nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(c, c, 3), nn.InstanceNorm2d(c), nn.ReLU(True),
                                  nn.ReflectionPad2d(1), nn.Conv2d(c, c, 3), nn.InstanceNorm2d(c))

    def forward(self, x):
        return x + self.body(x)


def cyclegan():
    """CycleGAN's ResNet generator (junyanz/pytorch-CycleGAN-and-pix2pix's
    ResnetGenerator, 2 blocks, 8 filters): ReflectionPad2d(3) and a 7x7 stem,
    two strided downsamplings, residual blocks with ReflectionPad2d(1),
    InstanceNorm2d, two ConvTranspose2d back up, ReflectionPad2d(3), Tanh;
    trained towards an image (MSE)."""
    f = 8
    layers = [nn.ReflectionPad2d(3), nn.Conv2d(3, f, 7), nn.InstanceNorm2d(f), nn.ReLU(True)]
    for m in (1, 2):
        layers += [nn.Conv2d(f * m, f * m * 2, 3, stride=2, padding=1), nn.InstanceNorm2d(f * m * 2), nn.ReLU(True)]
    layers += [_ResnetBlock(f * 4) for _ in range(2)]
    for m in (4, 2):
        layers += [nn.ConvTranspose2d(f * m, f * m // 2, 3, stride=2, padding=1, output_padding=1),
                   nn.InstanceNorm2d(f * m // 2), nn.ReLU(True)]
    layers += [nn.ReflectionPad2d(3), nn.Conv2d(f, 3, 7), nn.Tanh()]
    x = torch.randn(2, 3, 32, 32)
    target = torch.rand(2, 3, 32, 32) * 2 - 1
    return nn.Sequential(*layers), x, (lambda out: F.mse_loss(out, target)), target


class _CausalConv(nn.Module):
    def __init__(self, c, d):
        super().__init__()
        self.d = d
        self.conv = nn.Conv1d(c, c, 2, dilation=d)

    def forward(self, x):
        return x + torch.relu(self.conv(F.pad(x, (self.d, 0))))


def tcn():
    """A WaveNet/TCN stack of causal dilated convolutions (kernel 2, dilation
    1, 2, 4, 8), each left-padded by its dilation with F.pad((d, 0)), residual."""
    net = nn.Sequential(nn.Conv1d(4, 16, 1), *[_CausalConv(16, d) for d in (1, 2, 4, 8)], nn.Conv1d(16, 4, 1))
    x = torch.randn(2, 4, 64)
    target = torch.randn(2, 4, 64)
    return net, x, (lambda out: F.mse_loss(out, target)), target


def circular_conv():
    """Convolutions with padding_mode="circular" (a periodic domain: 2-D and 1-D)."""
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 3, padding=1, padding_mode="circular")
            self.c2 = nn.Conv2d(8, 8, (3, 5), padding=(1, 2), padding_mode="circular")
            self.c3 = nn.Conv1d(8, 8, 3, padding=1, padding_mode="circular")
            self.head = nn.Linear(8, 10)

        def forward(self, x):
            x = torch.relu(self.c1(x))
            x = torch.relu(self.c2(x))
            x = torch.relu(self.c3(x.mean(2)))
            return self.head(x.mean(2))
    return classify(Net(), torch.randn(2, 3, 12, 10))


MODELS.update({"swin_t": swin_t, "cyclegan": cyclegan, "tcn": tcn, "circular_conv": circular_conv})
MODELS.update({"squeezenet": squeezenet, "googlenet": googlenet, "alexnet": alexnet, "vgg11_bn": vgg11_bn,
               "avg_down": avg_down})
MODELS.update({"cumsum": cumsum})  # a running sum (torch.cumsum)


def _smoothed(net, x, eps=0.1, classes=10, seed=0):
    """A classifier trained as ViTs, ConvNeXt and EfficientNet are: cross-entropy
    with label smoothing (nn.CrossEntropyLoss(label_smoothing=eps))."""
    labels = torch.randint(0, classes, (x.shape[0],), generator=torch.Generator().manual_seed(seed))
    loss = nn.CrossEntropyLoss(label_smoothing=eps)
    return net, x, (lambda out: loss(out, labels)), labels


def vit_smoothed():
    """The zoo's ViT trained with label_smoothing=0.1 (batch 4)."""
    import torch_saved_bytes
    net, x, _ = torch_saved_bytes.vit(4)
    return _smoothed(net, x)


def convnext_smoothed():
    """The zoo's ConvNeXt trained with F.cross_entropy(..., label_smoothing=0.2)."""
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    net = ConvNeXt([CNBlockConfig(16, 32, 1), CNBlockConfig(32, None, 1)], num_classes=10)
    x = torch.randn(3, 3, 32, 32)
    labels = torch.randint(0, 10, (3,), generator=torch.Generator().manual_seed(1))
    return net, x, (lambda out: F.cross_entropy(out, labels, label_smoothing=0.2)), labels


MODELS.update({"vit_smoothed": vit_smoothed, "convnext_smoothed": convnext_smoothed})  # label smoothing


def in_part(name):
    """REMAT_ZOO_PART=k/n: the zoo's k-th of n parts (every n-th model from the
    k-th, in MODELS' order), so that CTest runs the zoo as n tests that fit
    their timeouts side by side; unset: every model."""
    part = os.environ.get("REMAT_ZOO_PART", "")
    if not part:
        return True
    k, n = (int(v) for v in part.split("/"))
    return list(MODELS).index(name) % n == k - 1

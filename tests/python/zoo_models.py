"""The ten architectures of issue 28, as people write them (torchvision's or a
few lines of PyTorch), at CI sizes, for test_zoo.py: a Llama-style decoder
(RMSNorm, rotary embeddings, SwiGLU), a ViT, ConvNeXt, MobileNetV3,
EfficientNet-B0, DenseNet, a U-Net, a 2-layer LSTM, an nn.TransformerEncoder
and ShuffleNetV2. Each builder returns (module, example_input, loss_fn,
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
    return classify(torchvision.models.efficientnet_b0(num_classes=10), torch.randn(2, 3, 32, 32))


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


def encoder():
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, batch_first=True)
    net, x = nn.TransformerEncoder(layer, 2), torch.randn(2, 8, 32)
    target = torch.randn(2, 8, 32)
    return net, x, (lambda out: F.mse_loss(out, target)), target


def shufflenet():
    # 128x128: at 64x64 its last batch norm normalises 2x2 pixels of 2 images
    # and one channel's gradient is beyond float32 (issue 28's note).
    return classify(torchvision.models.shufflenet_v2_x0_5(num_classes=10), torch.randn(2, 3, 128, 128))


MODELS = {"llama": llama, "vit": vit, "convnext": convnext, "mobilenet_v3": mobilenet_v3,
          "efficientnet_b0": efficientnet_b0, "densenet": densenet, "unet": unet, "lstm": lstm,
          "encoder": encoder, "shufflenet": shufflenet}

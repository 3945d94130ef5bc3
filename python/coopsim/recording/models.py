"""The recordable models: the eight DNNs of the Coop evaluation, a GPT-2-style decoder, two Llama-style
decoders (llama.py) and a tiny MLP.

Default batch sizes and inputs are those of Coop's evaluation (docs/models/coop.md, "Evaluation
models", from the plotting script of the Coop artifact): ResNet-50 115, ResNet-152 55,
Inception-v3 96 at 299x299, U-Net 5 at 460x608, BERT-Large 4 at sequence 512, Swin-T 40 (and Swin-B 40,
the Swin OneFlow's sweeps built), BiLSTM 2048
(input 100, 256 units, sequence 128), DenseNet-121 70; images are 224x224 unless stated. GPT-2 (not in
that list) uses batch 8 at its full context of 1024. All weights are random (torchvision models are built
without weights: nothing is downloaded). Losses are cross-entropy against random labels.
"""
import re

import torch
import torch.nn.functional as F
from torch import nn

from .fused import FusedBiLSTM
from .llama import LLAMA_1B, LLAMA_7B, Llama, causal_lm_loss, token_batch
from .transformer import GPT2, BertPreTraining


class Spec:
    """A recordable model: build() -> nn.Module, inputs(batch, device) -> dict of tensors, loss(model,
    batch) -> loss, the optimizer's name (or a callable(params)), the default batch size, a one-line
    summary, and optionally its blocks: the qualified names of the modules that `--checkpoint
    all-blocks` checkpoints (a list, or a predicate (name, module) -> bool)."""

    def __init__(self, name, batch, build, inputs, loss, optimizer="adamw", summary="", blocks=None):
        self.name, self.batch, self.build, self.inputs = name, batch, build, inputs
        self.loss, self.optimizer, self.summary, self.blocks = loss, optimizer, summary or name, blocks

    def checkpoint_blocks(self):
        """What `--checkpoint all-blocks` passes on: the block names or predicate."""
        if self.blocks is None:
            raise ValueError(f"{self.name} defines no blocks: name the modules to checkpoint")
        return self.blocks


def _numbered(prefix):
    """blocks: the entries of the ModuleList `prefix` (prefix.0, prefix.1, ...)."""
    pattern = re.compile(re.escape(prefix) + r"\.\d+")
    return lambda name, module: pattern.fullmatch(name) is not None


def _tv(name, **kwargs):
    def build():
        import torchvision
        return getattr(torchvision.models, name)(**kwargs)
    return build


def _images(size, classes=1000):
    def make(batch, device):
        return {"images": torch.randn(batch, 3, *size, device=device),
                "labels": torch.randint(0, classes, (batch,), device=device)}
    return make


def _classify(model, batch):
    return F.cross_entropy(model(batch["images"]), batch["labels"])


def _inception_loss(model, batch):
    out = model(batch["images"])  # training mode: InceptionOutputs(logits, aux_logits)
    return F.cross_entropy(out[0], batch["labels"]) + 0.4 * F.cross_entropy(out[1], batch["labels"])


class DoubleConv(nn.Sequential):
    def __init__(self, cin, cout):
        super().__init__(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class Up(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.up = nn.ConvTranspose2d(cin, cin // 2, 2, stride=2)
        self.conv = DoubleConv(cin, cout)

    def forward(self, x, skip):
        x = self.up(x)
        dy, dx = skip.shape[2] - x.shape[2], skip.shape[3] - x.shape[3]
        if dy or dx:  # odd sizes on the way down: pad the upsampled map to the skip connection's size
            x = F.pad(x, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])
        return self.conv(torch.cat([skip, x], dim=1))


class UNet(nn.Module):
    """U-Net (Ronneberger et al. 2015) with same-padded 3x3 convolutions and batch norm: four 2x2
    max-pool downsamplings (64..1024 channels), transposed-convolution upsampling, skip concatenation,
    1x1 output convolution."""

    def __init__(self, in_channels=3, classes=2, width=64):
        super().__init__()
        w = [width * 2 ** i for i in range(5)]
        self.inc = DoubleConv(in_channels, w[0])
        self.down = nn.ModuleList(nn.Sequential(nn.MaxPool2d(2), DoubleConv(w[i], w[i + 1])) for i in range(4))
        self.up = nn.ModuleList(Up(w[i + 1], w[i]) for i in reversed(range(4)))
        self.outc = nn.Conv2d(w[0], classes, 1)

    def forward(self, x):
        skips = [self.inc(x)]
        for d in self.down:
            skips.append(d(skips[-1]))
        x = skips.pop()
        for u in self.up:
            x = u(x, skips.pop())
        return self.outc(x)


def _unet_inputs(batch, device):
    return {"images": torch.randn(batch, 3, 460, 608, device=device),
            "masks": torch.randint(0, 2, (batch, 460, 608), device=device)}


def _unet_loss(model, batch):
    return F.cross_entropy(model(batch["images"]), batch["masks"])


class BiLSTM(nn.Module):
    """One bidirectional LSTM layer (input 100, 256 units per direction) and a linear classifier on the
    last time step."""

    def __init__(self, features=100, hidden=256, classes=10):
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, classes)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.fc(out[-1])


def _lstm_inputs(batch, device):
    return {"sequence": torch.randn(128, batch, 100, device=device),
            "labels": torch.randint(0, 10, (batch,), device=device)}


def _lstm_loss(model, batch):
    return F.cross_entropy(model(batch["sequence"]), batch["labels"])


def _bert_inputs(batch, device):
    return {"tokens": torch.randint(0, 30522, (batch, 512), device=device),
            "token_types": torch.randint(0, 2, (batch, 512), device=device),
            "mlm_labels": torch.randint(0, 30522, (batch, 512), device=device),
            "nsp_labels": torch.randint(0, 2, (batch,), device=device)}


def _bert_loss(model, batch):
    mlm, nsp = model(batch["tokens"], batch["token_types"])
    return (F.cross_entropy(mlm.reshape(-1, mlm.shape[-1]), batch["mlm_labels"].reshape(-1))
            + F.cross_entropy(nsp, batch["nsp_labels"]))


def _gpt2_inputs(batch, device):
    return {"tokens": torch.randint(0, 50257, (batch, 1024), device=device)}


def _gpt2_loss(model, batch):
    logits = model(batch["tokens"])
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), batch["tokens"][:, 1:].reshape(-1))


def _mlp():
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 10))


def _mlp_inputs(batch, device):
    return {"features": torch.randn(batch, 32, device=device), "labels": torch.randint(0, 10, (batch,), device=device)}


def _mlp_loss(model, batch):
    return F.cross_entropy(model(batch["features"]), batch["labels"])


SPECS = [
    Spec("resnet50", 115, _tv("resnet50"), _images((224, 224)), _classify, "sgd",
         "torchvision ResNet-50, 224x224, 1000 classes"),
    Spec("resnet152", 55, _tv("resnet152"), _images((224, 224)), _classify, "sgd",
         "torchvision ResNet-152, 224x224, 1000 classes"),
    Spec("inception_v3", 96, _tv("inception_v3", aux_logits=True, init_weights=True), _images((299, 299)),
         _inception_loss, "sgd", "torchvision Inception-v3 with the auxiliary classifier (loss weight 0.4), 299x299"),
    Spec("unet", 5, UNet, _unet_inputs, _unet_loss, "sgd", "U-Net, 3 -> 2 classes, 460x608, per-pixel cross-entropy"),
    Spec("bert_large", 4, BertPreTraining, _bert_inputs, _bert_loss, "adamw",
         "BERT-Large pre-training (MLM over all 512 positions + NSP), sequence 512", blocks=_numbered("layers")),
    Spec("swin_t", 40, _tv("swin_t"), _images((224, 224)), _classify, "adamw",
         "torchvision Swin-T, 224x224, 1000 classes"),
    Spec("swin_b", 40, _tv("swin_b"), _images((224, 224)), _classify, "adamw",
         "torchvision Swin-B, 224x224, 1000 classes (the Swin of OneFlow's Coop sweeps: dtr2 run_dtr.py:197 "
         "swin_base_patch4_window7_224)"),
    Spec("bilstm", 2048, BiLSTM, _lstm_inputs, _lstm_loss, "sgd",
         "bidirectional LSTM, input 100, 256 units, sequence 128, 10 classes"),
    Spec("bilstm_fused", 2048, lambda: FusedBiLSTM(), _lstm_inputs, _lstm_loss, "sgd",
         "bidirectional LSTM as bilstm, each step as OneFlow runs it: two matmuls and one fused cell "
         "(torch >= 2.4)"),
    Spec("densenet121", 70, _tv("densenet121"), _images((224, 224)), _classify, "sgd",
         "torchvision DenseNet-121, 224x224, 1000 classes"),
    Spec("gpt2", 8, GPT2, _gpt2_inputs, _gpt2_loss, "adamw",
         "GPT-2 small-style decoder (124M), context 1024, next-token loss", blocks=_numbered("h")),
    Spec("llama_1b", 4, lambda: Llama(LLAMA_1B), token_batch(LLAMA_1B.vocab, LLAMA_1B.context), causal_lm_loss, "adamw",
         "Llama-3.2-1B-style decoder (1.24B): hidden 2048, 16 layers, 32 heads, 8 KV heads, FFN 8192, "
         "vocabulary 128256, tied embeddings, fused (flash) attention, sequence 2048", blocks=_numbered("layers")),
    Spec("llama_7b", 1, lambda: Llama(LLAMA_7B), token_batch(LLAMA_7B.vocab, LLAMA_7B.context), causal_lm_loss, "adamw",
         "Llama-2-7B-style decoder (6.74B): hidden 4096, 32 layers, 32 heads (multi-head), FFN 11008, "
         "vocabulary 32000, fused (flash) attention, sequence 4096", blocks=_numbered("layers")),
    Spec("mlp-tiny", 8, _mlp, _mlp_inputs, _mlp_loss, "sgd", "Linear(32,64)-ReLU-Dropout-Linear(64,10), for tests"),
]
MODELS = {s.name: s for s in SPECS}

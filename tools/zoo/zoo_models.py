"""Model definitions for the opfuse model zoo (plain torch + torchvision, random weights).

Every builder returns (module, example_inputs) where example_inputs is an ordered list of
(name, tensor). Weights come from the global torch RNG, which make_zoo.py seeds per model,
so results are reproducible. Nothing here downloads weights: torchvision builders always get
weights=None.
"""

import math
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torchvision.models import efficientnet as tv_effnet
from torchvision.models.segmentation import deeplabv3 as tv_deeplab


# --------------------------------------------------------------------------------------------
# Weight post-processing: default inits leave BatchNorm/LayerNorm as near-identities (gamma=1,
# beta=0, mean=0, var=1), which would hide normalization bugs in a runtime. We calibrate BN
# running statistics on random data (so activations stay in a sane range through deep nets)
# and then randomize the affine parameters.
# --------------------------------------------------------------------------------------------

def init_variance_preserving(model):
    """Re-initializes Conv/Linear weights with fan-in scaling.

    torchvision's fan-out init makes tiny-fan-out layers (squeeze-excitation reductions,
    10-class heads) produce huge values that saturate every following sigmoid, and huge
    activations make the float32 rounding error of the reference itself large. Fan-in scaling
    keeps activations O(1) where no BatchNorm follows.
    """
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Conv2d):
                fan_in = m.weight[0].numel()
                m.weight.normal_(0.0, math.sqrt(2.0 / fan_in))
            elif isinstance(m, nn.Linear):
                m.weight.normal_(0.0, math.sqrt(1.0 / m.in_features))
            else:
                continue
            if m.bias is not None:
                m.bias.normal_(0.0, 0.02)


def calibrate_batchnorm(model, batch):
    """Sets BN running stats to the statistics of one train-mode forward pass over `batch`.

    The batch contains the reference input, so its activations are well normalized all the
    way through even a deep random network (no magnitude blow-up).
    """
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    momenta = [bn.momentum for bn in bns]
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative average: one pass => exactly the batch statistics
    model.train()
    with torch.no_grad():
        model(*batch)
    model.eval()
    for bn, mom in zip(bns, momenta):  # restored: the exporter writes it as an attribute
        bn.momentum = mom


def randomize_norm_affine(model):
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.modules.batchnorm._BatchNorm, nn.LayerNorm)):
                if m.weight is not None:
                    m.weight.uniform_(0.7, 1.3)
                    m.bias.normal_(0.0, 0.05)


# --------------------------------------------------------------------------------------------
# Small ResNet (torchvision's ResNet hardcodes 64..512 channels, too big for a tiny test).
# --------------------------------------------------------------------------------------------

class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin, planes, stride):
        super().__init__()
        cout = planes * self.expansion
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        idt = x if self.down is None else self.down(x)
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + idt)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, planes, stride):
        super().__init__()
        cout = planes * self.expansion
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        idt = x if self.down is None else self.down(x)
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return F.relu(y + idt)


class TinyResNet(nn.Module):
    """Stem (conv7x7/2 + maxpool) -> 2 BasicBlock stages -> 1 Bottleneck stage -> GAP -> fc."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 7, 2, 3, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.layer1 = nn.Sequential(BasicBlock(16, 16, 1), BasicBlock(16, 16, 1))
        self.layer2 = nn.Sequential(BasicBlock(16, 32, 2), BasicBlock(32, 32, 1))
        self.layer3 = nn.Sequential(Bottleneck(32, 16, 2), Bottleneck(64, 16, 1))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        x = self.layer3(self.layer2(self.layer1(self.stem(x))))
        return self.fc(torch.flatten(self.pool(x), 1))


# --------------------------------------------------------------------------------------------
# BERT encoder (post-LayerNorm, erf GELU), written out so the exported graph is the classic
# MatMul/Add/Reshape/Transpose/Softmax attention pattern.
# --------------------------------------------------------------------------------------------

class BertSelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def split_heads(self, x):  # [B, S, H] -> [B, heads, S, head_dim]
        # Explicit sizes rather than -1 so exported shape inference keeps seq static.
        return x.reshape(x.shape[0], x.shape[1], self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x, bias):
        q = self.split_heads(self.query(x))
        k = self.split_heads(self.key(x))
        v = self.split_heads(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        if bias is not None:
            scores = scores + bias
        probs = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3)
        return ctx.reshape(ctx.shape[0], ctx.shape[1], self.heads * self.head_dim)


class BertLayer(nn.Module):
    def __init__(self, hidden, heads, intermediate, eps=1e-12):
        super().__init__()
        self.attention = BertSelfAttention(hidden, heads)
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_norm = nn.LayerNorm(hidden, eps=eps)
        self.intermediate = nn.Linear(hidden, intermediate)
        self.act = nn.GELU()  # exact (erf) GELU, as in BERT
        self.output = nn.Linear(intermediate, hidden)
        self.out_norm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x, bias):
        x = self.attn_norm(x + self.attn_out(self.attention(x, bias)))
        return self.out_norm(x + self.output(self.act(self.intermediate(x))))


class BertEncoder(nn.Module):
    """Input: float embeddings [B, S, H] (+ optional int64 0/1 attention mask [B, S]).

    With token_ids=True the first input is instead int64 token ids [B, S] and the model embeds
    them (word + position + token-type embeddings, then LayerNorm), which adds Gather nodes.
    """

    def __init__(self, layers, hidden, heads, intermediate, seq, use_mask, token_ids=False, vocab=1000):
        super().__init__()
        self.use_mask = use_mask
        self.token_ids = token_ids
        if token_ids:
            self.word_emb = nn.Embedding(vocab, hidden)
            self.pos_emb = nn.Parameter(torch.randn(seq, hidden) * 0.02)
            self.type_emb = nn.Parameter(torch.randn(hidden) * 0.02)
            self.emb_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList([BertLayer(hidden, heads, intermediate) for _ in range(layers)])
        with torch.no_grad():  # BERT's initializer_range
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    m.weight.normal_(0.0, 0.02)
                if isinstance(m, nn.Linear):
                    m.bias.normal_(0.0, 0.02)

    def forward(self, x, mask=None):
        if self.token_ids:
            x = self.word_emb(x) + self.pos_emb[: x.shape[1]] + self.type_emb
            x = self.emb_norm(x)
        bias = None
        if self.use_mask:
            # BERT's extended attention mask: 0 where attended, -10000 where masked out.
            bias = (1.0 - mask[:, None, None, :].to(torch.float32)) * -10000.0
        for layer in self.layers:
            x = layer(x, bias)
        return x


# --------------------------------------------------------------------------------------------
# YOLOv5 (v5.0-style Focus stem, v6-style SPPF), depth/width multipliers as in yolov5*.yaml.
# --------------------------------------------------------------------------------------------

def make_divisible(x, d=8):
    return int(math.ceil(x / d) * d)


class ConvBnSiLU(nn.Module):
    def __init__(self, c1, c2, k=1, s=1):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(c2, eps=1e-3, momentum=0.03)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Focus(nn.Module):
    def __init__(self, c1, c2, k=3):
        super().__init__()
        self.conv = ConvBnSiLU(c1 * 4, c2, k)

    def forward(self, x):
        return self.conv(torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]], 1))


class YoloBottleneck(nn.Module):
    def __init__(self, c1, c2, shortcut=True):
        super().__init__()
        self.cv1 = ConvBnSiLU(c1, c2, 1)
        self.cv2 = ConvBnSiLU(c2, c2, 3)
        self.add = shortcut and c1 == c2

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C3(nn.Module):
    def __init__(self, c1, c2, n=1, shortcut=True):
        super().__init__()
        c_ = c2 // 2
        self.cv1 = ConvBnSiLU(c1, c_, 1)
        self.cv2 = ConvBnSiLU(c1, c_, 1)
        self.cv3 = ConvBnSiLU(2 * c_, c2, 1)
        self.m = nn.Sequential(*[YoloBottleneck(c_, c_, shortcut) for _ in range(n)])

    def forward(self, x):
        return self.cv3(torch.cat([self.m(self.cv1(x)), self.cv2(x)], 1))


class SPPF(nn.Module):
    def __init__(self, c1, c2, k=5):
        super().__init__()
        c_ = c1 // 2
        self.cv1 = ConvBnSiLU(c1, c_, 1)
        self.cv2 = ConvBnSiLU(c_ * 4, c2, 1)
        self.m = nn.MaxPool2d(k, 1, k // 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(torch.cat([x, y1, y2, self.m(y2)], 1))


YOLO_ANCHORS = [[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119], [116, 90, 156, 198, 373, 326]]
YOLO_STRIDES = [8, 16, 32]


class Detect(nn.Module):
    """Head convs + YOLOv5's export-time box decoding (sigmoid, grid offsets, anchor scaling).

    The grids are precomputed for a fixed input size, so they export as constants.
    """

    def __init__(self, nc, chs, img_size):
        super().__init__()
        self.no = nc + 5
        self.na = 3
        self.m = nn.ModuleList([nn.Conv2d(c, self.no * self.na, 1) for c in chs])
        for i, s in enumerate(YOLO_STRIDES):
            n = img_size // s
            yv, xv = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
            grid = torch.stack((xv, yv), 2).view(1, 1, n, n, 2).float()
            anchor = torch.tensor(YOLO_ANCHORS[i], dtype=torch.float32).view(1, self.na, 1, 1, 2)
            self.register_buffer(f"grid{i}", grid - 0.5)
            self.register_buffer(f"anchor_grid{i}", anchor.expand(1, self.na, n, n, 2).contiguous())

    def forward(self, feats):
        outs = []
        for i, x in enumerate(feats):
            x = self.m[i](x)
            bs, _, ny, nx = x.shape
            x = x.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2)
            y = x.sigmoid()
            xy = (y[..., 0:2] * 2 + getattr(self, f"grid{i}")) * YOLO_STRIDES[i]
            wh = (y[..., 2:4] * 2) ** 2 * getattr(self, f"anchor_grid{i}")
            outs.append(torch.cat((xy, wh, y[..., 4:]), -1).view(bs, -1, self.no))
        return torch.cat(outs, 1)


class YoloV5(nn.Module):
    def __init__(self, width, depth, img_size, nc=80):
        super().__init__()

        def ch(c):
            return make_divisible(c * width, 8)

        def n(k):
            return max(round(k * depth), 1)

        self.b0 = Focus(3, ch(64), 3)
        self.b1 = ConvBnSiLU(ch(64), ch(128), 3, 2)
        self.b2 = C3(ch(128), ch(128), n(3))
        self.b3 = ConvBnSiLU(ch(128), ch(256), 3, 2)
        self.b4 = C3(ch(256), ch(256), n(6))
        self.b5 = ConvBnSiLU(ch(256), ch(512), 3, 2)
        self.b6 = C3(ch(512), ch(512), n(9))
        self.b7 = ConvBnSiLU(ch(512), ch(1024), 3, 2)
        self.b8 = C3(ch(1024), ch(1024), n(3))
        self.b9 = SPPF(ch(1024), ch(1024), 5)
        self.h10 = ConvBnSiLU(ch(1024), ch(512), 1, 1)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.h13 = C3(ch(1024), ch(512), n(3), False)
        self.h14 = ConvBnSiLU(ch(512), ch(256), 1, 1)
        self.h17 = C3(ch(512), ch(256), n(3), False)
        self.h18 = ConvBnSiLU(ch(256), ch(256), 3, 2)
        self.h20 = C3(ch(512), ch(512), n(3), False)
        self.h21 = ConvBnSiLU(ch(512), ch(512), 3, 2)
        self.h23 = C3(ch(1024), ch(1024), n(3), False)
        self.detect = Detect(nc, [ch(256), ch(512), ch(1024)], img_size)

    def forward(self, x):
        p3 = self.b4(self.b3(self.b2(self.b1(self.b0(x)))))
        p4 = self.b6(self.b5(p3))
        p5 = self.b9(self.b8(self.b7(p4)))
        h10 = self.h10(p5)
        h14 = self.h14(self.h13(torch.cat([self.up(h10), p4], 1)))
        out3 = self.h17(torch.cat([self.up(h14), p3], 1))
        out4 = self.h20(torch.cat([self.h18(out3), h14], 1))
        out5 = self.h23(torch.cat([self.h21(out4), h10], 1))
        return self.detect([out3, out4, out5])


# --------------------------------------------------------------------------------------------
# MLP: Gemm+BN1d+ReLU blocks, then explicit MatMul+Add+activation blocks.
# --------------------------------------------------------------------------------------------

class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(256, 512)
        self.bn1 = nn.BatchNorm1d(512)
        self.fc2 = nn.Linear(512, 512)
        self.bn2 = nn.BatchNorm1d(512)
        self.w3 = nn.Parameter(torch.randn(512, 256) / math.sqrt(512))
        self.b3 = nn.Parameter(torch.randn(256) * 0.1)
        self.w4 = nn.Parameter(torch.randn(256, 64) / math.sqrt(256))
        self.b4 = nn.Parameter(torch.randn(64) * 0.1)

    def forward(self, x):
        x = F.relu(self.bn1(self.fc1(x)))
        x = F.relu(self.bn2(self.fc2(x)))
        x = F.gelu(torch.matmul(x, self.w3) + self.b3)
        return F.relu(torch.matmul(x, self.w4) + self.b4)


class MlpBlocks(nn.Module):
    """Transformer-style feed-forward blocks on a batch of vectors: GEMM-bound (M=64, K/N 1024/2048)."""

    def __init__(self, hidden=1024, inner=2048, blocks=3):
        super().__init__()
        self.up = nn.ModuleList(nn.Linear(hidden, inner) for _ in range(blocks))
        self.down = nn.ModuleList(nn.Linear(inner, hidden) for _ in range(blocks))
        self.norm = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(blocks))

    def forward(self, x):
        for up, down, norm in zip(self.up, self.down, self.norm):
            x = norm(x + down(F.gelu(up(x))))
        return x


class LstmCellLoop(nn.Module):
    """nn.LSTMCell stepped through time in a Python loop from a zero state, as sequence models
    written step by step do: the export unrolls every step into Gemm/Split/Sigmoid/Tanh/Mul chains
    (opfuse's lstm_cell pattern and merge_rnn_steps make them one LSTM), then a linear head."""

    def __init__(self, inp=32, hidden=64, steps=8, classes=10):
        super().__init__()
        self.cell = nn.LSTMCell(inp, hidden)
        self.head = nn.Linear(hidden, classes)
        self.steps = steps

    def forward(self, x):  # x: [steps, batch, inp]
        h = x.new_zeros(x.shape[1], self.cell.hidden_size)
        c = h
        outs = []
        for t in range(self.steps):
            h, c = self.cell(x[t], (h, c))
            outs.append(h)
        return self.head(torch.stack(outs))


# --------------------------------------------------------------------------------------------
# Wrappers and builders
# --------------------------------------------------------------------------------------------

class SegmentationOut(nn.Module):
    """torchvision segmentation models return a dict; export just result['out']."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def _image(size):
    return [("input", torch.randn(1, 3, size, size))]


def _prepare_cnn(model, inputs, rand=torch.randn):
    """Fan-in init, random BN affine, BN stats calibrated on [reference input + calib_extra random inputs]."""
    init_variance_preserving(model)
    randomize_norm_affine(model)  # before calibration, so later layers' stats account for it
    x = inputs[0][1]
    # Small inputs give few samples per channel in deep layers; a larger batch makes the stats
    # less degenerate (random deep nets amplify float32 rounding where variances are tiny).
    calib_extra = 7 if x.shape[-1] <= 128 else 3
    calibrate_batchnorm(model, [torch.cat([x, rand(calib_extra, *x.shape[1:])])])
    return model.eval(), inputs


def build_torchvision_classifier(arch, size, **kwargs):
    model = getattr(torchvision.models, arch)(weights=None, **kwargs)
    return _prepare_cnn(model, _image(size))


def build_efficientnet_b0(size, width_mult=1.0, depth_mult=1.0, num_classes=1000):
    setting, last = tv_effnet._efficientnet_conf("efficientnet_b0", width_mult=width_mult, depth_mult=depth_mult)
    model = tv_effnet.EfficientNet(setting, 0.2, last_channel=last, num_classes=num_classes)
    return _prepare_cnn(model, _image(size))


def build_deeplabv3(size, width_mult=1.0, aspp_channels=256, num_classes=21):
    if width_mult == 1.0 and aspp_channels == 256:
        model = torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(
            weights=None, weights_backbone=None, num_classes=num_classes, aux_loss=False)
    else:
        # Same structure as torchvision's builder, narrower backbone and ASPP.
        backbone = torchvision.models.mobilenet_v3_large(weights=None, width_mult=width_mult, dilated=True)
        model = tv_deeplab._deeplabv3_mobilenetv3(backbone, num_classes, False)
        cin = model.classifier[0].convs[0][0].in_channels
        c = aspp_channels
        model.classifier = nn.Sequential(
            tv_deeplab.ASPP(cin, [12, 24, 36], c), nn.Conv2d(c, c, 3, padding=1, bias=False),
            nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, num_classes, 1))
    model = SegmentationOut(model)
    return _prepare_cnn(model, _image(size))


def build_resnet_tiny(size):
    return _prepare_cnn(TinyResNet(), _image(size))


def build_bert(layers, hidden, heads, intermediate, seq, use_mask, token_ids=False):
    model = BertEncoder(layers, hidden, heads, intermediate, seq, use_mask, token_ids).eval()
    randomize_norm_affine(model)
    if token_ids:
        inputs = [("input_ids", torch.randint(0, 1000, (1, seq), dtype=torch.int64))]
    else:
        inputs = [("input", torch.randn(1, seq, hidden))]
    if use_mask:
        mask = torch.ones(1, seq, dtype=torch.int64)
        mask[:, seq - seq // 4:] = 0  # last quarter is padding
        inputs.append(("attention_mask", mask))
    return model, inputs


def build_yolov5(width, depth, size):
    model = YoloV5(width, depth, size)
    inputs = [("input", torch.rand(1, 3, size, size))]  # image-like values in [0, 1]
    model, inputs = _prepare_cnn(model, inputs, rand=torch.rand)
    with torch.no_grad():  # keep head logits O(1) so the decode sigmoids are not saturated
        for conv in model.detect.m:
            conv.weight.mul_(0.5)
    return model, inputs


def build_mlp():
    model = Mlp()
    inputs = [("input", torch.randn(8, 256))]
    init_variance_preserving(model)
    randomize_norm_affine(model)
    calibrate_batchnorm(model, [torch.cat([inputs[0][1], torch.randn(56, 256)])])
    return model.eval(), inputs


def build_lstm_cell_loop():
    model = LstmCellLoop()
    return model.eval(), [("input", torch.randn(8, 2, 32))]


def build_mlp_blocks(batch):
    model = MlpBlocks()
    init_variance_preserving(model)
    randomize_norm_affine(model)
    return model.eval(), [("input", torch.randn(batch, 1024))]


def param_count(model):
    return int(sum(p.numel() for p in model.parameters()))


# name -> (tier, builder, kwargs, output names, dynamic_axes or None)
MODELS = OrderedDict()


def _reg(name, tier, builder, outputs, dynamic_axes=None, **kwargs):
    MODELS[name] = dict(tier=tier, builder=builder, kwargs=kwargs, outputs=outputs, dynamic_axes=dynamic_axes)


_reg("resnet50", "full", build_torchvision_classifier, ["logits"], arch="resnet50", size=224)
_reg("mobilenet_v2", "full", build_torchvision_classifier, ["logits"], arch="mobilenet_v2", size=224)
_reg("mobilenet_v3_large", "full", build_torchvision_classifier, ["logits"], arch="mobilenet_v3_large", size=224)
_reg("efficientnet_b0", "full", build_efficientnet_b0, ["logits"], size=224)
_reg("deeplabv3_mobilenet_v3_large", "full", build_deeplabv3, ["out"], size=512)
_reg("bert_base", "full", build_bert, ["output"], layers=12, hidden=768, heads=12, intermediate=3072, seq=128,
     use_mask=False)
_reg("bert_base_mask", "full", build_bert, ["output"], layers=12, hidden=768, heads=12, intermediate=3072,
     seq=128, use_mask=True)
# Google's BERT-Small shape (4 layers, 512 hidden, 8 heads): the smaller GEMM-bound model of issue 16's bar.
_reg("bert_small", "full", build_bert, ["output"], layers=4, hidden=512, heads=8, intermediate=2048, seq=128,
     use_mask=False)
_reg("mlp_blocks", "full", build_mlp_blocks, ["output"], batch=64)
_reg("yolov5s", "full", build_yolov5, ["output"], width=0.5, depth=0.33, size=640)

_reg("resnet_tiny", "tiny", build_resnet_tiny, ["logits"], size=64)
_reg("mobilenet_v2_tiny", "tiny", build_torchvision_classifier, ["logits"], arch="mobilenet_v2", size=64,
     width_mult=0.35, num_classes=10)
_reg("mobilenet_v3_large_tiny", "tiny", build_torchvision_classifier, ["logits"], arch="mobilenet_v3_large",
     size=64, width_mult=0.35, num_classes=10)
_reg("efficientnet_b0_tiny", "tiny", build_efficientnet_b0, ["logits"], size=64, width_mult=0.25, depth_mult=0.34,
     num_classes=10)
_reg("deeplabv3_tiny", "tiny", build_deeplabv3, ["out"], size=128, width_mult=0.35, aspp_channels=32)
_reg("bert_tiny", "tiny", build_bert, ["output"],
     dynamic_axes={"input": {0: "batch"}, "attention_mask": {0: "batch"}, "output": {0: "batch"}},
     layers=2, hidden=128, heads=2, intermediate=512, seq=32, use_mask=True)
_reg("bert_tiny_ids", "tiny", build_bert, ["output"], layers=2, hidden=128, heads=2, intermediate=512, seq=32,
     use_mask=True, token_ids=True)
_reg("yolov5_tiny", "tiny", build_yolov5, ["output"], width=0.125, depth=0.33, size=128)
_reg("mlp", "tiny", build_mlp, ["output"])
_reg("lstm_cell_loop", "tiny", build_lstm_cell_loop, ["output"])

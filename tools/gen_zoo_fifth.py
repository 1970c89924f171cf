#!/usr/bin/env python3
"""A fifth zoo: nine architectures none of the first four zoos has, exported like
gen_zoo_third.py (NAME.onnx, NAME.in0.npy, NAME.out0.npy, zoo.json; calibrated batch norms,
float64 references) so that tools/zoo.py can check and time them:

    /usr/bin/python3 tools/gen_zoo_fifth.py OUT_DIR [--only a,b] [--list] [--shared DIR]
    /usr/bin/python3 tools/zoo.py --zoo OUT_DIR --models '' --rounds 3

The zoos are a sample; the goal is every real model. This one samples generators and image-to-
image nets (the first four are mostly classifiers and encoders): a DCGAN generator
(ConvTranspose 4x4 / stride 2 / pad 1, the overlapping kind, from a 1x1 latent), an ESPCN super-
resolution net (PixelShuffle = DepthToSpace, dynamic H/W), a fast style-transfer net (reflection
Pad, InstanceNormalization, nearest Upsample, residual blocks, dynamic H/W), a dilated
segmentation net (dilations 2 and 4, an ASPP head with image pooling, bilinear Resize back to
the input size, dynamic H/W); two newer vision backbones: MaxViT (MBConv with squeeze-excite,
block and grid attention through 6-D permutes, relative position bias) and a ConvNeXt V2 block
stack (global response normalization: an L2 norm over H, W divided by its channel mean); a HiFi-
GAN-like vocoder (ConvTranspose1d upsampling, dilated Conv1d residual blocks, LeakyReLU, dynamic
frames); and a wav2vec2-like audio encoder (a strided Conv1d feature extractor with GroupNorm, a
grouped Conv1d positional embedding of kernel 31, post-norm attention, dynamic samples) and a
CLIP-like text encoder (causal mask, pooled at each row's ArgMax token through Gather). Random
weights with the zoo's seed and opset 17. Uses gen_zoo_third's helpers (and through it
gen_zoo.py: --shared DIR, default ../shared/models) and Debian's python3-torch / torchvision /
onnx. (torchvision's swin_v2_t does not export with torch 1.13: aten::zero at opset 17.)
"""
import gen_zoo_third as third  # noqa: F401  (handles --shared, puts gen_zoo.py on the path)
import gen_zoo as gz
import torch
import torchvision

nn = torch.nn
F = torch.nn.functional


class DcganGenerator(nn.Module):
    """DCGAN's generator: a 100-d latent [N, 100, 1, 1] to a 3x64x64 image."""

    def __init__(s, z=100, f=64):
        super().__init__()

        def up(i, o, first=False):
            conv = nn.ConvTranspose2d(i, o, 4, 1 if first else 2, 0 if first else 1, bias=False)
            return [conv, nn.BatchNorm2d(o), nn.ReLU(True)]

        s.net = nn.Sequential(*up(z, f * 8, True), *up(f * 8, f * 4), *up(f * 4, f * 2),
                              *up(f * 2, f), nn.ConvTranspose2d(f, 3, 4, 2, 1, bias=False),
                              nn.Tanh())

    def forward(s, x):
        return s.net(x)


class Espcn(nn.Module):
    """ESPCN super-resolution (x3) on a luma plane, PixelShuffle at the end."""

    def __init__(s, scale=3):
        super().__init__()
        s.c1 = nn.Conv2d(1, 64, 5, padding=2)
        s.c2 = nn.Conv2d(64, 32, 3, padding=1)
        s.c3 = nn.Conv2d(32, scale * scale, 3, padding=1)
        s.shuffle = nn.PixelShuffle(scale)

    def forward(s, x):
        return s.shuffle(s.c3(torch.tanh(s.c2(torch.tanh(s.c1(x))))))


class StyleConv(nn.Module):
    def __init__(s, i, o, k, stride=1, upsample=False, relu=True):
        super().__init__()
        s.upsample, s.relu = upsample, relu
        s.pad = nn.ReflectionPad2d(k // 2)
        s.conv = nn.Conv2d(i, o, k, stride)
        s.norm = nn.InstanceNorm2d(o, affine=True)

    def forward(s, x):
        if s.upsample:
            x = F.interpolate(x, scale_factor=2, mode="nearest")
        y = s.norm(s.conv(s.pad(x)))
        return F.relu(y) if s.relu else y


class FastStyle(nn.Module):
    """Johnson et al.'s fast style transfer net (narrower): down, 3 residual blocks, up."""

    def __init__(s, c=16):
        super().__init__()
        s.down = nn.Sequential(StyleConv(3, c, 9), StyleConv(c, 2 * c, 3, 2),
                               StyleConv(2 * c, 4 * c, 3, 2))
        s.res = nn.ModuleList(nn.Sequential(StyleConv(4 * c, 4 * c, 3),
                                            StyleConv(4 * c, 4 * c, 3, relu=False))
                              for _ in range(3))
        s.up = nn.Sequential(StyleConv(4 * c, 2 * c, 3, upsample=True),
                             StyleConv(2 * c, c, 3, upsample=True))
        s.out = nn.Sequential(nn.ReflectionPad2d(4), nn.Conv2d(c, 3, 9))

    def forward(s, x):
        h = s.down(x)
        for r in s.res:
            h = h + r(h)
        return torch.sigmoid(s.out(s.up(h)))


class DilatedSeg(nn.Module):
    """A DeepLab-style segmenter at output stride 8: a strided stem, dilated residual stages
    (dilation 2, then 4), an ASPP head (1x1, 3x3 at rates 6 / 12, image pooling upsampled
    back) and bilinear Resize to the input size."""

    def __init__(s, classes=12):
        super().__init__()

        def cbr(i, o, k=3, stride=1, d=1):
            return nn.Sequential(nn.Conv2d(i, o, k, stride, d * (k // 2), dilation=d, bias=False),
                                 nn.BatchNorm2d(o), nn.ReLU(True))

        s.stem = nn.Sequential(cbr(3, 32, stride=2), cbr(32, 48, stride=2), cbr(48, 64, stride=2))
        s.d2 = nn.ModuleList([cbr(64, 64, d=2) for _ in range(2)])
        s.d4 = nn.ModuleList([cbr(64, 64, d=4) for _ in range(2)])
        s.aspp = nn.ModuleList([cbr(64, 48, 1), cbr(64, 48, d=6), cbr(64, 48, d=12)])
        s.pool = cbr(64, 48, 1)
        s.proj = cbr(4 * 48, 64, 1)
        s.head = nn.Conv2d(64, classes, 1)

    def forward(s, x):
        h = s.stem(x)
        for b in list(s.d2) + list(s.d4):
            h = h + b(h)
        pooled = s.pool(F.adaptive_avg_pool2d(h, 1))
        feats = [a(h) for a in s.aspp] + [pooled.expand(-1, -1, h.shape[2], h.shape[3])]
        y = s.head(s.proj(torch.cat(feats, 1)))
        return F.interpolate(y, size=x.shape[2:], mode="bilinear", align_corners=False)


class LayerNorm2d(nn.Module):
    def __init__(s, c):
        super().__init__()
        s.norm = nn.LayerNorm(c)

    def forward(s, x):
        return s.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class Grn(nn.Module):
    """ConvNeXt V2's global response normalization on [N, H, W, C]."""

    def __init__(s, c):
        super().__init__()
        s.gamma = nn.Parameter(0.1 * torch.randn(1, 1, 1, c))
        s.beta = nn.Parameter(0.1 * torch.randn(1, 1, 1, c))

    def forward(s, x):
        g = torch.norm(x, p=2, dim=(1, 2), keepdim=True)
        n = g / (g.mean(dim=-1, keepdim=True) + 1e-6)
        return s.gamma * (x * n) + s.beta + x


class ConvNextV2Block(nn.Module):
    def __init__(s, c):
        super().__init__()
        s.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        s.norm = nn.LayerNorm(c, eps=1e-6)
        s.fc1 = nn.Linear(c, 4 * c)
        s.grn = Grn(4 * c)
        s.fc2 = nn.Linear(4 * c, c)

    def forward(s, x):
        h = s.dw(x).permute(0, 2, 3, 1)
        h = s.fc2(s.grn(F.gelu(s.fc1(s.norm(h)))))
        return x + h.permute(0, 3, 1, 2)


class ConvNextV2(nn.Module):
    """ConvNeXt V2 at atto-like widths (40, 80, 160, 320; depths 2, 2, 4, 2)."""

    def __init__(s, dims=(40, 80, 160, 320), depths=(2, 2, 4, 2), classes=100):
        super().__init__()
        layers = [nn.Conv2d(3, dims[0], 4, 4), LayerNorm2d(dims[0])]
        for i, (c, n) in enumerate(zip(dims, depths)):
            if i:
                layers += [LayerNorm2d(dims[i - 1]), nn.Conv2d(dims[i - 1], c, 2, 2)]
            layers += [ConvNextV2Block(c) for _ in range(n)]
        s.body = nn.Sequential(*layers)
        s.norm = nn.LayerNorm(dims[-1])
        s.head = nn.Linear(dims[-1], classes)

    def forward(s, x):
        return s.head(s.norm(s.body(x).mean((2, 3))))


class Wav2Vec2Like(nn.Module):
    """wav2vec2's shape at a smaller width: a Conv1d feature extractor (stride 5, then 2s; the
    first layer GroupNorm'd per channel), a projection, a grouped Conv1d positional embedding
    (kernel 31, 8 groups, GELU), post-norm transformer layers."""

    def __init__(s, c=128, d=192, heads=4, layers=2):
        super().__init__()
        convs = [(1, c, 10, 5)] + [(c, c, 3, 2)] * 4 + [(c, c, 2, 2)]
        s.convs = nn.ModuleList(nn.Conv1d(i, o, k, st, bias=False) for i, o, k, st in convs)
        s.gn = nn.GroupNorm(c, c)
        s.fnorm = nn.LayerNorm(c)
        s.proj = nn.Linear(c, d)
        s.pos = nn.Conv1d(d, d, 31, padding=15, groups=8)
        s.norm = nn.LayerNorm(d)
        s.enc = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, activation="gelu",
                                       batch_first=True), layers)

    def forward(s, wav):
        h = wav
        for i, conv in enumerate(s.convs):
            h = conv(h)
            if i == 0:
                h = s.gn(h)
            h = F.gelu(h)
        h = s.proj(s.fnorm(h.transpose(1, 2)))
        h = h + F.gelu(s.pos(h.transpose(1, 2))).transpose(1, 2)
        return s.enc(s.norm(h))


class ClipText(nn.Module):
    """A CLIP-like text encoder: token + position embeddings, causal pre-norm attention,
    pooled at each row's end token (the ArgMax of the ids), projected."""

    def __init__(s, vocab=5000, d=192, heads=4, layers=3, ctx=77, out=128):
        super().__init__()
        s.tok = nn.Embedding(vocab, d)
        s.pos = nn.Parameter(0.02 * torch.randn(ctx, d))
        s.enc = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, activation="gelu",
                                       batch_first=True, norm_first=True), layers)
        s.norm = nn.LayerNorm(d)
        s.proj = nn.Linear(d, out, bias=False)

    def forward(s, ids):
        n = ids.shape[1]
        h = s.tok(ids) + s.pos[:n]
        mask = torch.full((n, n), float("-inf")).triu(1)
        h = s.norm(s.enc(h, mask=mask))
        end = ids.argmax(dim=-1)
        pooled = h[torch.arange(h.shape[0]), end]
        return s.proj(pooled)


class HifiGan(nn.Module):
    """A HiFi-GAN-like vocoder generator (narrower): mel frames [N, 80, T] to a waveform
    [N, 1, 64 T] through ConvTranspose1d upsampling (x8, x8; kernels 16), each followed by a
    multi-receptive-field block of dilated Conv1d residuals (dilations 1, 3, 5) with LeakyReLU,
    and a Tanh output."""

    def __init__(s, mels=80, c=64):
        super().__init__()
        s.pre = nn.Conv1d(mels, c, 7, padding=3)
        s.ups = nn.ModuleList([nn.ConvTranspose1d(c, c // 2, 16, 8, padding=4),
                               nn.ConvTranspose1d(c // 2, c // 4, 16, 8, padding=4)])
        s.res = nn.ModuleList(
            nn.ModuleList(nn.Conv1d(ch, ch, 3, padding=d, dilation=d) for d in (1, 3, 5))
            for ch in (c // 2, c // 4))
        s.post = nn.Conv1d(c // 4, 1, 7, padding=3)

    def forward(s, x):
        h = s.pre(x)
        for up, res in zip(s.ups, s.res):
            h = up(F.leaky_relu(h, 0.1))
            for conv in res:
                h = h + conv(F.leaky_relu(h, 0.1))
        return torch.tanh(s.post(F.leaky_relu(h, 0.1)))


def clip_ids(shape):
    """Token ids with the end token (the largest id) at a random place in each row."""
    ids = torch.randint(1, 4000, shape, dtype=torch.int64)
    for r in range(shape[0]):
        ids[r, torch.randint(1, shape[1], ()).item()] = 4999
    return ids


randn = third.randn
# name -> (builder, input name, example shape, input maker, dynamic axes of the input)
ZOO = {
    "dcgan_generator": (DcganGenerator, "input", [1, 100, 1, 1], randn, {0: "batch"}),
    "espcn_x3": (Espcn, "input", [1, 1, 120, 160], randn, {0: "batch", 2: "height", 3: "width"}),
    "fast_style": (FastStyle, "input", [1, 3, 128, 160], randn,
                   {0: "batch", 2: "height", 3: "width"}),
    "dilated_seg": (DilatedSeg, "input", [1, 3, 192, 256], randn,
                    {0: "batch", 2: "height", 3: "width"}),
    "maxvit_t": (gz.tv("maxvit_t"), "input", [1, 3, 224, 224], randn, {0: "batch"}),
    "hifigan_like": (HifiGan, "input", [1, 80, 64], randn, {0: "batch", 2: "frames"}),
    "convnext_v2_atto": (ConvNextV2, "input", [1, 3, 192, 192], randn, {0: "batch"}),
    "wav2vec2_like": (Wav2Vec2Like, "input", [1, 1, 16000], randn, {0: "batch", 2: "samples"}),
    "clip_text": (ClipText, "input_ids", [2, 77], clip_ids, {0: "batch"}),
}


def main():
    """gen_zoo's command line (OUT_DIR, --only, --list, zoo.json) over this zoo, exported by
    gen_zoo_third's export (calibrated batch norms, float64 reference)."""
    third.ZOO = ZOO
    gz.ZOO, gz.export = ZOO, third.export
    gz.main()


if __name__ == "__main__":
    main()

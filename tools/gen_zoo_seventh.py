#!/usr/bin/env python3
"""A seventh zoo: architectures none of the first six zoos has, exported like gen_zoo_sixth.py
(NAME.onnx, NAME.in0.npy, NAME.out0.npy, zoo.json; calibrated batch norms, float64 references)
so that tools/zoo.py can check and time them:

    /usr/bin/python3 tools/gen_zoo_seventh.py OUT_DIR [--only a,b] [--list] [--shared DIR]
    /usr/bin/python3 tools/zoo.py --zoo OUT_DIR --models '' --rounds 3

This one samples: a SegFormer-like encoder (overlapping patch embeddings, efficient self-
attention whose keys and values come from a strided-conv spatial reduction, Mix-FFN with a
depthwise 3x3, an all-MLP decoder; dynamic H/W); a PoolFormer (MetaFormer with an AvgPool token
mixer, count_include_pad=False, and GroupNorm(1)); a GhostNet-like net (ghost modules: a
primary conv concatenated with a cheap depthwise conv of it and sliced, hard-sigmoid squeeze-
excite); a LeViT-like net (attention whose linear layers are batch-normed, hard-swish, learned
attention biases, a shrinking attention that subsamples its queries); a YOLOv8-like backbone and
neck (SiLU, C2f blocks that Split and Concat, SPPF of three chained 5x5 MaxPools, nearest x2
Upsample; dynamic H/W); a Demucs-like audio U-Net (strided Conv1d encoder with GLU, a
bidirectional LSTM in the middle, ConvTranspose1d decoder with skip connections; dynamic
length); an EfficientDet BiFPN (fast normalized fusion with ReLU'd learned weights, depthwise
separable convs, nearest upsampling and max-pool downsampling; dynamic H/W); torchvision's
swin_v2_t (cosine attention, log-spaced continuous position bias MLP) and regnet_y_800mf
(squeeze-excite in every block); a NeRF-like MLP (Sin/Cos positional encoding of 3-D points,
a skip concatenation; dynamic number of rays); a graph net over a fixed random graph (messages
gathered with GatherElements and summed with ScatterElements reduction=add; dynamic batch);
and a tokenizer-free byte model (Embedding of byte ids, positions from a CumSum over the
non-padding mask, a small transformer; dynamic seq). Random weights with the zoo's seed and
opset 17. Skipped: the RoPE decoder with a KV cache (past_key_values are further graph inputs,
and gen_zoo's export and zoo.json hold one input per model) and torchvision's swin_v2_t (torch
1.13 cannot export its aten::zero to opset 17). Uses gen_zoo_third's helpers (--shared DIR).

What it found (2026-11-27, main fef5065): all 11 correct on both back ends. bifpn_det was 2.95x
ONNX Runtime at 1 thread (3.17x at 2): each weighted fusion adds a row-major Resize output to a
channel-blocked conv output, which oneDNN 2.6 runs with its reference binary (10-12 ms per
1x64x16x16 add); ghostnet_like was 1.48x: the same mixed-layout add made kiln decline its whole
oneDNN region. Fixed in external/onednn/run/plan_eltwise_binary.cc (one operand reordered into
the other's blocking): bifpn_det 1.29x / 0.84x, ghostnet_like 0.94x / 0.72x.
"""
import math

import gen_zoo_third as third  # noqa: F401  (handles --shared, puts gen_zoo.py on the path)
import gen_zoo as gz
import torch
import torchvision

nn = torch.nn
F = torch.nn.functional


def conv_bn(i, o, k=3, s=1, g=1, act=nn.ReLU):
    return nn.Sequential(nn.Conv2d(i, o, k, s, k // 2, groups=g, bias=False), nn.BatchNorm2d(o),
                         act() if act else nn.Identity())


class EfficientAttention(nn.Module):
    def __init__(s, d, heads, sr):
        super().__init__()
        s.heads, s.sr = heads, sr
        s.q = nn.Linear(d, d)
        s.kv = nn.Linear(d, 2 * d)
        s.proj = nn.Linear(d, d)
        if sr > 1:
            s.red = nn.Conv2d(d, d, sr, sr)
            s.norm = nn.LayerNorm(d)

    def forward(s, x, h, w):  # x [N, HW, d]
        n, t, d = x.shape
        q = s.q(x).reshape(n, t, s.heads, d // s.heads).transpose(1, 2)
        if s.sr > 1:
            r = s.red(x.transpose(1, 2).reshape(n, d, h, w)).flatten(2).transpose(1, 2)
            r = s.norm(r)
        else:
            r = x
        kv = s.kv(r).reshape(n, -1, 2, s.heads, d // s.heads).permute(2, 0, 3, 1, 4)
        a = torch.softmax(q @ kv[0].transpose(-1, -2) / math.sqrt(d // s.heads), -1)
        return s.proj((a @ kv[1]).transpose(1, 2).reshape(n, t, d))


class MixFfn(nn.Module):
    def __init__(s, d, e=4):
        super().__init__()
        s.fc1 = nn.Linear(d, e * d)
        s.dw = nn.Conv2d(e * d, e * d, 3, 1, 1, groups=e * d)
        s.fc2 = nn.Linear(e * d, d)

    def forward(s, x, h, w):
        n, t, _ = x.shape
        y = s.fc1(x)
        y = s.dw(y.transpose(1, 2).reshape(n, -1, h, w)).flatten(2).transpose(1, 2)
        return s.fc2(F.gelu(y))


class SegBlock(nn.Module):
    def __init__(s, d, heads, sr):
        super().__init__()
        s.n1, s.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        s.attn, s.ffn = EfficientAttention(d, heads, sr), MixFfn(d)

    def forward(s, x, h, w):
        x = x + s.attn(s.n1(x), h, w)
        return x + s.ffn(s.n2(x), h, w)


class SegformerLike(nn.Module):
    """SegFormer-B0-like: four stages of overlapping patch embedding (7x7/4, then 3x3/2), two
    blocks each of efficient attention (spatial reduction 8, 4, 2, 1) and Mix-FFN; the all-MLP
    decoder upsamples every stage bilinearly to 1/4, fuses and classifies per pixel."""

    def __init__(s, dims=(32, 64, 160, 256), heads=(1, 2, 5, 8), srs=(8, 4, 2, 1), classes=19):
        super().__init__()
        s.embeds, s.stages, s.norms = nn.ModuleList(), nn.ModuleList(), nn.ModuleList()
        c = 3
        for i, d in enumerate(dims):
            k, st = (7, 4) if i == 0 else (3, 2)
            s.embeds.append(nn.Sequential(nn.Conv2d(c, d, k, st, k // 2)))
            s.stages.append(nn.ModuleList(SegBlock(d, heads[i], srs[i]) for _ in range(2)))
            s.norms.append(nn.LayerNorm(d))
            c = d
        s.lin = nn.ModuleList(nn.Conv2d(d, 128, 1) for d in dims)
        s.fuse = conv_bn(4 * 128, 128, 1)
        s.cls = nn.Conv2d(128, classes, 1)

    def forward(s, x):
        feats = []
        for emb, blocks, norm in zip(s.embeds, s.stages, s.norms):
            x = emb(x)
            n, d, h, w = x.shape
            t = x.flatten(2).transpose(1, 2)
            for b in blocks:
                t = b(t, h, w)
            x = norm(t).transpose(1, 2).reshape(n, d, h, w)
            feats.append(x)
        size = feats[0].shape[2:]
        ups = [F.interpolate(l(f), size=size, mode="bilinear", align_corners=False)
               for l, f in zip(s.lin, feats)]
        return s.cls(s.fuse(torch.cat(ups[::-1], 1)))


class PoolBlock(nn.Module):
    def __init__(s, d):
        super().__init__()
        s.n1, s.n2 = nn.GroupNorm(1, d), nn.GroupNorm(1, d)
        s.pool = nn.AvgPool2d(3, 1, 1, count_include_pad=False)
        s.mlp = nn.Sequential(nn.Conv2d(d, 4 * d, 1), nn.GELU(), nn.Conv2d(4 * d, d, 1))
        s.g1 = nn.Parameter(torch.full((d, 1, 1), 0.5))
        s.g2 = nn.Parameter(torch.full((d, 1, 1), 0.5))

    def forward(s, x):
        y = s.n1(x)
        x = x + s.g1 * (s.pool(y) - y)
        return x + s.g2 * s.mlp(s.n2(x))


class PoolFormer(nn.Module):
    """PoolFormer-S12-like (narrower): patch embeddings 7x7/4 then 3x3/2, [2, 2, 4, 2] blocks of
    GroupNorm(1) + (AvgPool3x3 - identity) token mixing + a 1x1 conv MLP with layer scales."""

    def __init__(s, dims=(48, 96, 192, 384), depth=(2, 2, 4, 2), classes=100):
        super().__init__()
        layers, c = [], 3
        for i, (d, n) in enumerate(zip(dims, depth)):
            k, st = (7, 4) if i == 0 else (3, 2)
            layers.append(nn.Conv2d(c, d, k, st, k // 2))
            layers += [PoolBlock(d) for _ in range(n)]
            c = d
        s.body = nn.Sequential(*layers)
        s.norm = nn.GroupNorm(1, c)
        s.head = nn.Linear(c, classes)

    def forward(s, x):
        return s.head(s.norm(s.body(x)).mean((2, 3)))


class Ghost(nn.Module):
    def __init__(s, i, o, relu=True):
        super().__init__()
        s.o = o
        h = math.ceil(o / 2)
        act = nn.ReLU if relu else None
        s.primary = conv_bn(i, h, 1, act=act)
        s.cheap = conv_bn(h, h, 3, g=h, act=act)

    def forward(s, x):
        y = s.primary(x)
        return torch.cat([y, s.cheap(y)], 1)[:, :s.o]


class GhostBottleneck(nn.Module):
    def __init__(s, i, mid, o, k, st, se):
        super().__init__()
        s.g1 = Ghost(i, mid)
        s.dw = conv_bn(mid, mid, k, st, g=mid, act=None) if st > 1 else nn.Identity()
        s.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(mid, mid // 4, 1), nn.ReLU(),
                             nn.Conv2d(mid // 4, mid, 1), nn.Hardsigmoid()) if se else None
        s.g2 = Ghost(mid, o, relu=False)
        s.short = (nn.Identity() if i == o and st == 1 else
                   nn.Sequential(conv_bn(i, i, k, st, g=i, act=None), conv_bn(i, o, 1, act=None)))

    def forward(s, x):
        y = s.dw(s.g1(x))
        if s.se is not None:
            y = y * s.se(y)
        return s.g2(y) + s.short(x)


class GhostNetLike(nn.Module):
    """GhostNet 1.0-like (fewer blocks): ghost bottlenecks (primary 1x1 conv concatenated with a
    depthwise 3x3 of it, sliced to the output width), hard-sigmoid squeeze-excite."""

    CFG = [(16, 16, 16, 3, 1, 0), (16, 48, 24, 3, 2, 0), (24, 72, 24, 3, 1, 0),
           (24, 72, 40, 5, 2, 1), (40, 120, 40, 5, 1, 1), (40, 240, 80, 3, 2, 0),
           (80, 200, 80, 3, 1, 0), (80, 480, 112, 3, 1, 1), (112, 672, 160, 5, 2, 1),
           (160, 960, 160, 5, 1, 1)]

    def __init__(s, classes=1000):
        super().__init__()
        s.stem = conv_bn(3, 16, 3, 2)
        s.blocks = nn.Sequential(*[GhostBottleneck(*c) for c in s.CFG])
        s.tail = conv_bn(160, 960, 1)
        s.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(960, 1280, 1), nn.ReLU(),
                               nn.Flatten(), nn.Linear(1280, classes))

    def forward(s, x):
        return s.head(s.tail(s.blocks(s.stem(x))))


class BnLinear(nn.Sequential):
    def __init__(s, i, o):
        super().__init__(nn.Linear(i, o, bias=False), nn.BatchNorm1d(o))

    def forward(s, x):  # [N, T, C]
        return s[1](s[0](x).flatten(0, 1)).reshape(x.shape[0], x.shape[1], -1)


class LevitAttention(nn.Module):
    def __init__(s, d, o, heads, kd, res, stride=1):
        super().__init__()
        s.heads, s.kd, s.vd, s.stride, s.res = heads, kd, 2 * kd, stride, res
        s.q = BnLinear(d, heads * kd)
        s.kv = BnLinear(d, heads * (kd + s.vd))
        s.proj = nn.Sequential(nn.Hardswish(), BnLinear(heads * s.vd, o))
        rq = (res - 1) // stride + 1
        s.rq = rq
        pts = [(i, j) for i in range(res) for j in range(res)]
        qpts = [(i * stride, j * stride) for i in range(rq) for j in range(rq)]
        offs, idx = {}, []
        for p in qpts:
            for q in pts:
                off = (abs(p[0] - q[0]), abs(p[1] - q[1]))
                idx.append(offs.setdefault(off, len(offs)))
        s.bias = nn.Parameter(torch.randn(heads, len(offs)) * 0.5)
        s.register_buffer("idx", torch.tensor(idx).reshape(len(qpts), len(pts)))

    def forward(s, x):  # [N, res*res, d]
        n, t, d = x.shape
        kv = s.kv(x).reshape(n, t, s.heads, -1).transpose(1, 2)
        k, v = kv.split([s.kd, s.vd], -1)
        if s.stride > 1:
            x = x.reshape(n, s.res, s.res, d)[:, ::s.stride, ::s.stride].reshape(n, -1, d)
        q = s.q(x).reshape(n, -1, s.heads, s.kd).transpose(1, 2)
        a = (q @ k.transpose(-1, -2)) * s.kd ** -0.5 + s.bias[:, s.idx]
        y = (a.softmax(-1) @ v).transpose(1, 2).reshape(n, q.shape[2], -1)
        return s.proj(y)


class LevitMlp(nn.Module):
    def __init__(s, d):
        super().__init__()
        s.a, s.b = BnLinear(d, 2 * d), BnLinear(2 * d, d)

    def forward(s, x):
        return s.b(F.hardswish(s.a(x)))


class LevitLike(nn.Module):
    """LeViT-128S-like: a 4-conv stride-16 stem with hard-swish, stages of attention whose
    linear layers carry batch norms and learned relative biases (gathered by an index table),
    shrinking attention (queries subsampled 2x) between stages, two BN-linear heads averaged."""

    def __init__(s, img=224, dims=(128, 256, 384), heads=(4, 6, 8), depth=(2, 3, 4), classes=1000):
        super().__init__()
        hs = nn.Hardswish
        s.stem = nn.Sequential(conv_bn(3, 16, 3, 2, act=hs), conv_bn(16, 32, 3, 2, act=hs),
                               conv_bn(32, 64, 3, 2, act=hs), conv_bn(64, dims[0], 3, 2, act=None))
        res = img // 16
        layers = []
        for i, d in enumerate(dims):
            for _ in range(depth[i]):
                layers += [Residual(LevitAttention(d, d, heads[i], 16, res)), Residual(LevitMlp(d))]
            if i + 1 < len(dims):
                layers.append(LevitAttention(d, dims[i + 1], d // 16, 16, res, stride=2))
                res = (res - 1) // 2 + 1
                layers.append(Residual(LevitMlp(dims[i + 1])))
        s.blocks = nn.Sequential(*layers)
        s.head = nn.Sequential(nn.BatchNorm1d(dims[-1]), nn.Linear(dims[-1], classes))
        s.dist = nn.Sequential(nn.BatchNorm1d(dims[-1]), nn.Linear(dims[-1], classes))

    def forward(s, x):
        x = s.blocks(s.stem(x).flatten(2).transpose(1, 2)).mean(1)
        return (s.head(x) + s.dist(x)) / 2


class Residual(nn.Module):
    def __init__(s, m):
        super().__init__()
        s.m = m

    def forward(s, x):
        return x + s.m(x)


class C2f(nn.Module):
    def __init__(s, i, o, n=1, short=True):
        super().__init__()
        s.c = o // 2
        s.cv1 = conv_bn(i, 2 * s.c, 1, act=nn.SiLU)
        s.m = nn.ModuleList(nn.Sequential(conv_bn(s.c, s.c, 3, act=nn.SiLU),
                                          conv_bn(s.c, s.c, 3, act=nn.SiLU)) for _ in range(n))
        s.short = short
        s.cv2 = conv_bn((2 + n) * s.c, o, 1, act=nn.SiLU)

    def forward(s, x):
        y = list(s.cv1(x).split((s.c, s.c), 1))
        for m in s.m:
            y.append(y[-1] + m(y[-1]) if s.short else m(y[-1]))
        return s.cv2(torch.cat(y, 1))


class Sppf(nn.Module):
    def __init__(s, i, o):
        super().__init__()
        s.cv1 = conv_bn(i, i // 2, 1, act=nn.SiLU)
        s.cv2 = conv_bn(i * 2, o, 1, act=nn.SiLU)
        s.pool = nn.MaxPool2d(5, 1, 2)

    def forward(s, x):
        x = s.cv1(x)
        y1 = s.pool(x)
        y2 = s.pool(y1)
        return s.cv2(torch.cat([x, y1, y2, s.pool(y2)], 1))


class YoloV8Like(nn.Module):
    """YOLOv8n-like backbone (stride-2 convs, C2f), SPPF, a PAN neck (nearest x2 Upsample,
    Concat, C2f without shortcuts, stride-2 convs back down) and 1x1 heads per level, flattened
    and concatenated to [N, 4 + classes, anchors]."""

    def __init__(s, w=(16, 32, 64, 128, 256), classes=20):
        super().__init__()
        si = nn.SiLU
        s.b0 = nn.Sequential(conv_bn(3, w[0], 3, 2, act=si), conv_bn(w[0], w[1], 3, 2, act=si),
                             C2f(w[1], w[1]), conv_bn(w[1], w[2], 3, 2, act=si), C2f(w[2], w[2], 2))
        s.b1 = nn.Sequential(conv_bn(w[2], w[3], 3, 2, act=si), C2f(w[3], w[3], 2))
        s.b2 = nn.Sequential(conv_bn(w[3], w[4], 3, 2, act=si), C2f(w[4], w[4]), Sppf(w[4], w[4]))
        s.up = nn.Upsample(scale_factor=2, mode="nearest")
        s.n1 = C2f(w[4] + w[3], w[3], short=False)
        s.n2 = C2f(w[3] + w[2], w[2], short=False)
        s.d1 = conv_bn(w[2], w[2], 3, 2, act=si)
        s.n3 = C2f(w[2] + w[3], w[3], short=False)
        s.d2 = conv_bn(w[3], w[3], 3, 2, act=si)
        s.n4 = C2f(w[3] + w[4], w[4], short=False)
        s.heads = nn.ModuleList(nn.Sequential(conv_bn(c, 64, 3, act=si), nn.Conv2d(64, 4 + classes, 1))
                                for c in (w[2], w[3], w[4]))

    def forward(s, x):
        p3 = s.b0(x)
        p4 = s.b1(p3)
        p5 = s.b2(p4)
        t4 = s.n1(torch.cat([s.up(p5), p4], 1))
        o3 = s.n2(torch.cat([s.up(t4), p3], 1))
        o4 = s.n3(torch.cat([s.d1(o3), t4], 1))
        o5 = s.n4(torch.cat([s.d2(o4), p5], 1))
        outs = [h(o).flatten(2) for h, o in zip(s.heads, (o3, o4, o5))]
        y = torch.cat(outs, 2)
        return torch.cat([y[:, :4], y[:, 4:].sigmoid()], 1)


class DemucsLike(nn.Module):
    """Demucs-v2-like (narrower, depth 4): encoder Conv1d(k8, s4) + ReLU + 1x1 Conv1d + GLU,
    a 2-layer bidirectional LSTM with a linear back to the width, a decoder of 1x1 Conv1d + GLU +
    ConvTranspose1d(k8, s4) with skip connections cropped to length; stereo in and 2x stereo out."""

    def __init__(s, ch=2, hidden=32, depth=4, sources=2):
        super().__init__()
        s.enc, s.dec = nn.ModuleList(), nn.ModuleList()
        c = ch
        for i in range(depth):
            h = hidden * 2 ** i
            s.enc.append(nn.Sequential(nn.Conv1d(c, h, 8, 4), nn.ReLU(), nn.Conv1d(h, 2 * h, 1),
                                       nn.GLU(1)))
            out = sources * ch if i == 0 else c
            s.dec.insert(0, nn.Sequential(nn.Conv1d(h, 2 * h, 3, 1, 1), nn.GLU(1),
                                          nn.ConvTranspose1d(h, out, 8, 4),
                                          nn.ReLU() if i > 0 else nn.Identity()))
            c = h
        s.lstm = nn.LSTM(c, c, 2, bidirectional=True)
        s.lin = nn.Linear(2 * c, c)

    def forward(s, x):  # [N, 2, T]
        skips = []
        for e in s.enc:
            x = e(x)
            skips.append(x)
        y = s.lstm(x.permute(2, 0, 1))[0]
        x = s.lin(y).permute(1, 2, 0)
        for d in s.dec:
            skip = skips.pop()
            x = d(x + skip[..., :x.shape[-1]])
        return x


class SepConv(nn.Sequential):
    def __init__(s, c):
        super().__init__(nn.Conv2d(c, c, 3, 1, 1, groups=c, bias=False), nn.Conv2d(c, c, 1, bias=False),
                         nn.BatchNorm2d(c))


class BiFpnLayer(nn.Module):
    def __init__(s, c, levels=5):
        super().__init__()
        s.levels = levels
        s.td_w = nn.Parameter(torch.rand(levels - 1, 2) + 0.5)
        s.out_w = nn.Parameter(torch.rand(levels - 1, 3) + 0.5)
        s.td = nn.ModuleList(SepConv(c) for _ in range(levels - 1))
        s.out = nn.ModuleList(SepConv(c) for _ in range(levels - 1))

    @staticmethod
    def fuse(w, xs):
        w = F.relu(w)
        w = w / (w.sum() + 1e-4)
        return F.silu(sum(w[i] * x for i, x in enumerate(xs)))

    def forward(s, ps):
        td = [ps[-1]]
        for i in range(s.levels - 2, -1, -1):
            up = F.interpolate(td[0], size=ps[i].shape[2:], mode="nearest")
            td.insert(0, s.td[i](s.fuse(s.td_w[i], [ps[i], up])))
        outs = [td[0]]
        for i in range(1, s.levels):
            down = F.max_pool2d(outs[-1], 3, 2, 1)
            xs = [ps[i], td[i], down] if i < s.levels - 1 else [ps[i], down]
            w = s.out_w[i - 1] if i < s.levels - 1 else s.out_w[i - 1, :2]
            outs.append(s.out[i - 1](s.fuse(w, xs)))
        return outs


class BiFpnDet(nn.Module):
    """EfficientDet-D0-like: a small conv backbone to strides 8..32, two extra levels by
    max-pooling (P3..P7), three BiFPN layers of fast normalized fusion, and shared depthwise-
    separable class and box heads, flattened and concatenated per level."""

    def __init__(s, c=64, classes=20, anchors=9):
        super().__init__()
        s.s8 = nn.Sequential(conv_bn(3, 24, 3, 2), conv_bn(24, 32, 3, 2), conv_bn(32, 48, 3, 2))
        s.s16 = conv_bn(48, 96, 3, 2)
        s.s32 = conv_bn(96, 192, 3, 2)
        s.lat = nn.ModuleList(conv_bn(i, c, 1, act=None) for i in (48, 96, 192))
        s.p6 = conv_bn(192, c, 1, act=None)
        s.bifpn = nn.Sequential(*[BiFpnLayer(c) for _ in range(3)])
        s.cls = nn.Sequential(SepConv(c), nn.SiLU(), SepConv(c), nn.SiLU(),
                              nn.Conv2d(c, anchors * classes, 1))
        s.box = nn.Sequential(SepConv(c), nn.SiLU(), nn.Conv2d(c, anchors * 4, 1))

    def forward(s, x):
        c3 = s.s8(x)
        c4 = s.s16(c3)
        c5 = s.s32(c4)
        p6 = F.max_pool2d(s.p6(c5), 3, 2, 1)
        ps = [l(c) for l, c in zip(s.lat, (c3, c4, c5))] + [p6, F.max_pool2d(p6, 3, 2, 1)]
        ps = s.bifpn(ps)
        cls = torch.cat([s.cls(p).flatten(2) for p in ps], 2).sigmoid()
        box = torch.cat([s.box(p).flatten(2) for p in ps], 2)
        return torch.cat([cls, box], 1)


class NerfLike(nn.Module):
    """NeRF's MLP (narrower): points [N, R, 3] and view directions encoded by Sin and Cos of
    2^k-scaled coordinates, 8 layers of 128 with a skip concatenation of the encoding, density
    and a view-dependent colour head (dynamic batch and rays)."""

    def __init__(s, w=128, freqs=10, dfreqs=4):
        super().__init__()
        s.register_buffer("f", 2.0 ** torch.arange(freqs) * math.pi)
        s.register_buffer("df", 2.0 ** torch.arange(dfreqs) * math.pi)
        e = 3 + 6 * freqs
        de = 3 + 6 * dfreqs
        s.l1 = nn.ModuleList([nn.Linear(e, w)] + [nn.Linear(w, w) for _ in range(3)])
        s.l2 = nn.ModuleList([nn.Linear(w + e, w)] + [nn.Linear(w, w) for _ in range(3)])
        s.sigma = nn.Linear(w, 1)
        s.feat = nn.Linear(w, w)
        s.rgb = nn.Sequential(nn.Linear(w + de, w // 2), nn.ReLU(), nn.Linear(w // 2, 3), nn.Sigmoid())

    @staticmethod
    def enc(x, f):
        a = (x.unsqueeze(-1) * f).flatten(-2)
        return torch.cat([x, torch.sin(a), torch.cos(a)], -1)

    def forward(s, x):  # [N, R, 6]: point, direction
        p = s.enc(x[..., :3], s.f)
        d = s.enc(F.normalize(x[..., 3:], dim=-1), s.df)
        h = p
        for l in s.l1:
            h = F.relu(l(h))
        h = torch.cat([h, p], -1)
        for l in s.l2:
            h = F.relu(l(h))
        sigma = F.softplus(s.sigma(h))
        return torch.cat([sigma, s.rgb(torch.cat([s.feat(h), d], -1))], -1)


class GraphNet(nn.Module):
    """A message-passing graph net (GIN/GCN-like) over a fixed random graph of 256 nodes and
    2048 edges: per layer, source features gathered with GatherElements, an edge MLP, messages
    summed per destination with ScatterElements(reduction=add) and divided by the in-degree;
    node features [2, 256, 32] (a fixed batch: torch 1.13 cannot export scatter_add with a dynamic
    one), graph readout by mean and max."""

    def __init__(s, nodes=256, edges=2048, d=32, hid=64, layers=3, classes=10):
        super().__init__()
        g = torch.Generator().manual_seed(7)
        src = torch.randint(0, nodes, (edges,), generator=g)
        dst = torch.randint(0, nodes, (edges,), generator=g)
        s.register_buffer("src", src)
        s.register_buffer("dst", dst)
        deg = torch.zeros(nodes).index_add_(0, dst, torch.ones(edges)).clamp(min=1)
        s.register_buffer("deg", deg.reshape(1, nodes, 1))
        s.nodes = nodes
        s.inp = nn.Linear(d, hid)
        s.msg = nn.ModuleList(nn.Sequential(nn.Linear(2 * hid, hid), nn.ReLU()) for _ in range(layers))
        s.upd = nn.ModuleList(nn.Sequential(nn.Linear(2 * hid, hid), nn.LayerNorm(hid), nn.ReLU())
                              for _ in range(layers))
        s.head = nn.Linear(2 * hid, classes)

    def forward(s, x):  # [N, V, d]
        h = s.inp(x)
        n, _, c = h.shape
        si = s.src.reshape(1, -1, 1).expand(n, -1, c)
        di = s.dst.reshape(1, -1, 1).expand(n, -1, c)
        for msg, upd in zip(s.msg, s.upd):
            hs = torch.gather(h, 1, si)
            hd = torch.gather(h, 1, di)
            m = msg(torch.cat([hs, hd], -1))
            agg = torch.zeros_like(h).scatter_add(1, di, m) / s.deg
            h = h + upd(torch.cat([h, agg], -1))
        return s.head(torch.cat([h.mean(1), h.amax(1)], -1))


class ByteModel(nn.Module):
    """A tokenizer-free byte-level classifier (CANINE/ByT5-flavoured, tiny): byte ids (0 = pad)
    embedded, positions counted by a CumSum over the non-padding mask, a strided Conv1d
    downsampling 4x, two transformer layers with a padding mask, masked mean pooling."""

    def __init__(s, d=128, heads=4, layers=2, classes=8, max_len=1024):
        super().__init__()
        s.emb = nn.Embedding(256, d)
        s.pos = nn.Embedding(max_len + 1, d)
        s.down = nn.Conv1d(d, d, 4, 4)
        s.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, heads, 4 * d, 0.0,
                                                                 batch_first=True), layers,
                                      enable_nested_tensor=False)
        s.head = nn.Linear(d, classes)

    def forward(s, ids):  # [N, T] int64, zeros at the end are padding
        mask = (ids != 0).to(torch.int32)
        pos = torch.cumsum(mask, 1) * mask
        x = s.emb(ids.to(torch.int32).long()) + s.pos(pos.long())
        x = s.down(x.transpose(1, 2)).transpose(1, 2)  # [N, T/4, d]
        keep = F.max_pool1d(mask.float().unsqueeze(1), 4, 4).squeeze(1)  # [N, T/4]
        x = s.enc(x, src_key_padding_mask=keep == 0)
        k = keep.unsqueeze(-1)
        return s.head((x * k).sum(1) / k.sum(1).clamp(min=1))


def byte_ids(shape):
    """Random bytes with the last eighth of each row padded (id 0)."""
    x = torch.randint(1, 256, shape, dtype=torch.int64)
    x[..., shape[-1] - shape[-1] // 8:] = 0
    return x


def rays(shape):
    return torch.randn(*shape) * 0.5


randn = third.randn
# name -> (builder, input name, example shape, input maker, dynamic axes of the input)
ZOO = {
    "segformer_like": (SegformerLike, "input", [1, 3, 256, 256], randn,
                       {0: "batch", 2: "height", 3: "width"}),
    "poolformer_s12_like": (PoolFormer, "input", [1, 3, 224, 224], randn, {0: "batch"}),
    "ghostnet_like": (GhostNetLike, "input", [1, 3, 224, 224], randn, {0: "batch"}),
    "levit_like": (LevitLike, "input", [1, 3, 224, 224], randn, {0: "batch"}),
    "yolov8_like": (YoloV8Like, "input", [1, 3, 320, 320], randn,
                    {0: "batch", 2: "height", 3: "width"}),
    "demucs_like": (DemucsLike, "input", [1, 2, 16384], randn, {0: "batch", 2: "time"}),
    "bifpn_det": (BiFpnDet, "input", [1, 3, 256, 256], randn,
                  {0: "batch", 2: "height", 3: "width"}),
    "swin_v2_t": (gz.tv("swin_v2_t"), "input", [1, 3, 256, 256], randn, {0: "batch"}),
    "regnet_y_800mf": (gz.tv("regnet_y_800mf"), "input", [1, 3, 224, 224], randn, {0: "batch"}),
    "nerf_like": (NerfLike, "input", [1, 4096, 6], rays, {0: "batch", 1: "rays"}),
    "graph_net": (GraphNet, "input", [2, 256, 32], randn, {}),
    "byte_model": (ByteModel, "input_ids", [1, 512], byte_ids, {0: "batch", 1: "seq"}),
}


def main():
    """gen_zoo's command line (OUT_DIR, --only, --list, zoo.json) over this zoo, exported by
    gen_zoo_third's export (calibrated batch norms, float64 reference)."""
    third.ZOO = ZOO
    gz.ZOO, gz.export = ZOO, third.export
    gz.main()


if __name__ == "__main__":
    main()

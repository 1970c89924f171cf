#!/usr/bin/env python3
"""A fourth zoo: thirteen more architectures none of the first three zoos has, exported like
gen_zoo_third.py (NAME.onnx, NAME.in0.npy, NAME.out0.npy, zoo.json; calibrated batch norms,
float64 references) so that tools/zoo.py can check and time them:

    /usr/bin/python3 tools/gen_zoo_fourth.py OUT_DIR [--only a,b] [--list] [--shared DIR]
    /usr/bin/python3 tools/zoo.py --zoo OUT_DIR --models '' --rounds 3

The zoos are a sample; the goal is every real model. This one samples what the others miss:
a LLaMA-style decoder (RMSNorm written as ops, rotary embeddings from Sin/Cos/Slice/Concat,
grouped-query attention through Expand, SiLU-gated MLP, a Where causal mask, dynamic seq), a
T5-style encoder (bucketed relative position bias: Log, Cast, Min, Where, Gather), a
Whisper-like audio encoder (Conv1d + GELU + attention, dynamic frames), a CRNN text recognizer
(HardSwish convs, bidirectional LSTM, per-step Linear + LogSoftmax, dynamic width), a YOLO-like
detector (SiLU, Split / Concat, nearest Upsample, SPPF, a box decode with Sigmoid / Exp and a
grid built from the dynamic H/W), PointNet (Conv1d 1x1, ReduceMax, input and feature
transforms through MatMul, batch 2), a DLRM-like recommender (bagged embedding Gather +
ReduceSum, pairwise-interaction MatMul, a triangle picked by Gather, dynamic batch),
MLP-Mixer, densenet169 at 160x192, squeezenet1_0, a MobileViT-like hybrid (6-D unfold / fold
around attention, dynamic H/W), a keyword-spotting depthwise-separable CNN on MFCCs (dynamic
frames), and an index-heavy block (TopK with a dynamic k, GatherElements, ScatterElements,
ScatterND, Where, Expand, Tile, slices sized from the shape). Random weights with the zoo's
seed and opset 17; small inputs (each runs in well under a second). Uses gen_zoo_third's
helpers (and through it gen_zoo.py: --shared DIR, default ../shared/models) and Debian's
python3-torch / torchvision / onnx.

What it found (2026-11-26, main 61448be): densenet169's last dense block concatenates 33
tensors, and the 34-buffer Concat kernel compiled but the JIT (at most 32 buffers) refused it
at load, on both back ends (fixed: compiler/passes/wide_nodes.h, and fusion keeps groups within
the limit). Every other model was correct on both back ends at its reference shape and at a
second shape of every dynamic dim against ORT.
"""
import math

import gen_zoo_third as third  # noqa: F401  (handles --shared, puts gen_zoo.py on the path)
import gen_zoo as gz
import torch

nn = torch.nn
F = torch.nn.functional


def rms_norm(x, w, eps=1e-6):
    """RMSNorm written as the ops exporters emit (Pow, ReduceMean, Add, Sqrt, Div, Mul)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def attention(q, k, v, scale, bias=None):
    """softmax(q k^T * scale + bias) v on [batch, heads, seq, dim] as plain MatMul / Softmax."""
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if bias is not None:
        s = s + bias
    return torch.matmul(s.softmax(-1), v)


def split_heads(x, heads):
    b, s, d = x.shape
    return x.view(b, s, heads, d // heads).transpose(1, 2)


def merge_heads(x):
    b, h, s, d = x.shape
    return x.transpose(1, 2).reshape(b, s, h * d)


class LlamaBlock(nn.Module):
    def __init__(s, d, heads, kv_heads, ffn):
        super().__init__()
        s.heads, s.kv_heads, s.hd = heads, kv_heads, d // heads
        s.n1 = nn.Parameter(1 + 0.1 * torch.randn(d))
        s.n2 = nn.Parameter(1 + 0.1 * torch.randn(d))
        s.q = nn.Linear(d, d, bias=False)
        s.k = nn.Linear(d, kv_heads * s.hd, bias=False)
        s.v = nn.Linear(d, kv_heads * s.hd, bias=False)
        s.o = nn.Linear(d, d, bias=False)
        s.gate = nn.Linear(d, ffn, bias=False)
        s.up = nn.Linear(d, ffn, bias=False)
        s.down = nn.Linear(ffn, d, bias=False)

    def repeat_kv(s, x):
        b, h, n, hd = x.shape
        rep = s.heads // s.kv_heads
        return x[:, :, None].expand(b, h, rep, n, hd).reshape(b, h * rep, n, hd)

    def forward(s, x, cos, sin, mask):
        h = rms_norm(x, s.n1)
        q, k, v = split_heads(s.q(h), s.heads), split_heads(s.k(h), s.kv_heads), \
            split_heads(s.v(h), s.kv_heads)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        a = attention(q, s.repeat_kv(k), s.repeat_kv(v), s.hd ** -0.5, mask)
        x = x + s.o(merge_heads(a))
        h = rms_norm(x, s.n2)
        return x + s.down(F.silu(s.gate(h)) * s.up(h))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], -1)


class Llama(nn.Module):
    """LLaMA-style decoder: RMSNorm, rotary positions computed from the dynamic sequence length,
    grouped-query attention (4 query heads share 2 key/value heads), SiLU-gated MLP, a causal
    mask made with Where, and an untied LM head."""

    def __init__(s, vocab=2000, d=128, heads=4, kv_heads=2, ffn=344, layers=3):
        super().__init__()
        s.hd = d // heads
        s.tok = nn.Embedding(vocab, d)
        s.blocks = nn.ModuleList(LlamaBlock(d, heads, kv_heads, ffn) for _ in range(layers))
        s.norm = nn.Parameter(1 + 0.1 * torch.randn(d))
        s.head = nn.Linear(d, vocab, bias=False)

    def forward(s, ids):
        x = s.tok(ids)
        seq = ids.shape[1]
        inv = 1.0 / (10000 ** (torch.arange(0, s.hd, 2, dtype=x.dtype) / s.hd))
        freqs = torch.arange(seq, dtype=x.dtype)[:, None] * inv[None, :]
        emb = torch.cat([freqs, freqs], -1)
        cos, sin = emb.cos(), emb.sin()
        pos = torch.arange(seq)
        mask = torch.where(pos[None, :] > pos[:, None], torch.tensor(float("-inf"), dtype=x.dtype),
                           torch.tensor(0.0, dtype=x.dtype))
        for b in s.blocks:
            x = b(x, cos, sin, mask)
        return s.head(rms_norm(x, s.norm))


class T5Encoder(nn.Module):
    """T5-style encoder: RMS layer norm without mean, unscaled attention with a bidirectional
    bucketed relative position bias shared by all layers, ReLU feed-forward."""

    def __init__(s, vocab=3000, d=128, heads=4, ffn=512, layers=3, buckets=32, max_distance=128):
        super().__init__()
        s.heads, s.buckets, s.max_distance = heads, buckets, max_distance
        s.tok = nn.Embedding(vocab, d)
        s.rel = nn.Embedding(buckets, heads)
        s.layers = nn.ModuleList()
        for _ in range(layers):
            s.layers.append(nn.ModuleDict(dict(
                qkv=nn.Linear(d, 3 * d, bias=False), o=nn.Linear(d, d, bias=False),
                wi=nn.Linear(d, ffn, bias=False), wo=nn.Linear(ffn, d, bias=False))))
        s.norms = nn.Parameter(1 + 0.1 * torch.randn(2 * layers + 1, d))

    def bucket(s, rel):
        """HF T5's _relative_position_bucket (bidirectional); log(0) = -inf is cast and then
        dropped by the Where, as in the exported HF model."""
        half = s.buckets // 2
        out = (rel > 0).long() * half
        n = rel.abs()
        exact = half // 2
        large = exact + (torch.log(n.float() / exact) / math.log(s.max_distance / exact)
                         * (half - exact)).long()
        large = torch.min(large, torch.full_like(large, half - 1))
        return out + torch.where(n < exact, n, large)

    def forward(s, ids):
        x = s.tok(ids)
        seq = ids.shape[1]
        pos = torch.arange(seq)
        bias = s.rel(s.bucket(pos[None, :] - pos[:, None])).permute(2, 0, 1)[None]
        for i, l in enumerate(s.layers):
            h = rms_norm(x, s.norms[2 * i])
            q, k, v = (split_heads(t, s.heads) for t in l["qkv"](h).chunk(3, -1))
            x = x + l["o"](merge_heads(attention(q, k, v, 1.0, bias)))
            x = x + l["wo"](F.relu(l["wi"](rms_norm(x, s.norms[2 * i + 1]))))
        return rms_norm(x, s.norms[-1])


class WhisperEncoder(nn.Module):
    """Whisper-like audio encoder: two Conv1d + GELU (the second halves the frames), a
    sinusoidal position table sliced to the length, pre-LN attention blocks (keys without bias)
    with GELU MLPs, a final LayerNorm."""

    def __init__(s, mels=80, d=192, heads=4, layers=3, max_frames=1500):
        super().__init__()
        s.heads = heads
        s.c1 = nn.Conv1d(mels, d, 3, padding=1)
        s.c2 = nn.Conv1d(d, d, 3, stride=2, padding=1)
        inv = torch.exp(-math.log(10000) * torch.arange(d // 2) / (d // 2 - 1))
        t = torch.arange(max_frames)[:, None] * inv[None, :]
        s.register_buffer("pos", torch.cat([t.sin(), t.cos()], 1))
        s.blocks = nn.ModuleList()
        for _ in range(layers):
            s.blocks.append(nn.ModuleDict(dict(
                ln1=nn.LayerNorm(d), q=nn.Linear(d, d), k=nn.Linear(d, d, bias=False),
                v=nn.Linear(d, d), o=nn.Linear(d, d), ln2=nn.LayerNorm(d),
                fc1=nn.Linear(d, 4 * d), fc2=nn.Linear(4 * d, d))))
        s.ln = nn.LayerNorm(d)

    def forward(s, mel):
        x = F.gelu(s.c2(F.gelu(s.c1(mel)))).transpose(1, 2)
        x = x + s.pos[:x.shape[1]]
        hd = x.shape[-1] // s.heads
        for b in s.blocks:
            h = b["ln1"](x)
            q, k, v = (split_heads(b[n](h), s.heads) for n in ("q", "k", "v"))
            x = x + b["o"](merge_heads(attention(q, k, v, hd ** -0.5)))
            x = x + b["fc2"](F.gelu(b["fc1"](b["ln2"](x))))
        return s.ln(x)


def conv_bn(i, o, k=3, stride=1, act=nn.ReLU, groups=1, padding=None):
    return nn.Sequential(nn.Conv2d(i, o, k, stride, k // 2 if padding is None else padding,
                                   groups=groups, bias=False), nn.BatchNorm2d(o), act())


class Crnn(nn.Module):
    """CRNN text recognizer: HardSwish conv stack that pools the height to 1, a 2-layer
    bidirectional LSTM over the width, per-step Linear + LogSoftmax over 80 symbols."""

    def __init__(s, symbols=80, hidden=96):
        super().__init__()
        hs = nn.Hardswish
        s.cnn = nn.Sequential(
            conv_bn(1, 32, act=hs), nn.MaxPool2d(2), conv_bn(32, 64, act=hs), nn.MaxPool2d(2),
            conv_bn(64, 96, act=hs), conv_bn(96, 96, act=hs), nn.MaxPool2d((2, 1)),
            conv_bn(96, 128, act=hs), nn.MaxPool2d((2, 1)), conv_bn(128, 128, k=(2, 1),
                                                                    padding=0, act=hs))
        s.rnn = nn.LSTM(128, hidden, num_layers=2, bidirectional=True, batch_first=True)
        s.fc = nn.Linear(2 * hidden, symbols)

    def forward(s, x):
        f = s.cnn(x).squeeze(2).permute(0, 2, 1)
        h, _ = s.rnn(f)
        return s.fc(h).log_softmax(-1)


class C2f(nn.Module):
    """YOLOv8's C2f: 1x1 conv, Split in two, bottlenecks on the second half, Concat of all."""

    def __init__(s, i, o, n=1):
        super().__init__()
        c = s.c = o // 2
        s.cv1 = conv_bn(i, 2 * c, 1, act=nn.SiLU)
        s.m = nn.ModuleList(nn.Sequential(conv_bn(c, c, act=nn.SiLU), conv_bn(c, c, act=nn.SiLU))
                            for _ in range(n))
        s.cv2 = conv_bn((2 + n) * c, o, 1, act=nn.SiLU)

    def forward(s, x):
        ys = list(s.cv1(x).split((s.c, s.c), 1))
        for m in s.m:
            ys.append(ys[-1] + m(ys[-1]))
        return s.cv2(torch.cat(ys, 1))


class Sppf(nn.Module):
    def __init__(s, c):
        super().__init__()
        s.cv1, s.cv2 = conv_bn(c, c // 2, 1, act=nn.SiLU), conv_bn(2 * c, c, 1, act=nn.SiLU)

    def forward(s, x):
        x = s.cv1(x)
        a = F.max_pool2d(x, 5, 1, 2)
        b = F.max_pool2d(a, 5, 1, 2)
        return s.cv2(torch.cat([x, a, b, F.max_pool2d(b, 5, 1, 2)], 1))


class Yolo(nn.Module):
    """YOLO-like detector: SiLU C2f backbone with SPPF, a top-down neck (nearest Upsample,
    Concat), anchor heads on strides 8/16/32 decoded in the graph (sigmoid offsets plus a grid
    built from the dynamic H/W, exp sizes times anchors), all boxes concatenated."""

    ANCHORS = [[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119], [116, 90, 156, 198, 373, 326]]

    def __init__(s, classes=10):
        super().__init__()
        s.no = classes + 5
        cs = nn.SiLU
        s.p3 = nn.Sequential(conv_bn(3, 16, 3, 2, cs), conv_bn(16, 32, 3, 2, cs), C2f(32, 32),
                             conv_bn(32, 64, 3, 2, cs), C2f(64, 64, 2))
        s.p4 = nn.Sequential(conv_bn(64, 128, 3, 2, cs), C2f(128, 128, 2))
        s.p5 = nn.Sequential(conv_bn(128, 128, 3, 2, cs), C2f(128, 128), Sppf(128))
        s.n4, s.n3 = C2f(256, 128), C2f(192, 64)
        s.heads = nn.ModuleList(nn.Conv2d(c, 3 * s.no, 1) for c in (64, 128, 128))
        s.register_buffer("anchors", torch.tensor(s.ANCHORS, dtype=torch.float32).view(3, 1, 3, 1,
                                                                                       1, 2))

    def decode(s, p, i, stride):
        b, _, h, w = p.shape
        p = p.view(b, 3, s.no, h, w).permute(0, 1, 3, 4, 2)
        gy, gx = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        grid = torch.stack((gx, gy), 2).view(1, 1, h, w, 2).to(p.dtype)
        xy = (p[..., :2].sigmoid() * 2 - 0.5 + grid) * stride
        wh = p[..., 2:4].exp() * s.anchors[i]
        return torch.cat([xy, wh, p[..., 4:].sigmoid()], -1).view(b, -1, s.no)

    def forward(s, x):
        p3 = s.p3(x)
        p4 = s.p4(p3)
        p5 = s.p5(p4)
        n4 = s.n4(torch.cat([F.interpolate(p5, scale_factor=2.0, mode="nearest"), p4], 1))
        n3 = s.n3(torch.cat([F.interpolate(n4, scale_factor=2.0, mode="nearest"), p3], 1))
        return torch.cat([s.decode(h(f), i, 8 * 2 ** i)
                          for i, (h, f) in enumerate(zip(s.heads, (n3, n4, p5)))], 1)


def conv1d_bn(i, o):
    return nn.Sequential(nn.Conv1d(i, o, 1), nn.BatchNorm1d(o), nn.ReLU())


class TNet(nn.Module):
    """PointNet's k x k transform regressor: shared 1x1 convs, max over points, MLP, + I."""

    def __init__(s, k):
        super().__init__()
        s.k = k
        s.f = nn.Sequential(conv1d_bn(k, 64), conv1d_bn(64, 128), conv1d_bn(128, 256))
        s.mlp = nn.Sequential(nn.Linear(256, 128), nn.BatchNorm1d(128), nn.ReLU(),
                              nn.Linear(128, k * k))

    def forward(s, x):
        t = s.mlp(s.f(x).amax(2)).view(-1, s.k, s.k)
        return t + torch.eye(s.k, dtype=x.dtype)


class PointNet(nn.Module):
    """PointNet classifier on [batch, 3, points]: input and feature transforms applied by
    MatMul, shared 1x1 Conv1d, ReduceMax over points, MLP head, LogSoftmax."""

    def __init__(s, classes=16):
        super().__init__()
        s.t3, s.t64 = TNet(3), TNet(64)
        s.c1 = conv1d_bn(3, 64)
        s.c2 = nn.Sequential(conv1d_bn(64, 128), nn.Conv1d(128, 512, 1), nn.BatchNorm1d(512))
        s.head = nn.Sequential(nn.Linear(512, 256), nn.BatchNorm1d(256), nn.ReLU(),
                               nn.Linear(256, 128), nn.BatchNorm1d(128), nn.ReLU(),
                               nn.Linear(128, classes))

    def forward(s, x):
        x = torch.matmul(s.t3(x).transpose(1, 2), x)
        x = s.c1(x)
        x = torch.matmul(s.t64(x).transpose(1, 2), x)
        return s.head(s.c2(x).amax(2)).log_softmax(-1)


class Dlrm(nn.Module):
    """DLRM-like click model on ids [batch, fields, bag]: dense features derived from the ids
    (Mod, Cast) through a bottom MLP, one embedding table with per-field offsets summed over
    each bag, pairwise dot products by MatMul, its strict lower triangle picked by Gather,
    top MLP and Sigmoid."""

    def __init__(s, fields=8, vocab=1000, d=32):
        super().__init__()
        s.vocab = vocab
        s.table = nn.Embedding(fields * vocab, d)
        s.register_buffer("offsets", torch.arange(fields) * vocab)
        s.bottom = nn.Sequential(nn.Linear(fields, 64), nn.ReLU(), nn.Linear(64, d), nn.ReLU())
        n = fields + 1
        li, lj = torch.tril_indices(n, n, -1)
        s.register_buffer("pairs", li * n + lj)
        s.top = nn.Sequential(nn.Linear(d + len(li), 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(),
                              nn.Linear(32, 1))

    def forward(s, ids):
        dense = (ids[:, :, 0] % 97).to(s.table.weight.dtype) / 97.0
        bot = s.bottom(dense)
        e = s.table(ids + s.offsets[None, :, None]).sum(2)
        t = torch.cat([bot[:, None], e], 1)
        z = torch.matmul(t, t.transpose(1, 2)).flatten(1)[:, s.pairs]
        return torch.sigmoid(s.top(torch.cat([bot, z], 1)))


class MlpMixer(nn.Module):
    """MLP-Mixer: patch embedding, token-mixing MLPs across the transposed tokens and
    channel-mixing MLPs, LayerNorm, GELU, mean pooling."""

    def __init__(s, patch=16, tokens=100, d=192, tok_hidden=96, ch_hidden=768, layers=4,
                 classes=100):
        super().__init__()
        s.embed = nn.Conv2d(3, d, patch, patch)
        s.layers = nn.ModuleList()
        for _ in range(layers):
            s.layers.append(nn.ModuleDict(dict(
                ln1=nn.LayerNorm(d), t1=nn.Linear(tokens, tok_hidden), t2=nn.Linear(tok_hidden, tokens),
                ln2=nn.LayerNorm(d), c1=nn.Linear(d, ch_hidden), c2=nn.Linear(ch_hidden, d))))
        s.ln = nn.LayerNorm(d)
        s.head = nn.Linear(d, classes)

    def forward(s, x):
        x = s.embed(x).flatten(2).transpose(1, 2)
        for l in s.layers:
            y = l["ln1"](x).transpose(1, 2)
            x = x + l["t2"](F.gelu(l["t1"](y))).transpose(1, 2)
            x = x + l["c2"](F.gelu(l["c1"](l["ln2"](x))))
        return s.head(s.ln(x).mean(1))


class InvRes(nn.Module):
    """MobileNetV2 inverted residual with SiLU (MobileViT's MV2 block)."""

    def __init__(s, i, o, stride, expand=4):
        super().__init__()
        h = i * expand
        s.res = stride == 1 and i == o
        s.f = nn.Sequential(conv_bn(i, h, 1, act=nn.SiLU), conv_bn(h, h, 3, stride, nn.SiLU, h),
                            nn.Conv2d(h, o, 1, bias=False), nn.BatchNorm2d(o))

    def forward(s, x):
        return x + s.f(x) if s.res else s.f(x)


class MobileVitBlock(nn.Module):
    """Local 3x3 + 1x1 convs, unfold into 2x2 patches (6-D Reshape / Transpose), pre-LN
    attention with SiLU MLP across patches, fold back, 1x1 conv, Concat with the input, 3x3."""

    def __init__(s, c, d, layers=2, heads=4):
        super().__init__()
        s.heads = heads
        s.local = nn.Sequential(conv_bn(c, c, 3, act=nn.SiLU), nn.Conv2d(c, d, 1, bias=False))
        s.layers = nn.ModuleList()
        for _ in range(layers):
            s.layers.append(nn.ModuleDict(dict(
                ln1=nn.LayerNorm(d), qkv=nn.Linear(d, 3 * d), o=nn.Linear(d, d),
                ln2=nn.LayerNorm(d), f1=nn.Linear(d, 2 * d), f2=nn.Linear(2 * d, d))))
        s.ln = nn.LayerNorm(d)
        s.proj = conv_bn(d, c, 1, act=nn.SiLU)
        s.fuse = conv_bn(2 * c, c, 3, act=nn.SiLU)

    def forward(s, x):
        y = s.local(x)
        b, d, h, w = y.shape
        t = y.reshape(b, d, h // 2, 2, w // 2, 2).permute(0, 3, 5, 2, 4, 1)
        t = t.reshape(b * 4, (h // 2) * (w // 2), d)
        for l in s.layers:
            q, k, v = (split_heads(u, s.heads) for u in l["qkv"](l["ln1"](t)).chunk(3, -1))
            t = t + l["o"](merge_heads(attention(q, k, v, (d // s.heads) ** -0.5)))
            t = t + l["f2"](F.silu(l["f1"](l["ln2"](t))))
        t = s.ln(t).reshape(b, 2, 2, h // 2, w // 2, d).permute(0, 5, 3, 1, 4, 2)
        y = s.proj(t.reshape(b, d, h, w))
        return s.fuse(torch.cat([x, y], 1))


class MobileVit(nn.Module):
    def __init__(s, classes=100):
        super().__init__()
        s.f = nn.Sequential(conv_bn(3, 16, 3, 2, nn.SiLU), InvRes(16, 16, 1), InvRes(16, 32, 2),
                            InvRes(32, 32, 1), InvRes(32, 48, 2), MobileVitBlock(48, 64),
                            InvRes(48, 64, 2), MobileVitBlock(64, 80), InvRes(64, 80, 2),
                            MobileVitBlock(80, 96), conv_bn(80, 320, 1, act=nn.SiLU))
        s.head = nn.Linear(320, classes)

    def forward(s, x):
        return s.head(s.f(x).mean((2, 3)))


class DsCnn(nn.Module):
    """Keyword spotting DS-CNN on MFCCs [batch, 1, frames, 10]: a strided 10x4 conv, four
    depthwise-separable blocks, global average pooling, 12 keywords."""

    def __init__(s, c=64, keywords=12):
        super().__init__()
        layers = [conv_bn(1, c, (10, 4), (2, 2), padding=(5, 1))]
        for _ in range(4):
            layers += [conv_bn(c, c, 3, groups=c), conv_bn(c, c, 1)]
        s.f = nn.Sequential(*layers)
        s.fc = nn.Linear(c, keywords)

    def forward(s, x):
        return s.fc(F.adaptive_avg_pool2d(s.f(x), 1).flatten(1))


class IndexMix(nn.Module):
    """The index ops the other zoos lack, on tokens [batch, n, d]: TopK with k = n // 2,
    GatherElements of the picked rows (indices Expanded over d), a ScatterElements mask, Where,
    Tile of a pooled row, a slice whose end follows n, and ScatterND writing the last row."""

    def __init__(s, d=64, out=16):
        super().__init__()
        s.proj = nn.Linear(d, d)
        s.score = nn.Linear(d, 1)
        s.head = nn.Linear(d, out)

    def forward(s, x):
        b, n, d = x.shape
        h = s.proj(x)
        score = s.score(h).squeeze(-1)
        top, idx = score.topk(n // 2, dim=1)
        sel = torch.gather(h, 1, idx.unsqueeze(-1).expand(-1, -1, d)) * top.sigmoid().unsqueeze(-1)
        picked = torch.zeros_like(score).scatter(1, idx, 1.0)
        h = torch.where(picked.unsqueeze(-1) > 0, h, 0.1 * h)
        h = h + sel.mean(1, keepdim=True).repeat(1, n, 1)
        h = h.clone()
        h[:, -1] = h[:, : n // 2].mean(1)
        return s.head(h)


def ids_from(low, high):
    return lambda shape: torch.randint(low, high, shape, dtype=torch.int64)


randn = third.randn
# name -> (builder, input name, example shape, input maker, dynamic axes of the input)
ZOO = {
    "llama_decoder": (Llama, "input_ids", [1, 32], ids_from(0, 2000), {0: "batch", 1: "seq"}),
    "t5_encoder": (T5Encoder, "input_ids", [1, 40], ids_from(0, 3000), {0: "batch", 1: "seq"}),
    "whisper_encoder": (WhisperEncoder, "input", [1, 80, 300], randn, {0: "batch", 2: "frames"}),
    "crnn_ocr": (Crnn, "input", [1, 1, 32, 160], randn, {0: "batch", 3: "width"}),
    "yolo_like": (Yolo, "input", [1, 3, 192, 256], randn, {0: "batch", 2: "height", 3: "width"}),
    "pointnet": (PointNet, "input", [2, 3, 1024], randn, {0: "batch", 2: "points"}),
    "dlrm_like": (Dlrm, "input_ids", [16, 8, 3], ids_from(0, 1000), {0: "batch"}),
    "mlp_mixer": (MlpMixer, "input", [1, 3, 160, 160], randn, {0: "batch"}),
    "densenet169": (gz.tv("densenet169"), "input", [1, 3, 160, 192], randn, {0: "batch"}),
    "squeezenet1_0": (gz.tv("squeezenet1_0"), "input", [1, 3, 224, 224], randn, {0: "batch"}),
    "mobilevit_like": (MobileVit, "input", [1, 3, 128, 192], randn,
                       {0: "batch", 2: "height", 3: "width"}),
    "kws_dscnn": (DsCnn, "input", [1, 1, 49, 10], randn, {0: "batch", 2: "frames"}),
    "index_mix": (IndexMix, "input", [1, 64, 64], randn, {0: "batch", 1: "tokens"}),
}


def main():
    """gen_zoo's command line (OUT_DIR, --only, --list, zoo.json) over this zoo, exported by
    gen_zoo_third's export (calibrated batch norms, float64 reference)."""
    third.ZOO = ZOO
    gz.ZOO, gz.export = ZOO, third.export
    gz.main()


if __name__ == "__main__":
    main()

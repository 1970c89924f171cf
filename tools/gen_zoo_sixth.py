#!/usr/bin/env python3
"""A sixth zoo: twelve architectures none of the first five zoos has, exported like
gen_zoo_third.py (NAME.onnx, NAME.in0.npy, NAME.out0.npy, zoo.json; calibrated batch norms,
float64 references) so that tools/zoo.py can check and time them:

    /usr/bin/python3 tools/gen_zoo_sixth.py OUT_DIR [--only a,b] [--list] [--shared DIR]
    /usr/bin/python3 tools/zoo.py --zoo OUT_DIR --models '' --rounds 3

The zoos are a sample; the goal is every real model. This one samples: a (2+1)-D video net
(torchvision's r2plus1d_18: every 3x3x3 convolution factored into 1x3x3 then 3x1x1, on a short
clip); a Conformer encoder (a strided Conv2d subsampler, macaron half-step feed-forwards, self-
attention, a convolution module of pointwise Conv1d, GLU, a depthwise Conv1d of kernel 15,
BatchNorm and SiLU; dynamic frames); a GRU encoder-decoder with Luong attention (ONNX GRU, the
decoder teacher-forced on the shifted ids; dynamic seq); a RepVGG-like plain net in its training
form (3x3 + 1x1 + identity batch-normed branches summed); a DETR-like detector (a small conv
backbone, a transformer encoder, a decoder whose learned queries cross-attend to it, class
softmax and sigmoid boxes concatenated); a Perceiver-like classifier (learned latents cross-
attending to a long input array with Fourier position features; dynamic length); an ESRGAN-like
super-resolution net (residual-in-residual dense blocks: five-way dense concatenations scaled by
0.2, LeakyReLU 0.2, two nearest x2 upsamplings; dynamic batch and H/W); torchvision's
efficientnet_b3; a tiny mixture-of-experts transformer whose top-2 router dispatches tokens
through TopK, NonZero, Gather and ScatterND (data-dependent shapes); and a MobileOne-like net
(over-parameterized depthwise / pointwise branches) with dynamic batch and H/W. Random weights
with the zoo's seed and opset 17. Two more: a spatial transformer classifier (GridSample on
a sampling grid written out as affine_grid computes it) and a DGCNN-like point net (a kNN graph
per layer by TopK over pairwise distances, index arithmetic into a flattened Gather; dynamic
batch and points). Uses gen_zoo_third's helpers (and through it gen_zoo.py: --shared DIR,
default ../shared/models) and Debian's python3-torch / torchvision / onnx. torchaudio is not
installed here (its Conformer is written out by hand below).

What it found (2026-11-27, main 88dca81): all 12 correct on both back ends, at the reference
shape and at a second shape of every dynamic dim (and at 1 element: one token through the MoE,
whose NonZero then selects nothing for two experts). Every model within 1.13x of ONNX Runtime
except dgcnn_like (1.48x at 1 thread, 1.36x at 2): TopK (k=10 over rows of 512) was 43% of it,
O(n * k) per row; fixed in compiler/lower/indexing.cc (one comparison with the last kept value).
"""
import math

import gen_zoo_third as third  # noqa: F401  (handles --shared, puts gen_zoo.py on the path)
import gen_zoo as gz
import torch
import torchvision

nn = torch.nn
F = torch.nn.functional


class ConformerBlock(nn.Module):
    def __init__(s, d, heads, k=15):
        super().__init__()

        def ffn():
            return nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.SiLU(),
                                 nn.Linear(4 * d, d))

        s.ff1, s.ff2 = ffn(), ffn()
        s.attn_norm = nn.LayerNorm(d)
        s.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        s.conv_norm = nn.LayerNorm(d)
        s.pw1 = nn.Conv1d(d, 2 * d, 1)
        s.dw = nn.Conv1d(d, d, k, padding=k // 2, groups=d)
        s.bn = nn.BatchNorm1d(d)
        s.pw2 = nn.Conv1d(d, d, 1)
        s.out_norm = nn.LayerNorm(d)

    def forward(s, x):
        x = x + 0.5 * s.ff1(x)
        h = s.attn_norm(x)
        x = x + s.attn(h, h, h, need_weights=False)[0]
        h = s.conv_norm(x).transpose(1, 2)
        h = s.pw2(F.silu(s.bn(s.dw(F.glu(s.pw1(h), dim=1)))))
        x = x + h.transpose(1, 2)
        x = x + 0.5 * s.ff2(x)
        return s.out_norm(x)


class Conformer(nn.Module):
    """A Conformer encoder on log-mel features [N, 80, T]: two stride-2 Conv2d (x4 in time and
    frequency), a projection, three Conformer blocks, a CTC-style classifier per frame."""

    def __init__(s, mels=80, c=64, d=144, heads=4, blocks=3, vocab=64):
        super().__init__()
        s.sub = nn.Sequential(nn.Conv2d(1, c, 3, 2), nn.ReLU(), nn.Conv2d(c, c, 3, 2), nn.ReLU())
        f = ((mels - 1) // 2 - 1) // 2
        s.proj = nn.Linear(c * f, d)
        s.blocks = nn.ModuleList(ConformerBlock(d, heads) for _ in range(blocks))
        s.head = nn.Linear(d, vocab)

    def forward(s, x):
        h = s.sub(x.unsqueeze(1))  # [N, c, F', T']
        n, c, f, t = h.shape
        h = s.proj(h.permute(0, 3, 1, 2).reshape(n, t, c * f))
        for b in s.blocks:
            h = b(h)
        return F.log_softmax(s.head(h), dim=-1)


class GruSeq2Seq(nn.Module):
    """A GRU encoder-decoder (2-layer bidirectional encoder, 1-layer decoder teacher-forced on
    the ids shifted right) with Luong dot attention over the encoder's outputs."""

    def __init__(s, vocab=2000, d=128, h=128):
        super().__init__()
        s.emb = nn.Embedding(vocab, d)
        s.enc = nn.GRU(d, h, num_layers=2, bidirectional=True, batch_first=True)
        s.bridge = nn.Linear(2 * h, h)
        s.dec = nn.GRU(d, h, batch_first=True)
        s.key = nn.Linear(2 * h, h, bias=False)
        s.comb = nn.Linear(3 * h, h)
        s.out = nn.Linear(h, vocab)

    def forward(s, ids):
        mem, _ = s.enc(s.emb(ids))  # [N, T, 2h]
        h0 = torch.tanh(s.bridge(mem.mean(1))).unsqueeze(0)
        shifted = F.pad(ids[:, :-1], (1, 0), value=1)  # BOS = 1
        q, _ = s.dec(s.emb(shifted), h0)  # [N, T, h]
        att = torch.softmax(q @ s.key(mem).transpose(1, 2), -1)  # [N, T, T]
        ctx = att @ mem
        return s.out(torch.tanh(s.comb(torch.cat([q, ctx], -1))))


class RepVggBlock(nn.Module):
    """RepVGG's training-time block: BN(3x3) + BN(1x1) + BN(identity), ReLU."""

    def __init__(s, i, o, stride):
        super().__init__()
        s.k3 = nn.Sequential(nn.Conv2d(i, o, 3, stride, 1, bias=False), nn.BatchNorm2d(o))
        s.k1 = nn.Sequential(nn.Conv2d(i, o, 1, stride, 0, bias=False), nn.BatchNorm2d(o))
        s.id = nn.BatchNorm2d(o) if i == o and stride == 1 else None

    def forward(s, x):
        y = s.k3(x) + s.k1(x)
        if s.id is not None:
            y = y + s.id(x)
        return F.relu(y)


class RepVgg(nn.Module):
    """RepVGG-A0-like widths (48, 48, 96, 192, 384; 1, 2, 4, 8, 1 blocks)."""

    def __init__(s, widths=(48, 48, 96, 192, 384), depths=(1, 2, 4, 8, 1), classes=100):
        super().__init__()
        layers, c = [], 3
        for w, n in zip(widths, depths):
            for j in range(n):
                layers.append(RepVggBlock(c, w, 2 if j == 0 else 1))
                c = w
        s.body = nn.Sequential(*layers)
        s.head = nn.Linear(c, classes)

    def forward(s, x):
        return s.head(s.body(x).mean((2, 3)))


class DetrLike(nn.Module):
    """A DETR-like detector: a 4-stage conv backbone (stride 16), a 1x1 projection, sine-free
    learned 2-D position embeddings, a 2-layer transformer encoder, a 2-layer decoder of 20
    learned queries (self-attention, then cross-attention to the encoder), class logits
    (softmax) and boxes (sigmoid) concatenated to [N, 20, classes + 1 + 4]."""

    def __init__(s, d=128, heads=4, queries=20, classes=20, grid=(12, 16)):
        super().__init__()

        def cbr(i, o):
            return [nn.Conv2d(i, o, 3, 2, 1, bias=False), nn.BatchNorm2d(o), nn.ReLU(True)]

        s.backbone = nn.Sequential(*cbr(3, 32), *cbr(32, 64), *cbr(64, 128), *cbr(128, 192))
        s.proj = nn.Conv2d(192, d, 1)
        s.row = nn.Parameter(0.1 * torch.randn(grid[0], 1, d))
        s.col = nn.Parameter(0.1 * torch.randn(1, grid[1], d))
        s.enc = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=0.0, batch_first=True), 2)
        s.dec = nn.TransformerDecoder(
            nn.TransformerDecoderLayer(d, heads, 2 * d, dropout=0.0, batch_first=True), 2)
        s.query = nn.Parameter(torch.randn(queries, d))
        s.cls = nn.Linear(d, classes + 1)
        s.box = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 4))

    def forward(s, x):
        h = s.proj(s.backbone(x))  # [N, d, H, W]
        n = h.shape[0]
        h = h.flatten(2).transpose(1, 2) + (s.row + s.col).flatten(0, 1)
        mem = s.enc(h)
        q = s.dec(s.query.unsqueeze(0).expand(n, -1, -1), mem)
        return torch.cat([torch.softmax(s.cls(q), -1), torch.sigmoid(s.box(q))], -1)


class PerceiverLike(nn.Module):
    """A Perceiver-like classifier: input [N, M, C] plus Fourier features of each element's
    position, 64 learned latents cross-attend to it (one head), two latent self-attention
    layers, a second cross-attention, mean-pooled logits."""

    def __init__(s, c=32, d=128, latents=64, bands=8, classes=40):
        super().__init__()
        s.bands = bands
        s.inp = nn.Linear(c + 2 * bands, d)
        s.latents = nn.Parameter(torch.randn(latents, d))
        s.norm_q, s.norm_kv = nn.LayerNorm(d), nn.LayerNorm(d)
        s.cross = nn.MultiheadAttention(d, 1, batch_first=True)
        s.cross_ff = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.GELU(),
                                   nn.Linear(2 * d, d))
        s.selfs = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d, 4, 2 * d, dropout=0.0, activation="gelu",
                                       batch_first=True, norm_first=True), 2)
        s.norm_q2 = nn.LayerNorm(d)
        s.cross2 = nn.MultiheadAttention(d, 1, batch_first=True)
        s.head = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, classes))

    def forward(s, x):
        n, m, _ = x.shape
        pos = torch.arange(m, dtype=x.dtype) / m  # [M]
        freq = (2.0 ** torch.arange(s.bands, dtype=x.dtype)) * math.pi
        ang = pos.unsqueeze(1) * freq  # [M, bands]
        four = torch.cat([torch.sin(ang), torch.cos(ang)], -1).unsqueeze(0).expand(n, -1, -1)
        kv = s.norm_kv(s.inp(torch.cat([x, four], -1)))
        lat = s.latents.unsqueeze(0).expand(n, -1, -1)
        q = s.norm_q(lat)
        lat = lat + s.cross(q, kv, kv, need_weights=False)[0]
        lat = lat + s.cross_ff(lat)
        lat = s.selfs(lat)
        q = s.norm_q2(lat)
        lat = lat + s.cross2(q, kv, kv, need_weights=False)[0]
        return s.head(lat.mean(1))


class DenseBlock(nn.Module):
    def __init__(s, c, g):
        super().__init__()
        s.convs = nn.ModuleList(nn.Conv2d(c + i * g, g if i < 4 else c, 3, 1, 1)
                                for i in range(5))

    def forward(s, x):
        feats = [x]
        for i, conv in enumerate(s.convs):
            y = conv(torch.cat(feats, 1))
            if i < 4:
                feats.append(F.leaky_relu(y, 0.2))
        return x + 0.2 * y


class Rrdb(nn.Module):
    def __init__(s, c, g):
        super().__init__()
        s.blocks = nn.Sequential(*(DenseBlock(c, g) for _ in range(3)))

    def forward(s, x):
        return x + 0.2 * s.blocks(x)


class EsrganLike(nn.Module):
    """ESRGAN's generator (narrower: 32 features, growth 16, 2 RRDBs), x4 by two nearest
    upsamplings, each followed by a Conv2d and LeakyReLU 0.2."""

    def __init__(s, c=32, g=16, blocks=2):
        super().__init__()
        s.first = nn.Conv2d(3, c, 3, 1, 1)
        s.body = nn.Sequential(*(Rrdb(c, g) for _ in range(blocks)))
        s.trunk = nn.Conv2d(c, c, 3, 1, 1)
        s.up1, s.up2 = nn.Conv2d(c, c, 3, 1, 1), nn.Conv2d(c, c, 3, 1, 1)
        s.hr = nn.Conv2d(c, c, 3, 1, 1)
        s.last = nn.Conv2d(c, 3, 3, 1, 1)

    def forward(s, x):
        f = s.first(x)
        f = f + s.trunk(s.body(f))
        f = F.leaky_relu(s.up1(F.interpolate(f, scale_factor=2, mode="nearest")), 0.2)
        f = F.leaky_relu(s.up2(F.interpolate(f, scale_factor=2, mode="nearest")), 0.2)
        return s.last(F.leaky_relu(s.hr(f), 0.2))


class MoeLayer(nn.Module):
    """Top-2 routing: each token's two best experts by router logit, weights the softmax of
    the two logits; each expert runs on the tokens routed to it (NonZero, Gather), and its
    weighted output is added back at their rows (ScatterND through index_put)."""

    def __init__(s, d, experts=4, k=2):
        super().__init__()
        s.k = k
        s.router = nn.Linear(d, experts, bias=False)
        s.experts = nn.ModuleList(nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(),
                                                nn.Linear(2 * d, d)) for _ in range(experts))

    def forward(s, x):
        n, t, d = x.shape
        flat = x.reshape(n * t, d)
        top, idx = torch.topk(s.router(flat), s.k, dim=-1)  # [NT, k]
        w = torch.softmax(top, -1)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(s.experts):
            hit = idx == e  # [NT, k]
            rows = torch.nonzero(hit.any(-1)).squeeze(1)
            we = (w * hit.to(w.dtype)).sum(-1)  # [NT]
            y = expert(flat[rows]) * we[rows].unsqueeze(1)
            out = out.index_put((rows,), out[rows] + y)
        return out.reshape(n, t, d)


class MoeTransformer(nn.Module):
    """Two pre-norm layers of attention + a 4-expert top-2 MoE feed-forward, a token
    classifier on top."""

    def __init__(s, vocab=3000, d=128, heads=4, layers=2, ctx=128):
        super().__init__()
        s.tok = nn.Embedding(vocab, d)
        s.pos = nn.Parameter(0.02 * torch.randn(ctx, d))
        s.n1 = nn.ModuleList(nn.LayerNorm(d) for _ in range(layers))
        s.att = nn.ModuleList(nn.MultiheadAttention(d, heads, batch_first=True)
                              for _ in range(layers))
        s.n2 = nn.ModuleList(nn.LayerNorm(d) for _ in range(layers))
        s.moe = nn.ModuleList(MoeLayer(d) for _ in range(layers))
        s.norm = nn.LayerNorm(d)
        s.head = nn.Linear(d, vocab)

    def forward(s, ids):
        h = s.tok(ids) + s.pos[:ids.shape[1]]
        for n1, att, n2, moe in zip(s.n1, s.att, s.n2, s.moe):
            q = n1(h)
            h = h + att(q, q, q, need_weights=False)[0]
            h = h + moe(n2(h))
        return s.head(s.norm(h))


class MobileOneBlock(nn.Module):
    """MobileOne's training-time unit: a depthwise 3x3 stage (2 BN'd 3x3 branches + a 1x1
    branch + BN identity) then a pointwise stage (2 BN'd 1x1 branches + BN identity)."""

    def __init__(s, i, o, stride):
        super().__init__()

        def bn_conv(ci, co, k, st, g):
            return nn.Sequential(nn.Conv2d(ci, co, k, st, k // 2, groups=g, bias=False),
                                 nn.BatchNorm2d(co))

        s.dw = nn.ModuleList([bn_conv(i, i, 3, stride, i) for _ in range(2)]
                             + [bn_conv(i, i, 1, stride, i)])
        s.dw_id = nn.BatchNorm2d(i) if stride == 1 else None
        s.pw = nn.ModuleList(bn_conv(i, o, 1, 1, 1) for _ in range(2))
        s.pw_id = nn.BatchNorm2d(o) if i == o else None

    def forward(s, x):
        y = sum(b(x) for b in s.dw)
        if s.dw_id is not None:
            y = y + s.dw_id(x)
        y = F.relu(y)
        z = sum(b(y) for b in s.pw)
        if s.pw_id is not None:
            z = z + s.pw_id(y)
        return F.relu(z)


class MobileOneLike(nn.Module):
    """MobileOne-S0-like (narrower): a 3x3 stem, stages of 48, 96, 192, 384 channels,
    a global pool and a 1x1 conv classifier (dynamic batch and H/W)."""

    def __init__(s, widths=(48, 96, 192, 384), depths=(2, 4, 6, 1), classes=100):
        super().__init__()
        layers = [nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(True)]
        c = 32
        for w, n in zip(widths, depths):
            for j in range(n):
                layers.append(MobileOneBlock(c, w, 2 if j == 0 else 1))
                c = w
        s.body = nn.Sequential(*layers)
        s.head = nn.Conv2d(c, classes, 1)

    def forward(s, x):
        return s.head(F.adaptive_avg_pool2d(s.body(x), 1)).flatten(1)


class StnClassifier(nn.Module):
    """A spatial transformer network: a localization CNN predicts an affine theta (initialised
    near the identity), the sampling grid is the base grid times theta (as affine_grid, written
    out: torch 1.13 has no ONNX symbolic for it), GridSample (bilinear, zeros padding) warps
    the input, and a small CNN classifies the result (dynamic batch)."""

    def __init__(s, size=(64, 64), classes=43):
        super().__init__()
        s.loc = nn.Sequential(nn.Conv2d(3, 16, 5, 2, 2), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(16, 32, 3, 1, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(4),
                              nn.Flatten(), nn.Linear(512, 64), nn.ReLU(), nn.Linear(64, 6))
        with torch.no_grad():
            s.loc[-1].weight.mul_(0.05)
            s.loc[-1].bias.copy_(torch.tensor([0.9, 0.1, 0.05, -0.1, 0.9, -0.05]))
        h, w = size
        ys = (torch.arange(h) * 2 + 1) / h - 1
        xs = (torch.arange(w) * 2 + 1) / w - 1
        gy, gx = torch.meshgrid(ys, xs, indexing="ij")
        s.register_buffer("base", torch.stack([gx, gy, torch.ones_like(gx)], -1).reshape(-1, 3))
        s.size = size
        s.cls = nn.Sequential(nn.Conv2d(3, 32, 3, 1, 1), nn.BatchNorm2d(32), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, 1, 1), nn.BatchNorm2d(64),
                              nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                              nn.Linear(64, classes))

    def forward(s, x):
        theta = s.loc(x).reshape(-1, 2, 3)
        grid = (s.base @ theta.transpose(1, 2)).reshape(-1, s.size[0], s.size[1], 2)
        warped = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros",
                               align_corners=False)
        return s.cls(warped)


class EdgeConv(nn.Module):
    def __init__(s, i, o, k):
        super().__init__()
        s.k = k
        s.conv = nn.Sequential(nn.Conv2d(2 * i, o, 1, bias=False), nn.BatchNorm2d(o),
                               nn.LeakyReLU(0.2))

    def forward(s, x):  # [N, C, P]
        n, c, p = x.shape
        inner = -2 * x.transpose(1, 2) @ x
        sq = (x * x).sum(1, keepdim=True)
        idx = (-sq - inner - sq.transpose(1, 2)).topk(s.k, dim=-1)[1]  # [N, P, k] nearest
        base = torch.arange(n).reshape(-1, 1, 1) * p
        flat = (idx + base).reshape(-1)
        pts = x.transpose(1, 2).reshape(n * p, c)
        nbr = pts[flat].reshape(n, p, s.k, c)
        ctr = x.transpose(1, 2).unsqueeze(2).expand(-1, -1, s.k, -1)
        feat = torch.cat([nbr - ctr, ctr], 3).permute(0, 3, 1, 2)  # [N, 2C, P, k]
        return s.conv(feat).max(-1)[0]


class DgcnnLike(nn.Module):
    """DGCNN's classifier (narrower): four EdgeConv layers on a k-nearest-neighbour graph
    rebuilt from each layer's features (pairwise distances, TopK, index arithmetic into a
    flattened Gather), a 1x1 Conv1d fusion, max and mean pooling (dynamic batch and points)."""

    def __init__(s, k=10, classes=40):
        super().__init__()
        s.ecs = nn.ModuleList([EdgeConv(3, 32, k), EdgeConv(32, 32, k), EdgeConv(32, 64, k),
                               EdgeConv(64, 128, k)])
        s.fuse = nn.Sequential(nn.Conv1d(256, 256, 1, bias=False), nn.BatchNorm1d(256),
                               nn.LeakyReLU(0.2))
        s.head = nn.Sequential(nn.Linear(512, 128), nn.LeakyReLU(0.2), nn.Linear(128, classes))

    def forward(s, x):
        feats = []
        for ec in s.ecs:
            x = ec(x)
            feats.append(x)
        h = s.fuse(torch.cat(feats, 1))
        return s.head(torch.cat([h.amax(-1), h.mean(-1)], 1))


randn = third.randn
# name -> (builder, input name, example shape, input maker, dynamic axes of the input)
ZOO = {
    "r2plus1d_18": (lambda: torchvision.models.video.r2plus1d_18(weights=None), "input",
                    [1, 3, 8, 64, 64], randn, {0: "batch"}),
    "conformer": (Conformer, "input", [1, 80, 200], randn, {0: "batch", 2: "frames"}),
    "gru_seq2seq": (GruSeq2Seq, "input_ids", [1, 40], third.ids(2000), {0: "batch", 1: "seq"}),
    "repvgg_a0_like": (RepVgg, "input", [1, 3, 224, 224], randn, {0: "batch"}),
    "detr_like": (DetrLike, "input", [1, 3, 192, 256], randn, {0: "batch"}),
    "perceiver_like": (PerceiverLike, "input", [1, 2048, 32], randn, {0: "batch", 1: "length"}),
    "esrgan_like": (EsrganLike, "input", [1, 3, 48, 64], randn,
                    {0: "batch", 2: "height", 3: "width"}),
    "efficientnet_b3": (gz.tv("efficientnet_b3"), "input", [1, 3, 224, 224], randn, {0: "batch"}),
    "moe_top2": (MoeTransformer, "input_ids", [2, 48], third.ids(3000), {0: "batch", 1: "seq"}),
    "mobileone_like": (MobileOneLike, "input", [2, 3, 160, 192], randn,
                       {0: "batch", 2: "height", 3: "width"}),
    "stn_classifier": (StnClassifier, "input", [1, 3, 64, 64], randn, {0: "batch"}),
    "dgcnn_like": (DgcnnLike, "input", [1, 3, 512], randn, {0: "batch", 2: "points"}),
}


def main():
    """gen_zoo's command line (OUT_DIR, --only, --list, zoo.json) over this zoo, exported by
    gen_zoo_third's export (calibrated batch norms, float64 reference)."""
    third.ZOO = ZOO
    gz.ZOO, gz.export = ZOO, third.export
    gz.main()


if __name__ == "__main__":
    main()

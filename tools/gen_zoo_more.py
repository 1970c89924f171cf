#!/usr/bin/env python3
"""A second zoo: eleven architectures kiln was never tuned on, exported like
../shared/models/gen_zoo.py (NAME.onnx, NAME.in0.npy, NAME.out0.npy, zoo.json), so that
tools/zoo.py can check and time them beside ONNX Runtime:

    /usr/bin/python3 tools/gen_zoo_more.py OUT_DIR [--only a,b] [--list]
    /usr/bin/python3 tools/zoo.py --zoo OUT_DIR --models '' --rounds 3

The first zoo is what kiln is tuned against; this one is the check that tuning generalizes
(it found a naive ConvTranspose, dilated convs whose taps read only padding, and small GEMMs that
forked threads on every RNN step). mnasnet, resnet34, regnet_x, inception_v3, alexnet, a smaller
shufflenet, efficientnet_b1, DeepLabV3 (dilated ASPP, dynamic H/W), a small U-Net (ConvTranspose,
skip concats), a wav2vec-style Conv1d + GroupNorm + GELU front end with a GRU, and a BERT-like
encoder with a key-padding mask derived from its ids. Random weights, the zoo's seed and opset.
Needs gen_zoo.py (--shared DIR, default ../shared/models next to the repository) and Debian's
python3-torch / torchvision / onnx / numpy.
"""
import os
import sys

_args = sys.argv[1:]
_shared = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "models")
if "--shared" in _args:
    _shared = _args[_args.index("--shared") + 1]
    i = sys.argv.index("--shared")
    del sys.argv[i:i + 2]
sys.path.insert(0, _shared)
import torch  # noqa: E402
import gen_zoo as gz  # noqa: E402

class Unet(torch.nn.Module):
    def __init__(s, c=16):
        super().__init__()
        def blk(i, o): return torch.nn.Sequential(torch.nn.Conv2d(i, o, 3, padding=1), torch.nn.BatchNorm2d(o), torch.nn.ReLU(),
                                              torch.nn.Conv2d(o, o, 3, padding=1), torch.nn.BatchNorm2d(o), torch.nn.ReLU())
        s.e1, s.e2, s.e3 = blk(3, c), blk(c, 2*c), blk(2*c, 4*c)
        s.u2 = torch.nn.ConvTranspose2d(4*c, 2*c, 2, stride=2); s.d2 = blk(4*c, 2*c)
        s.u1 = torch.nn.ConvTranspose2d(2*c, c, 2, stride=2); s.d1 = blk(2*c, c)
        s.out = torch.nn.Conv2d(c, 2, 1)
    def forward(s, x):
        a = s.e1(x); b = s.e2(torch.nn.functional.max_pool2d(a, 2)); c = s.e3(torch.nn.functional.max_pool2d(b, 2))
        b = s.d2(torch.cat([s.u2(c), b], 1)); a = s.d1(torch.cat([s.u1(b), a], 1))
        return torch.sigmoid(s.out(a))

class AudioConv(torch.nn.Module):
    """wav2vec2-style conv feature extractor + GroupNorm + GELU, then a GRU and a linear head."""
    def __init__(s):
        super().__init__()
        layers = [torch.nn.Conv1d(1, 128, 10, stride=5), torch.nn.GroupNorm(128, 128), torch.nn.GELU()]
        for k, st in [(3, 2), (3, 2), (3, 2), (2, 2)]:
            layers += [torch.nn.Conv1d(128, 128, k, stride=st), torch.nn.GELU()]
        s.fe = torch.nn.Sequential(*layers)
        s.ln = torch.nn.LayerNorm(128)
        s.gru = torch.nn.GRU(128, 96, batch_first=True)
        s.head = torch.nn.Linear(96, 12)
    def forward(s, x):
        h = s.fe(x.unsqueeze(1)).transpose(1, 2)
        h, _ = s.gru(s.ln(h))
        return s.head(h).log_softmax(-1)

class MaskedEncoder(torch.nn.Module):
    """BERT-like encoder whose key-padding mask comes from the ids (0 = padding), as exporters emit it."""
    def __init__(s, vocab=5000, d=192, heads=6, layers=3):
        super().__init__()
        s.tok = torch.nn.Embedding(vocab, d); s.pos = torch.nn.Embedding(256, d)
        layer = torch.nn.TransformerEncoderLayer(d, heads, 4*d, dropout=0.0, activation="relu", batch_first=True)
        s.enc = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        s.cls = torch.nn.Linear(d, 3)
    def forward(s, ids):
        seq = ids.shape[1]
        pos = torch.arange(seq).unsqueeze(0)
        pad = ids == 0
        h = s.enc(s.tok(ids) + s.pos(pos), src_key_padding_mask=pad)
        return s.cls(h[:, 0])

IMG = gz.IMG
gz.ZOO = {
    "mnasnet1_0": (gz.tv("mnasnet1_0"), IMG),
    "resnet34": (gz.tv("resnet34"), IMG),
    "regnet_x_400mf": (gz.tv("regnet_x_400mf"), IMG),
    "inception_v3": (gz.tv("inception_v3", aux_logits=False, init_weights=True), ("input", [1, 3, 299, 299], {0: "batch"})),
    "alexnet": (gz.tv("alexnet"), IMG),
    "shufflenet_v2_x0_5": (gz.tv("shufflenet_v2_x0_5"), IMG),
    "efficientnet_b1": (gz.tv("efficientnet_b1"), ("input", [1, 3, 240, 240], {0: "batch"})),
    "deeplabv3_mobilenet_v3_large": (gz.seg("deeplabv3_mobilenet_v3_large"), ("input", [1, 3, 256, 256], {0: "batch", 2: "height", 3: "width"})),
    "unet_small": (Unet, ("input", [1, 3, 128, 128], {0: "batch", 2: "height", 3: "width"})),
    "audio_conv_gru": (AudioConv, ("input", [1, 16000], {0: "batch", 1: "samples"})),
}

def export_masked(out_dir):
    import os, json, numpy as np, onnx
    torch.manual_seed(gz.SEED)
    m = MaskedEncoder().eval()
    for p in m.parameters():
        p.requires_grad_(True)
    ids = torch.randint(1, 5000, (1, 48), dtype=torch.int64); ids[0, 40:] = 0
    with torch.no_grad():
        y = m(ids)
    path = os.path.join(out_dir, "masked_encoder.onnx")
    torch.onnx.export(m, (ids,), path, opset_version=gz.OPSET, do_constant_folding=True,
                      input_names=["input_ids"], output_names=["output"],
                      dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "output": {0: "batch"}})
    np.save(os.path.join(out_dir, "masked_encoder.in0.npy"), ids.numpy())
    np.save(os.path.join(out_dir, "masked_encoder.out0.npy"), y.detach().numpy())
    mp = os.path.join(out_dir, "zoo.json"); man = json.load(open(mp))
    mo = onnx.load(path)
    man["masked_encoder"] = dict(onnx="masked_encoder.onnx", input="input_ids", input_shape=[1, 48], input_dtype="int64",
        dynamic_axes={"0": "batch", "1": "seq"}, output_shape=list(y.shape), opset=gz.OPSET,
        nodes=len(mo.graph.node), ops=sorted({n.op_type for n in mo.graph.node}))
    json.dump(man, open(mp, "w"), indent=1)
    print("masked_encoder", man["masked_encoder"]["ops"])


def main():
    args = sys.argv[1:]
    if "--list" in args:
        print("\n".join(list(gz.ZOO) + ["masked_encoder"]))
        return
    if not args:
        sys.exit(__doc__)
    only = args[args.index("--only") + 1].split(",") if "--only" in args else None
    rest = [n for n in (only or gz.ZOO) if n != "masked_encoder"]
    if rest:  # gen_zoo's main exports gz.ZOO's entries and writes zoo.json
        sys.argv = [sys.argv[0], args[0], "--only", ",".join(rest)]
        gz.main()
    if only is None or "masked_encoder" in only:
        os.makedirs(args[0], exist_ok=True)
        if not os.path.exists(os.path.join(args[0], "zoo.json")):
            open(os.path.join(args[0], "zoo.json"), "w").write("{}")
        export_masked(args[0])


if __name__ == "__main__":
    main()

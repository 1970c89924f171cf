"""Image classification with kiln from Python: load a ResNet / MobileNet-like .onnx (or .kiln),
classify a batch of images, print the top classes and latency, optionally check a reference.

    PYTHONPATH=bazel-bin/python /usr/bin/python3 examples/python/classify.py \\
        /work/models/resnet18.onnx --input /work/models/resnet18_input.npy \\
        --reference /work/models/resnet18_output.npy

Without --input, a random batch (seeded) of the model's input shape is classified (symbolic dims
take --batch).
"""
import argparse
import sys
import time

import numpy as np

import kiln
from demo_models import check_reference


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", help="an image classifier: .onnx (compiled in memory) or .kiln")
    p.add_argument("--input", help=".npy batch of images (default: random, seeded)")
    p.add_argument("--reference", help=".npy expected scores: exit 1 unless they match")
    p.add_argument("--batch", type=int, default=1, help="batch size for a random input (1)")
    p.add_argument("--threads", type=int, help="OpenMP threads (default: every core)")
    p.add_argument("--external", default="onednn", help="external compiler: onednn or none")
    p.add_argument("--runs", type=int, default=10, help="steady-state runs to time (10)")
    p.add_argument("--top", type=int, default=5, help="classes to print per image (5)")
    return p.parse_args()


def main():
    args = parse_args()
    # (1) Load: an .onnx is compiled in memory; its oneDNN-capable regions go to oneDNN.
    start = time.perf_counter()
    session = kiln.InferenceSession(args.model, threads=args.threads, external=args.external)
    (image_arg,) = session.get_inputs()
    scores_arg = session.get_outputs()[0]
    print(f"(1) loaded {args.model} in {time.perf_counter() - start:.2f} s: "
          f"{image_arg} -> {scores_arg}")

    # (2) The input: a contiguous float32 array is bound without a copy.
    if args.input:
        images = np.load(args.input)
    else:
        shape = [args.batch if isinstance(d, str) or d is None else d for d in image_arg.shape]
        images = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    print(f"(2) images: {images.dtype}{list(images.shape)}")

    # (3) First run (JIT kernels compile here), then steady-state runs.
    start = time.perf_counter()
    (scores,) = session.run([scores_arg.name], {image_arg.name: images})
    first = time.perf_counter() - start
    times = []
    for _ in range(args.runs):
        start = time.perf_counter()
        session.run([scores_arg.name], {image_arg.name: images})
        times.append(time.perf_counter() - start)
    print(f"(3) first run {first * 1e3:.1f} ms; steady median {np.median(times) * 1e3:.2f} ms "
          f"over {args.runs} runs")

    # (4) Top classes per image (softmax over the scores).
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    probs = e / e.sum(axis=1, keepdims=True)
    for i, p in enumerate(probs):
        top = np.argsort(p)[::-1][:args.top]
        print(f"(4) image {i}: " + ", ".join(f"class {c} ({p[c]:.3f})" for c in top))

    # (5) Optionally, the reference.
    if args.reference:
        return 0 if check_reference(scores, args.reference, 5) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

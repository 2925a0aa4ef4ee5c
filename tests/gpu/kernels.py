#!/usr/bin/env python3
"""Measures, on the GPU at hand, the kernels the cost model prices by shape, so that its
predictions can be held against them (tests/bench/kernel_model_check.py prints the
comparison; docs/cost-model.md quotes it). Two of the model's constants come from an H200
run of this script, committed in testdata/measured/h200-kernels.json: the Hopper GEMM
ceiling and the fused attention backward's fixed cost; docs/cost-model.md says so and cites
the published figures for the rest, which these measurements only test.

- BF16 GEMMs through PyTorch (cuBLAS): squares, the calibration shape, the forward, input- and
  weight-gradient GEMMs of Llama-shaped blocks at several token counts, narrow outputs, small
  inner dimensions, a sweep across wave boundaries, and batched attention-score products;
- FP8 GEMMs (torch._scaled_mm, e4m3, per-tensor scales, bf16 output) on the large block shapes,
  where the device has FP8 tensor cores;
- causal attention through scaled_dot_product_attention with each fused backend PyTorch has
  (FlashAttention-2, cuDNN), forward and backward, head dimension 128;
- the routed experts' GEMMs of Mixtral-, Qwen3-MoE- and DeepSeek-V3-shaped layers, the local
  experts of one rank at equal rows each, as one batched product (torch.bmm) and, where
  PyTorch has it, as a grouped GEMM (torch._grouped_mm);
- element-wise passes at the memory bandwidth: a copy, a layer norm, RMSNorm and SwiGLU's
  product, each with the bytes it must read and write.

Operands are random (never zeros, which run faster); each time is the median over repetitions
of a burst of back-to-back calls between CUDA events, after warm-up.

Usage: kernels.py --out FILE.json [--quick]
Needs PyTorch with CUDA.
"""

import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def timed(call, burst, repetitions):
    """Median seconds of one call: `repetitions` bursts of `burst` calls between events."""
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(repetitions):
        start.record()
        for _ in range(burst):
            call()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) / 1e3 / burst)
    return statistics.median(samples)


def burst_for(flops, rate=600e12):
    """Enough calls per burst that a burst runs about a millisecond or more."""
    return max(1, min(200, int(1e-3 * rate / max(flops, 1))))


def gemm_shapes(quick):
    shapes = []  # (group, m, n, k, batch)
    for s in ([512, 2048, 8192] if quick else
              [256, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384]):
        shapes.append(("square", s, s, s, 1))
    shapes.append(("calibration", 6144, 17920, 2816, 1))
    # Llama-shaped blocks (hidden, FFN, key/value width): Llama-3.2-1B-like, Llama-3.1-8B,
    # Llama-3.1-70B; every weight GEMM's forward (m tokens), input gradient and weight gradient.
    blocks = [(2048, 8192, 512), (4096, 14336, 1024), (8192, 28672, 1024)]
    for h, f, c in (blocks[1:2] if quick else blocks):
        for tokens in ([4096] if quick else [2048, 8192, 16384]):
            for name, n, k in (("qkv", h + 2 * c, h), ("o", h, h), ("gate_up", 2 * f, h),
                               ("down", h, f)):
                shapes.append((f"h{h}-{name}-fwd", tokens, n, k, 1))
                shapes.append((f"h{h}-{name}-dx", tokens, k, n, 1))
                shapes.append((f"h{h}-{name}-dw", k, n, tokens, 1))
    for n in ([64, 1024] if quick else [16, 64, 128, 256, 512, 1024, 2048]):
        shapes.append(("narrow", 8192, n, 8192, 1))
    for k in ([128] if quick else [64, 128, 256, 512, 1024]):
        shapes.append(("small-k", 8192, 8192, k, 1))
    # Across wave boundaries: 33 row tiles of 128, columns in steps of a 256-wide tile.
    for n in ([1024, 1280] if quick else range(768, 4097, 256)):
        shapes.append(("waves", 4224, n, 4096, 1))
    # Eager attention's score and value products: batch × (s × s × d) and (s × d × s).
    for s in ([2048] if quick else [1024, 2048, 4096]):
        batch = 16384 // s * 32
        shapes.append(("scores", s, s, 128, batch))
        shapes.append(("values", s, 128, s, batch))
    return shapes


def measure_gemm(m, n, k, batch, fp8):
    gen = torch.Generator(device="cuda").manual_seed(m * 7 + n * 13 + k)
    shape_a = (batch, m, k) if batch > 1 else (m, k)
    shape_b = (batch, n, k) if batch > 1 else (n, k)
    a = torch.randn(shape_a, device="cuda", dtype=torch.bfloat16, generator=gen)
    b = torch.randn(shape_b, device="cuda", dtype=torch.bfloat16, generator=gen)
    flops = 2.0 * m * n * k * batch
    if fp8:
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
        one = torch.tensor(1.0, device="cuda")
        # _scaled_mm wants its second operand column-major: the transpose of a row-major (n, k).
        call = lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one,
                                        out_dtype=torch.bfloat16)
    else:
        bt = b.transpose(-1, -2)
        call = lambda: torch.matmul(a, bt)
    seconds = timed(call, burst_for(flops), 7)
    return seconds, flops


def attention_runs(quick):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backends = [("flash2", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)]
    rows = []
    heads, dim = 32, 128
    for s in ([4096] if quick else [1024, 2048, 4096, 8192, 16384]):
        batch = max(1, 16384 // s)
        gen = torch.Generator(device="cuda").manual_seed(s)
        q, k, v = (torch.randn(batch, heads, s, dim, device="cuda", dtype=torch.bfloat16,
                               generator=gen, requires_grad=True) for _ in range(3))
        grad = torch.randn(batch, heads, s, dim, device="cuda", dtype=torch.bfloat16,
                           generator=gen)
        forward_flops = 4.0 * batch * heads * s * s * dim / 2  # causal: half the blocks
        for name, backend in backends:
            try:
                with sdpa_kernel([backend]):
                    fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    forward = timed(fwd, burst_for(forward_flops), 7)

                    def both():  # autograd.grad: no accumulation into q.grad and so on
                        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                        torch.autograd.grad(out, (q, k, v), grad)

                    total = timed(both, burst_for(3.5 * forward_flops), 7)
            except RuntimeError as error:
                print(f"attention {name} s={s}: {str(error).splitlines()[0]}", flush=True)
                continue
            rows.append({"backend": name, "batch": batch, "heads": heads, "seq": s, "dim": dim,
                         "forward_s": forward, "backward_s": total - forward,
                         "forward_tflops": forward_flops / forward / 1e12,
                         "backward_tflops": 2.5 * forward_flops / (total - forward) / 1e12})
            print(f"attention {name} s={s}: forward {rows[-1]['forward_tflops']:.0f}, "
                  f"backward {rows[-1]['backward_tflops']:.0f} TFLOP/s", flush=True)
    return rows


def expert_shapes(quick):
    """(name, hidden, expert FFN width, local experts, rows per expert): one rank's experts in
    an expert group of E ranks, micro-batch 1 of 4,096 tokens routed to top-k of N experts
    from every member (E x 4,096 x k / N rows each)."""
    shapes = [("mixtral-8x7b-e8", 4096, 14336, 1, 8 * 4096 * 2 // 8),
              ("qwen3-30b-a3b-e8", 2048, 768, 16, 8 * 4096 * 8 // 128),
              ("deepseek-v3-e64", 7168, 2048, 4, 64 * 4096 * 8 // 256)]
    return shapes[1:2] if quick else shapes


def grouped_gemms(quick):
    """The experts' up (gate and up together) and down products, forward."""
    rows = []
    grouped = getattr(torch, "_grouped_mm", None)
    for name, h, f, experts, tokens in expert_shapes(quick):
        for part, n, k in (("up", 2 * f, h), ("down", h, f)):
            gen = torch.Generator(device="cuda").manual_seed(n + k)
            a = torch.randn(experts, tokens, k, device="cuda", dtype=torch.bfloat16,
                            generator=gen)
            b = torch.randn(experts, n, k, device="cuda", dtype=torch.bfloat16, generator=gen)
            flops = 2.0 * experts * tokens * n * k
            calls = [("bmm", lambda: torch.bmm(a, b.transpose(1, 2)))]
            if grouped is not None:
                flat = a.reshape(experts * tokens, k)
                offsets = torch.arange(1, experts + 1, device="cuda", dtype=torch.int32) * tokens
                calls.append(("grouped_mm",
                              lambda: grouped(flat, b.transpose(1, 2), offs=offsets)))
            for how, call in calls:
                try:
                    seconds = timed(call, burst_for(flops), 7)
                except (RuntimeError, TypeError) as error:
                    print(f"{name} {part} {how}: {str(error).splitlines()[0]}", flush=True)
                    continue
                rows.append({"group": f"experts-{how}", "model": name, "m": tokens, "n": n,
                             "k": k, "batch": experts, "fp8": False, "seconds": seconds})
                print(f"experts {name} {part} {how}: {flops / seconds / 1e12:.0f} TFLOP/s",
                      flush=True)
    return rows


def elementwise_runs(quick):
    """Each pass with the bytes it must move (inputs read once, outputs written once)."""
    tokens, h, f = (4096, 4096, 14336) if quick else (16384, 4096, 14336)
    gen = torch.Generator(device="cuda").manual_seed(5)
    x = torch.randn(tokens, h, device="cuda", dtype=torch.bfloat16, generator=gen)
    gate = torch.randn(tokens, f, device="cuda", dtype=torch.bfloat16, generator=gen)
    up = torch.randn(tokens, f, device="cuda", dtype=torch.bfloat16, generator=gen)
    weight = torch.ones(h, device="cuda", dtype=torch.bfloat16)
    big = torch.randn(256 << 20, device="cuda", dtype=torch.bfloat16, generator=gen)
    out = torch.empty_like(big)
    e = 2
    passes = [("copy 512 MiB", lambda: out.copy_(big), 2 * big.numel() * e),
              ("layer_norm", lambda: F.layer_norm(x, (h,), weight, weight), 2 * tokens * h * e),
              ("rms_norm", lambda: F.rms_norm(x, (h,), weight), 2 * tokens * h * e),
              ("swiglu product (two kernels in eager PyTorch)", lambda: F.silu(gate) * up,
               3 * tokens * f * e)]
    rows = []
    for name, call, moved in passes:
        try:
            seconds = timed(call, max(1, int(2e-3 / (moved / 4e12))), 7)
        except (RuntimeError, AttributeError) as error:
            print(f"{name}: {str(error).splitlines()[0]}", flush=True)
            continue
        rows.append({"name": name, "bytes": moved, "seconds": seconds})
        print(f"{name}: {moved / seconds / 1e12:.2f} TB/s", flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true", help="a few shapes of each kind")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("kernels.py: no CUDA device")
    start = time.time()
    props = torch.cuda.get_device_properties(0)
    result = {"device": props.name, "sms": props.multi_processor_count,
              "torch": torch.__version__, "cuda": torch.version.cuda, "gemms": [],
              "attention": []}
    fp8 = props.major >= 9
    for group, m, n, k, batch in gemm_shapes(args.quick):
        seconds, flops = measure_gemm(m, n, k, batch, False)
        result["gemms"].append({"group": group, "m": m, "n": n, "k": k, "batch": batch,
                                "fp8": False, "seconds": seconds})
        print(f"{group:16s} {batch}x{m}x{n}x{k}: {flops / seconds / 1e12:.0f} TFLOP/s", flush=True)
        big = (group.endswith("-fwd") and group.startswith(("h4096", "h8192"))) or (
            group in ("calibration", "square") and m >= 4096)
        if fp8 and big:
            try:
                seconds, flops = measure_gemm(m, n, k, batch, True)
            except (RuntimeError, AttributeError) as error:
                print(f"fp8 {m}x{n}x{k}: {str(error).splitlines()[0]}", flush=True)
                fp8 = False
                continue
            result["gemms"].append({"group": group, "m": m, "n": n, "k": k, "batch": batch,
                                    "fp8": True, "seconds": seconds})
            print(f"{group:16s} {batch}x{m}x{n}x{k} fp8: {flops / seconds / 1e12:.0f} TFLOP/s",
                  flush=True)
    result["attention"] = attention_runs(args.quick)
    result["gemms"] += grouped_gemms(args.quick)
    result["elementwise"] = elementwise_runs(args.quick)
    result["seconds"] = time.time() - start
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"kernels.py: {len(result['gemms'])} GEMMs, {len(result['attention'])} attention "
          f"runs in {result['seconds']:.0f} s")


if __name__ == "__main__":
    main()

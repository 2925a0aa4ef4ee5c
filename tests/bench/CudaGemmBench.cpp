//===- CudaGemmBench.cpp - GEMM throughput of the model's layer shapes ----===//
//
// The GEMMs of one transformer block and the LM head (QKV, attention projection, MLP up and
// down, head) for a token count and hidden size, in the three ways that matter:
//   runtime  what CudaOps runs: float32 storage, bf16 tensor-core compute, float32 accumulate
//   bf16     bf16 storage, float32 accumulate: the ceiling with half the memory traffic
//   fp32     float32 throughout (plans with dtype fp32)
// Times come from CUDA events around each call (manual timing), on random operands (zeros run
// faster than real data). Counters: TFLOPS, and the fraction of the dense bf16 peak given with
// --peak-tflops (default 989, H100/H200 SXM).
// Where no GPU is usable it says so and exits successfully.
//
//===----------------------------------------------------------------------===//

#include <benchmark/benchmark.h>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

double peakTflops = 989;

enum Mode { Runtime, BF16, FP32 };

struct Shape {
  const char *name;
  int64_t m, n, k; // C[m × n] = A[m × k] · B[k × n]
};

/// Fills `count` elements at `device` with uniform values in [-1, 1), bf16 or float32: one
/// block of random values, copied over and over (drawing every element on the host would take
/// longer than the measurements).
bool fillRandom(void *device, int64_t count, bool half, unsigned seed) {
  constexpr int64_t kBlock = 1 << 20;
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(kBlock);
  for (float &x : values)
    x = uniform(engine);
  std::vector<__nv_bfloat16> halves;
  const void *block = values.data();
  if (half) {
    halves.resize(kBlock);
    for (int64_t i = 0; i < kBlock; ++i)
      halves[i] = __float2bfloat16(values[i]);
    block = halves.data();
  }
  const size_t element = half ? sizeof(__nv_bfloat16) : sizeof(float);
  for (int64_t at = 0; at < count; at += kBlock)
    if (cudaMemcpy(static_cast<char *>(device) + at * element, block,
                   std::min(kBlock, count - at) * element, cudaMemcpyHostToDevice) != cudaSuccess)
      return false;
  return true;
}

/// One GEMM configuration, timed with events.
void gemm(benchmark::State &state, Shape shape, Mode mode) {
  const bool half = mode == BF16;
  const size_t element = half ? sizeof(__nv_bfloat16) : sizeof(float);
  void *a = nullptr, *b = nullptr, *c = nullptr;
  cublasHandle_t handle = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  if (cudaMalloc(&a, shape.m * shape.k * element) != cudaSuccess ||
      cudaMalloc(&b, shape.k * shape.n * element) != cudaSuccess ||
      cudaMalloc(&c, shape.m * shape.n * element) != cudaSuccess ||
      cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS || cudaEventCreate(&start) != cudaSuccess ||
      cudaEventCreate(&stop) != cudaSuccess) {
    state.SkipWithError("cannot allocate the operands");
    return;
  }
  if (!fillRandom(a, shape.m * shape.k, half, 1) || !fillRandom(b, shape.k * shape.n, half, 2)) {
    state.SkipWithError("cannot fill the operands");
    return;
  }
  const cudaDataType type = half ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute =
      mode == FP32 ? CUBLAS_COMPUTE_32F
                   : (mode == Runtime ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F);
  const float alpha = 1, beta = 0;
  auto call = [&] {
    // Row-major C = A · B as column-major Cᵀ = Bᵀ · Aᵀ, as CudaOps does.
    return cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(shape.n),
                        static_cast<int>(shape.m), static_cast<int>(shape.k), &alpha, b, type,
                        static_cast<int>(shape.n), a, type, static_cast<int>(shape.k), &beta, c,
                        type, static_cast<int>(shape.n), compute, CUBLAS_GEMM_DEFAULT);
  };
  for (int warm = 0; warm < 3; ++warm)
    call();
  for (auto _ : state) {
    cudaEventRecord(start);
    if (call() != CUBLAS_STATUS_SUCCESS) {
      state.SkipWithError("cublasGemmEx failed");
      break;
    }
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(ms / 1e3);
  }
  const double flops = 2.0 * shape.m * shape.n * shape.k;
  state.counters["TFLOPS"] =
      benchmark::Counter(flops / 1e12, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_fraction"] =
      benchmark::Counter(flops / 1e12 / peakTflops, benchmark::Counter::kIsIterationInvariantRate);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cublasDestroy(handle);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
}

void registerShapes() {
  // Tokens per micro-batch (micro-batch × sequence) and hidden sizes of the committed jobs:
  // GPT-2 small (768), a 1.3B-class model (2048) and the 52B job (8192).
  for (int64_t hidden : {768, 2048, 8192}) {
    const int64_t tokens = 4096, vocab = 51200;
    const Shape shapes[] = {{"qkv", tokens, 3 * hidden, hidden},
                            {"proj", tokens, hidden, hidden},
                            {"mlp_up", tokens, 4 * hidden, hidden},
                            {"mlp_down", tokens, hidden, 4 * hidden},
                            {"head", tokens, vocab, hidden}};
    for (const Shape &s : shapes)
      for (auto [mode, label] : {std::pair{Runtime, "runtime"}, {BF16, "bf16"}, {FP32, "fp32"}})
        benchmark::RegisterBenchmark(
            ("gemm/" + std::string(label) + "/h" + std::to_string(hidden) + "/" + s.name).c_str(),
            gemm, s, mode)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
  }
}

} // namespace

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--peak-tflops=", 14) == 0) {
      peakTflops = std::atof(argv[i] + 14);
      for (int j = i; j + 1 < argc; ++j)
        argv[j] = argv[j + 1];
      --argc;
      break;
    }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device is usable; nothing to measure\n");
    return 0;
  }
  registerShapes();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

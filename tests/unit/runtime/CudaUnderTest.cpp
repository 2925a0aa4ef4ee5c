//===- CudaUnderTest.cpp - runtime_cuda_tests runs the shared suites on CUDA -===//
//
// The implementations and backends the suites shared with runtime_tests run on in this binary
// (OpsConformance.h, exec/PlanRuns.h): CUDA's, at float32 and at bf16 GEMM precision. Each
// skips itself, saying why, where no usable GPU is found.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaBackend.h"
#include "runtime/backend/cuda/CudaLoopbackMemory.h"
#include "runtime/backend/cuda/CudaOps.h"
#include "tests/unit/runtime/OpsConformance.h"
#include "tests/unit/runtime/exec/PlanRuns.h"

namespace conduit {
namespace {

/// Empty where a GPU can be used here; else why not.
std::string unavailable() {
  absl::StatusOr<int> devices = cuda::CudaBackend::deviceCount();
  return devices.ok() ? std::string() : std::string(devices.status().message());
}

std::unique_ptr<model::Ops<float>> cudaOps(runtime::DType precision, std::string &skip) {
  if (skip = unavailable(); !skip.empty())
    return nullptr;
  absl::StatusOr<std::unique_ptr<cuda::CudaOps>> ops = cuda::CudaOps::create(precision);
  if (!ops.ok()) {
    skip = std::string(ops.status().message());
    return nullptr;
  }
  return std::move(*ops);
}

/// CudaOps keep their first failure instead of returning it.
std::string keptFailure(model::Ops<float> &ops) {
  auto *device = dynamic_cast<cuda::CudaOps *>(&ops);
  return device && !device->status().ok() ? std::string(device->status().message()) : std::string();
}

} // namespace

namespace model::testing {

std::vector<Implementation> implementationsUnderTest() {
  return {
      {"cuda_fp32", [](std::string &skip) { return cudaOps(runtime::DType::FP32, skip); }, 1e-4,
       keptFailure},
      {"cuda_bf16", [](std::string &skip) { return cudaOps(runtime::DType::BF16, skip); }, 5e-2,
       keptFailure},
  };
}

} // namespace model::testing

namespace runtime::testing {

std::vector<BackendKind> backendsUnderTest() {
  return {
      {"cuda", [] { return std::make_unique<cuda::CudaLoopbackMemory>(); },
       [](int64_t rank, int64_t ranks, bool measure, LoopbackHub &hub) -> std::unique_ptr<Backend> {
         return std::make_unique<cuda::CudaBackend>(
             rank, ranks, /*device=*/0, measure,
             [&hub, rank](const Plan &) { return hub.transport(rank); });
       },
       unavailable}};
}

} // namespace runtime::testing
} // namespace conduit

//===- CudaCheck.h - CUDA, cuBLAS and NCCL results as Status ----*- C++ -*-===//
//
// Every CUDA runtime, cuBLAS and NCCL call of the backend goes through this one macro family,
// in the manner of NCCL's checks.h: a failure becomes an absl::Status that names the call, the
// library's own message, and the file and line. CONDUIT_CUDA returns it from the enclosing
// function; CONDUIT_CUDA_NOTE keeps the first failure in a sticky Status for code that cannot
// return one (the model's Ops, buffer release), which the backend checks after each
// instruction.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_BACKEND_CUDA_CUDACHECK_H
#define CONDUIT_RUNTIME_BACKEND_CUDA_CUDACHECK_H

#include "runtime/Status.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

namespace conduit::cuda {

absl::Status checkResult(cudaError_t result, const char *call, const char *file, int line);
absl::Status checkResult(cublasStatus_t result, const char *call, const char *file, int line);
absl::Status checkResult(ncclResult_t result, const char *call, const char *file, int line);

/// Keeps the first failure.
inline void note(absl::Status &sticky, absl::Status status) {
  if (sticky.ok() && !status.ok())
    sticky = std::move(status);
}

} // namespace conduit::cuda

/// Returns a Status from the enclosing function when `expr` (a CUDA, cuBLAS or NCCL call)
/// fails.
#define CONDUIT_CUDA(expr)                                                                         \
  CONDUIT_RETURN_IF_ERROR(::conduit::cuda::checkResult((expr), #expr, __FILE__, __LINE__))

/// Records the failure of `expr` in the absl::Status `sticky` unless it already holds one.
#define CONDUIT_CUDA_NOTE(sticky, expr)                                                            \
  ::conduit::cuda::note((sticky), ::conduit::cuda::checkResult((expr), #expr, __FILE__, __LINE__))

#endif // CONDUIT_RUNTIME_BACKEND_CUDA_CUDACHECK_H

//===- CudaCheck.cpp - CUDA, cuBLAS and NCCL results as Status ------------===//

#include "runtime/backend/cuda/CudaCheck.h"

#include "absl/strings/str_cat.h"

#include <cstring>

namespace conduit::cuda {
namespace {

/// "runtime/backend/cuda/X.cpp:42": the source path from the repository root on.
std::string where(const char *file, int line) {
  const char *root = std::strstr(file, "runtime/");
  return absl::StrCat(root ? root : file, ":", line);
}

absl::Status failure(absl::StatusCode code, const char *call, const std::string &what,
                     const char *file, int line) {
  return absl::Status(code, absl::StrCat(call, " failed: ", what, " (", where(file, line), ")"));
}

} // namespace

absl::Status checkResult(cudaError_t result, const char *call, const char *file, int line) {
  if (result == cudaSuccess)
    return absl::OkStatus();
  const absl::StatusCode code = result == cudaErrorMemoryAllocation
                                    ? absl::StatusCode::kResourceExhausted
                                    : absl::StatusCode::kInternal;
  return failure(code, call,
                 absl::StrCat(cudaGetErrorName(result), ": ", cudaGetErrorString(result)), file,
                 line);
}

absl::Status checkResult(cublasStatus_t result, const char *call, const char *file, int line) {
  if (result == CUBLAS_STATUS_SUCCESS)
    return absl::OkStatus();
  const absl::StatusCode code = result == CUBLAS_STATUS_ALLOC_FAILED
                                    ? absl::StatusCode::kResourceExhausted
                                    : absl::StatusCode::kInternal;
  return failure(code, call,
                 absl::StrCat(cublasGetStatusName(result), ": ", cublasGetStatusString(result)),
                 file, line);
}

absl::Status checkResult(ncclResult_t result, const char *call, const char *file, int line) {
  if (result == ncclSuccess)
    return absl::OkStatus();
  // Remote errors (a peer that went away) are what users meet most; NCCL's last error
  // message says which connection failed.
  const char *detail = ncclGetLastError(nullptr);
  const absl::StatusCode code = result == ncclRemoteError || result == ncclSystemError
                                    ? absl::StatusCode::kUnavailable
                                    : absl::StatusCode::kInternal;
  return failure(
      code, call,
      absl::StrCat(ncclGetErrorString(result), detail && *detail ? absl::StrCat(": ", detail) : ""),
      file, line);
}

} // namespace conduit::cuda

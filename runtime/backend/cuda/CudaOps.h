//===- CudaOps.h - the model's math on one CUDA stream ----------*- C++ -*-===//
//
// Ops<float> on a GPU: every operation is enqueued on one stream, so the layers written
// against Ops run asynchronously and in order. GEMMs go to cuBLAS with float32 storage and the
// plan's precision as the compute type: for bf16 plans, inputs are rounded to bf16 on the
// tensor cores and products accumulate in float32 (CUBLAS_COMPUTE_32F_FAST_16BF); fp16 alike;
// fp32 plans compute in float32. Attention is strided-batched GEMMs per sample around the
// causal softmax kernel: one per GEMM for multi-head attention, one per member of a query
// group for grouped-query attention. Temporaries come from the stream-ordered allocator.
//
// Ops cannot return errors; the first failure is kept and reported by status(), which the
// backend checks after each instruction.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_BACKEND_CUDA_CUDAOPS_H
#define CONDUIT_RUNTIME_BACKEND_CUDA_CUDAOPS_H

#include "runtime/Status.h"
#include "runtime/model/Ops.h"
#include "runtime/plan/Plan.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <array>
#include <memory>
#include <vector>

namespace conduit::cuda {

class CudaOps final : public model::Ops<float> {
public:
  /// Ops on `stream` of the current device; GEMMs at `precision`.
  static absl::StatusOr<std::unique_ptr<CudaOps>> create(cudaStream_t stream,
                                                         runtime::DType precision);
  /// Ops on a stream of their own (tests, benchmarks).
  static absl::StatusOr<std::unique_ptr<CudaOps>> create(runtime::DType precision);

  /// Sizes the pinned staging for micro-batches of up to `tokens` tokens, so that no pinned
  /// memory is allocated during a step (cudaMallocHost and cudaFreeHost synchronize the
  /// device, which would stall every stream, including communication waiting for peers).
  absl::Status reserveTokens(int64_t tokens);
  ~CudaOps() override;

  /// The first failure so far (OK if none).
  const absl::Status &status() const { return failure; }
  cudaStream_t stream() const { return queue; }

  model::Buffer<float> allocate(int64_t n) override;
  model::Buffer<double> allocateDouble(int64_t n) override;
  void upload(const float *host, int64_t n, float *dst) override;
  void download(const float *src, int64_t n, float *host) override;
  bool perSample() const override { return false; }
  void synchronize() override;
  void fill(int64_t n, float value, float *dst) override;
  void copy(int64_t n, const float *src, float *dst) override;
  void copyRows(int64_t rows, int64_t n, const float *src, int64_t srcStride, float *dst,
                int64_t dstStride) override;
  void add(int64_t n, const float *src, float *dst) override;
  void accumulate(int64_t n, const float *src, double *dst) override;
  void addBias(int64_t rows, int64_t n, const float *bias, float *x) override;
  void sumRows(int64_t rows, int64_t n, const float *x, float *sum) override;
  void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
            const float *b, float beta, float *c) override;
  void layerNormForward(int64_t rows, int64_t h, const float *x, const float *gamma,
                        const float *beta, double eps, float *y, float *mean, float *rstd) override;
  void layerNormBackwardInput(int64_t rows, int64_t h, const float *x, const float *gamma,
                              const float *mean, const float *rstd, const float *dy,
                              float *dx) override;
  void layerNormBackwardWeight(int64_t rows, int64_t h, const float *x, const float *mean,
                               const float *rstd, const float *dy, float *dgamma,
                               float *dbeta) override;
  void rmsNormForward(int64_t rows, int64_t h, const float *x, const float *gamma, double eps,
                      float *y, float *rstd) override;
  void rmsNormBackwardInput(int64_t rows, int64_t h, const float *x, const float *gamma,
                            const float *rstd, const float *dy, float *dx) override;
  void rmsNormBackwardWeight(int64_t rows, int64_t h, const float *x, const float *rstd,
                             const float *dy, float *dgamma) override;
  void geluForward(int64_t n, const float *x, float *y) override;
  void geluBackward(int64_t n, const float *x, const float *dy, float *dx) override;
  void swigluForward(int64_t rows, int64_t f, const float *gateUp, float *out) override;
  void swigluBackward(int64_t rows, int64_t f, const float *gateUp, const float *dout,
                      float *dGateUp) override;
  void rotaryForward(int64_t samples, int64_t seq, int64_t heads, int64_t kvHeads, int64_t headDim,
                     const runtime::RotaryPositions &rope, float *qkv) override;
  void rotaryBackward(int64_t samples, int64_t seq, int64_t heads, int64_t kvHeads, int64_t headDim,
                      const runtime::RotaryPositions &rope, float *dqkv) override;
  void attentionForward(int64_t samples, int64_t seq, int64_t heads, int64_t kvHeads,
                        int64_t headDim, const float *qkv, float *probs, float *out) override;
  void attentionBackward(int64_t samples, int64_t seq, int64_t heads, int64_t kvHeads,
                         int64_t headDim, const float *qkv, const float *probs, const float *dout,
                         float *dqkv) override;
  void embeddingForward(int64_t samples, int64_t seq, int64_t hidden, const int32_t *tokens,
                        const float *wte, const float *wpe, float *y) override;
  void embeddingBackward(int64_t samples, int64_t seq, int64_t hidden, const int32_t *tokens,
                         const float *dy, float *dwte, float *dwpe) override;
  void crossEntropy(int64_t rows, int64_t vocab, const float *logits, const int32_t *targets,
                    float scale, float *dlogits) override;
  void rowMax(int64_t rows, int64_t vocab, const float *logits, float *max) override;
  void crossEntropyPartials(int64_t rows, int64_t vocab, const float *logits,
                            const int32_t *targets, const float *max, float *sums,
                            float *picked) override;
  void crossEntropyFromPartials(int64_t rows, int64_t vocab, const float *logits,
                                const int32_t *targets, const float *max, const float *sums,
                                const float *picked, float scale, bool countLoss,
                                float *dlogits) override;
  double takeLoss() override;

  /// Row-major C = alpha · op(A) · op(B) + beta · C for `batch` matrices at the given
  /// leading dimensions and strides (elements).
  void gemmStrided(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha,
                   const float *a, int64_t lda, int64_t strideA, const float *b, int64_t ldb,
                   int64_t strideB, float beta, float *c, int64_t ldc, int64_t strideC,
                   int64_t batch);

private:
  CudaOps(cudaStream_t stream, cublasHandle_t blas, cublasComputeType_t compute);
  template <typename T> model::Buffer<T> deviceBuffer(int64_t n);
  /// Host ids on the device, through a pinned staging buffer.
  model::Buffer<int32_t> uploadIds(const int32_t *host, int64_t n);

  cudaStream_t queue;
  bool ownsQueue = false;
  cublasHandle_t blas;
  cublasComputeType_t compute;
  absl::Status failure;
  double *lossDevice = nullptr, *lossHost = nullptr;
  /// Pinned staging for id uploads: several in rotation, each free again once its event has
  /// passed. Outgrown buffers are kept until the end (freeing pinned memory synchronizes).
  struct Staging {
    int32_t *host = nullptr;
    int64_t capacity = 0;
    cudaEvent_t copied = nullptr;
  };
  std::array<Staging, 8> staging;
  size_t nextStaging = 0;
  std::vector<int32_t *> outgrown;
};

} // namespace conduit::cuda

#endif // CONDUIT_RUNTIME_BACKEND_CUDA_CUDAOPS_H

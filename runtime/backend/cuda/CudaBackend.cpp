//===- CudaBackend.cpp - plans on NVIDIA GPUs -----------------------------===//

#include "runtime/backend/cuda/CudaBackend.h"

#include "runtime/backend/cuda/CudaCheck.h"
#include "runtime/backend/cuda/EventWork.h"
#include "runtime/backend/cuda/Kernels.h"

#include "absl/strings/str_cat.h"

#include <cmath>
#include <vector>

namespace conduit::cuda {

using runtime::Instruction;
using runtime::Op;

CudaBackend::CudaBackend(int64_t rank, int64_t worldSize, int device, bool measureLayers,
                         runtime::TransportFactory makeTransport)
    : BackendCore(rank, measureLayers), worldSize(worldSize), device(device),
      makeTransport(std::move(makeTransport)) {}

CudaBackend::~CudaBackend() {
  // Communication still in flight means the run failed; its kernels may wait for a peer that
  // will never come, so stop them before waiting for the streams.
  if (communicating())
    abort();
  absl::Status ignored;
  for (cudaStream_t s : allStreams())
    CONDUIT_CUDA_NOTE(ignored, cudaStreamSynchronize(s));
  // Everything allocated on the streams goes before the streams, and before the Ops.
  release();
  math.reset();
  for (cudaEvent_t e : events)
    CONDUIT_CUDA_NOTE(ignored, cudaEventDestroy(e));
  if (fence)
    CONDUIT_CUDA_NOTE(ignored, cudaEventDestroy(fence));
  for (cudaStream_t s : allStreams())
    CONDUIT_CUDA_NOTE(ignored, cudaStreamDestroy(s));
}

std::vector<cudaStream_t> CudaBackend::allStreams() const {
  std::vector<cudaStream_t> all;
  for (cudaStream_t s : streams)
    if (s)
      all.push_back(s);
  for (cudaStream_t s : passStreams)
    if (s)
      all.push_back(s);
  return all;
}

absl::StatusOr<int> CudaBackend::deviceCount() {
  int count = 0;
  const cudaError_t result = cudaGetDeviceCount(&count);
  if (result != cudaSuccess || count == 0)
    return absl::UnavailableError(
        absl::StrCat("no CUDA device is usable here (",
                     result == cudaSuccess ? "none found" : cudaGetErrorString(result), ")"));
  return count;
}

absl::Status CudaBackend::validate(const runtime::Plan &p) {
  const runtime::Config &c = p.config;
  if (worldSize != c.worldSize())
    return absl::FailedPreconditionError(
        absl::StrCat("the plan runs on ", c.worldSize(), " ranks (pipeline ", c.pipeline,
                     " x data ", c.data, c.tensor > 1 ? absl::StrCat(" x tensor ", c.tensor) : "",
                     "); this run has ", worldSize, ": start it with mpirun -np ", c.worldSize(),
                     ", or on one GPU with --ranks-per-process=", c.worldSize()));
  CONDUIT_RETURN_IF_ERROR(validateModel(p, "CUDA"));
  if (c.adamMoments == runtime::AdamMoments::BF16)
    return absl::FailedPreconditionError(
        "the plan keeps Adam's moments in bf16 (training.adam_moments), which the CUDA "
        "backend's optimizer does not: compile it without the key (fp32 moments), or run it on "
        "the CPU backend");
  for (const runtime::RankProgram &program : p.ranks)
    for (const Instruction &inst : program.instructions) {
      const bool compute = inst.isCompute() || inst.op == Op::OptimizerStep || inst.op == Op::Free;
      if (compute && inst.stream != runtime::kComputeStream)
        return absl::FailedPreconditionError(absl::StrCat(describe(inst), " is on stream ",
                                                          inst.stream,
                                                          "; the CUDA backend computes on "
                                                          "stream ",
                                                          runtime::kComputeStream, " only"));
    }
  CONDUIT_ASSIGN_OR_RETURN(int count, deviceCount());
  if (device >= count)
    return absl::FailedPreconditionError(
        absl::StrCat("device ", device, " does not exist; this machine has ", count));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<runtime::Transport>> CudaBackend::connect(const runtime::Plan &p) {
  CONDUIT_CUDA(cudaSetDevice(device));
  const runtime::RankProgram &program = p.ranks[where.pipelineRank];
  int numStreams = runtime::kCollectiveStream + 1;
  for (const Instruction &inst : program.instructions)
    numStreams = std::max(numStreams, inst.stream + 1);
  streams.assign(numStreams, nullptr);
  for (cudaStream_t &s : streams)
    CONDUIT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  events.assign(program.events, nullptr);
  for (cudaEvent_t &e : events)
    CONDUIT_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  if (p.config.expert > 1) {
    for (cudaStream_t &s : passStreams)
      CONDUIT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CONDUIT_CUDA(cudaEventCreateWithFlags(&fence, cudaEventDisableTiming));
  }
  CONDUIT_ASSIGN_OR_RETURN(math, CudaOps::create(streams[runtime::kComputeStream], p.config.dtype));
  return makeTransport(p);
}

absl::Status CudaBackend::initialised() {
  CONDUIT_RETURN_IF_ERROR(math->reserveTokens(largestMicrobatch() * shape->seq));
  math->synchronize();
  return math->status();
}

absl::StatusOr<model::Buffer<float>> CudaBackend::gatherBuffer(int64_t n,
                                                               runtime::StreamHandle allocateOn,
                                                               runtime::StreamHandle releaseOn) {
  float *p = nullptr;
  cudaStream_t first = static_cast<cudaStream_t>(allocateOn);
  cudaStream_t last = static_cast<cudaStream_t>(releaseOn);
  CONDUIT_CUDA(cudaMallocAsync(reinterpret_cast<void **>(&p), n * sizeof(float), first));
  CONDUIT_CUDA(cudaMemsetAsync(p, 0, n * sizeof(float), first));
  return model::Buffer<float>(
      p, n,
      [last](float *q) {
        absl::Status ignored; // the stream outlives the buffer; a failure here has no caller
        CONDUIT_CUDA_NOTE(ignored, cudaFreeAsync(q, last));
      },
      &math->memory());
}

absl::Status CudaBackend::zeroGradients(float *grads, int64_t n, runtime::StreamHandle stream) {
  CONDUIT_CUDA(cudaMemsetAsync(grads, 0, n * sizeof(float), static_cast<cudaStream_t>(stream)));
  return absl::OkStatus();
}

absl::Status CudaBackend::applyOptimizer(int64_t t, int64_t n, float *params, float *state,
                                         const float *grads) {
  cudaStream_t stream = math->stream();
  const model::OptimizerConfig &o = optimizer;
  if (o.kind == runtime::Optimizer::SGD) {
    CONDUIT_CUDA(sgdStep(n, static_cast<float>(o.learningRate), params, grads, stream));
  } else {
    CONDUIT_CUDA(adamStep(n, static_cast<float>(o.learningRate), static_cast<float>(o.beta1),
                          static_cast<float>(o.beta2), static_cast<float>(o.epsilon),
                          static_cast<float>(1 - std::pow(o.beta1, static_cast<double>(t))),
                          static_cast<float>(1 - std::pow(o.beta2, static_cast<double>(t))), params,
                          state, grads, stream));
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::balanceBiases(float *params, float *grads,
                                        absl::Span<const int64_t> offsets, double rate,
                                        double mean) {
  // Each run of consecutive offsets (a block's experts) comes to the host after what the
  // compute stream did before, moves by model::balanceBias, the rule of the CPU backend and the
  // reference, bit for bit, and goes back before the optimizer's kernel reads it: a few
  // small copies per block with experts and step.
  cudaStream_t stream = math->stream();
  for (size_t first = 0; first < offsets.size();) {
    size_t end = first + 1;
    while (end < offsets.size() && offsets[end] == offsets[end - 1] + 1)
      ++end;
    const int64_t at = offsets[first], n = static_cast<int64_t>(end - first);
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    std::vector<float> bias(n), count(n);
    CONDUIT_CUDA(cudaMemcpyAsync(bias.data(), params + at, bytes, cudaMemcpyDeviceToHost, stream));
    CONDUIT_CUDA(cudaMemcpyAsync(count.data(), grads + at, bytes, cudaMemcpyDeviceToHost, stream));
    CONDUIT_CUDA(cudaStreamSynchronize(stream));
    for (int64_t i = 0; i < n; ++i) {
      double c = count[i];
      model::balanceBias(rate, mean, bias[i], c);
      count[i] = static_cast<float>(c);
    }
    CONDUIT_CUDA(cudaMemcpyAsync(params + at, bias.data(), bytes, cudaMemcpyHostToDevice, stream));
    CONDUIT_CUDA(cudaMemcpyAsync(grads + at, count.data(), bytes, cudaMemcpyHostToDevice, stream));
    CONDUIT_CUDA(cudaStreamSynchronize(stream)); // the host copies go out of scope
    first = end;
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::signal(int stream, int32_t event) {
  if (event < 0 || event >= static_cast<int32_t>(events.size()))
    return absl::InternalError(absl::StrCat("event ", event, " does not exist"));
  CONDUIT_CUDA(cudaEventRecord(events[event], streams[stream]));
  return absl::OkStatus();
}

absl::Status CudaBackend::wait(int stream, int32_t event) {
  if (event < 0 || event >= static_cast<int32_t>(events.size()))
    return absl::InternalError(absl::StrCat("event ", event, " does not exist"));
  CONDUIT_CUDA(cudaStreamWaitEvent(streams[stream], events[event], 0));
  return absl::OkStatus();
}

runtime::StreamHandle CudaBackend::passStream(runtime::GroupPass pass) {
  return passStreams[static_cast<int>(pass)];
}

absl::Status CudaBackend::order(runtime::StreamHandle earlier, runtime::StreamHandle later) {
  // A wait takes the event's state when it is enqueued, so one event serves every fence.
  CONDUIT_CUDA(cudaEventRecord(fence, static_cast<cudaStream_t>(earlier)));
  CONDUIT_CUDA(cudaStreamWaitEvent(static_cast<cudaStream_t>(later), fence, 0));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<runtime::Work>> CudaBackend::drained(runtime::StreamHandle stream) {
  CONDUIT_ASSIGN_OR_RETURN(std::unique_ptr<EventWork> work,
                           EventWork::after(static_cast<cudaStream_t>(stream)));
  return work;
}

absl::Status CudaBackend::synchronizeAll() {
  for (cudaStream_t s : allStreams())
    CONDUIT_CUDA(cudaStreamSynchronize(s));
  return absl::OkStatus();
}

} // namespace conduit::cuda

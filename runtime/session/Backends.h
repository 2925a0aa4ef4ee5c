//===- Backends.h - the backends this build has -----------------*- C++ -*-===//
//
// The one place that knows which backends a binary has: the CPU backend always, the CUDA
// backend in conduit-run-cuda, built where nvcc and NCCL were found (conduit-run itself links
// no CUDA library and becomes conduit-run-cuda for --backend=cuda). The session asks for a factory
// of its ranks' backends, either one backend per MPI process or every rank of a plan as a thread of
// this process (loopback: on the CPU, or on one GPU), and never names a backend class itself.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_SESSION_BACKENDS_H
#define CONDUIT_RUNTIME_SESSION_BACKENDS_H

#include "runtime/exec/Backend.h"
#include "runtime/exec/Mpi.h"

#include <functional>
#include <memory>
#include <string>

namespace conduit::runtime {

/// Makes the backend of global rank `rank`; `measureLayers` times layers for --profile.
using BackendFactory =
    std::function<absl::StatusOr<std::unique_ptr<Backend>>(int64_t rank, bool measureLayers)>;

/// Backend `kind` ("cpu", "cuda") for the process of `world`, one rank per process. Fails when
/// this build or machine has no such backend.
absl::StatusOr<BackendFactory> processBackends(const std::string &kind, const MpiWorld &world);

/// Backend `kind` for every rank of `plan` as a thread of this process (the CPU, or one GPU),
/// meeting in a loopback hub whose blocking calls give up after `timeoutS`. A rank's
/// backend's abort() stops every rank's communication.
absl::StatusOr<BackendFactory> loopbackBackends(const std::string &kind, const Plan &plan,
                                                double timeoutS);

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_SESSION_BACKENDS_H

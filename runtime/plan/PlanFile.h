//===- PlanFile.h - reading and writing plan files --------------*- C++ -*-===//
//
// Converts plans to and from the FlatBuffers file format (plan.fbs): PlanWriter.cpp writes,
// PlanReader.cpp reads. Reading treats the bytes as untrusted: identifier, FlatBuffers
// structure, format version and feature bits first, then every semantic rule a runtime relies
// on (PlanChecks.h: references resolve, counts and ranges agree, every send has the matching
// receive in the same per-pair order), before anything is returned.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_PLAN_PLANFILE_H
#define CONDUIT_RUNTIME_PLAN_PLANFILE_H

#include "runtime/Status.h"
#include "runtime/plan/Plan.h"

#include "flatbuffers/detached_buffer.h"

#include <string>

namespace conduit::runtime {

/// Plan files larger than this are refused before they are read (the FlatBuffers limit).
constexpr uint64_t kMaxPlanFileBytes = (uint64_t(1) << 31) - 1;

/// The plan file bytes of `plan`, built in one buffer of their final size: the way to write a
/// large plan (its instructions are copied once).
flatbuffers::DetachedBuffer planBytes(const Plan &plan);

/// The same bytes from a plan that is not needed afterwards: each rank's instructions are freed
/// once they are in the buffer, and the memory they held goes back to the system
/// (releaseFreedMemory, runtime/Heap.h), so that the plan and its bytes are not held at once.
/// `plan` keeps everything but its instructions.
flatbuffers::DetachedBuffer planBytes(Plan &&plan);

/// The plan file bytes of `plan`, as a string (one more copy of them).
std::string writePlan(const Plan &plan);

/// Writes `plan` to `path` through a temporary file and a rename, so that a failure never
/// leaves a partial file behind.
absl::Status writePlanFile(const Plan &plan, const std::string &path);

/// The fields of the plan's attention variants, mixture of experts and expert parallelism
/// (format 5) in range and consistent with each other and with the layer chain; an error names
/// the field as plan.fbs does. readPlan applies it before checkPlanSemantics.
absl::Status checkModelFields(const Plan &plan);

/// Verifies and reads plan file bytes.
absl::StatusOr<Plan> readPlan(const void *data, size_t size);

/// Reads and verifies the plan file at `path`.
absl::StatusOr<Plan> readPlanFile(const std::string &path);

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_PLAN_PLANFILE_H

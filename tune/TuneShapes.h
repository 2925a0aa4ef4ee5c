//===- TuneShapes.h - the shapes of conduit-tune's space -------*- C++ -*-===//
//
// A shape is what a configuration says of the parallelism's static layout (P, D, T, sequence
// parallelism, E, sharding). The search lists only the shapes whose static state can fit,
// bounds each by its static memory once, and lets configurations of one shape that differ only
// in the keys the reader reads on their own (the split of backwards, checkpointing, sharding,
// FSDP window, rank order) share the reader's verdict.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_TUNE_TUNESHAPES_H
#define CONDUIT_TUNE_TUNESHAPES_H

#include "job/JobSpec.h"
#include "tune/TuneSpace.h"

#include <map>
#include <optional>
#include <tuple>

namespace conduit {

/// The parallelism section's fields the static memory bound reads, from a configuration.
ParallelismSpec staticShape(const Configuration &c);

/// The static memory bound of the starting job by the fields it reads (P, D, T, sequence
/// parallelism, sharding, E), each computed once.
struct StaticBounds {
  int64_t bound(const Job &model, const ParallelismSpec &par);
  std::map<std::tuple<int64_t, int64_t, int64_t, bool, int, int64_t>, int64_t> bounds;
};

/// Whether `a` and `b` assign the same values to every key but the leaf keys (the split of
/// backwards, checkpointing, sharding, FSDP window, rank order), which the job-file reader reads
/// on their own: no rule relates them to another key but the split's to the schedule.
bool sameShape(const Configuration &a, const Configuration &b);

/// `shape` (what the reader made of a configuration of the same shape) with the leaf keys of
/// `c`, as the reader would read them (absent keys take the section's defaults); nullopt when
/// a value is not one the reader takes, which it must then see.
std::optional<ParallelismSpec> withLeaves(const ParallelismSpec &shape, const Configuration &c);

} // namespace conduit

#endif // CONDUIT_TUNE_TUNESHAPES_H

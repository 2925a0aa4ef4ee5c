//===- TensorGroup.h - the collectives of a tensor-parallel group -*- C++ -*-===//
//
// With tensor parallelism every layer is split over the ranks of a tensor group (Gpt.h), and
// the layers communicate inside their compute: the row-parallel projections' all-reduces,
// with sequence parallelism the all-gathers and reduce-scatters along the sequence, the
// parallel cross-entropy's row statistics. A backend gives its Ops a TensorGroup; the layers
// call it as they compute, in the order runtime/plan/TensorCollectives.h states.
//
// Calls are collective: every member makes the same calls in the same order, with the same
// counts. Buffers are memory of the Ops. On the host a call returns once the data is there;
// on a device it is ordered on the compute stream. Members of a group compute identical sums
// (the same bits on every member). Failures do not return: the implementation keeps the
// first and the backend reports it after the compute.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_MODEL_TENSORGROUP_H
#define CONDUIT_RUNTIME_MODEL_TENSORGROUP_H

#include <cstdint>

namespace conduit::model {

enum class Reduction { Sum, Max };

template <typename T> class TensorGroup {
public:
  virtual ~TensorGroup() = default;
  /// data = the element-wise sum (or maximum) of every member's data, in place.
  virtual void allReduce(int64_t n, T *data, Reduction op = Reduction::Sum) = 0;
  /// full[r · n, (r + 1) · n) = the shard of member r.
  virtual void allGather(int64_t n, const T *shard, T *full) = 0;
  /// shard = Σ over members of their full[position · n, (position + 1) · n).
  virtual void reduceScatter(int64_t n, const T *full, T *shard) = 0;
};

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_TENSORGROUP_H

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
#include <vector>

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

/// Expert parallelism: the E ranks of an expert group (Megatron-Core's parallel folding; the
/// mixture of experts' layer, layers/Moe.h) exchange routed tokens with all-to-alls inside the
/// compute, in the order runtime/plan/TensorCollectives.h states. Members are positioned
/// 0 to E - 1; every member makes the same calls in the same order. Failures do not return, as
/// in TensorGroup.
/// Which of the plan's all-to-alls an exchange is: the dispatch (or, in a backward, its
/// gradient), the combine (or its gradient), or the token counts that precede a dispatch and
/// belong to it.
enum class ExpertExchange { Counts, Dispatch, Combine };

/// How many routed tokens a rank's experts took per piece of a micro-batch, over the balanced
/// share (the mean over its expert group): the largest ratio, their sum and how many. With a
/// capacity, also the assignments the router chose for the rank's tokens and how many of them
/// the capacity dropped.
struct RoutedLoad {
  double peak = 0, sum = 0;
  int64_t pieces = 0;
  int64_t assignments = 0, dropped = 0;
};

template <typename T> class ExpertGroup {
public:
  virtual ~ExpertGroup() = default;
  virtual int64_t size() const = 0;
  virtual int64_t position() const = 0;
  /// The all-to-all-v: this member sends sendCounts[j] elements of `send` (in member order)
  /// to member j and receives recvCounts[j] from member j into `recv` (in member order).
  virtual void allToAll(ExpertExchange what, const T *send, const std::vector<int64_t> &sendCounts,
                        T *recv, const std::vector<int64_t> &recvCounts) = 0;
};

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_TENSORGROUP_H

//===- StageLayout.h - where a rank keeps its parameters of a stage -*- C++ -*-===//
//
// A rank keeps its parameters of a stage (layers [first, end) of the plan's chain) in one flat
// array. Without tensor or expert parallelism that array is the stage's slice of the model's
// flat parameters, which the plan and the Hugging Face files lay out layer by layer. With
// tensor parallelism it holds each layer's tensor-rank part (Layer::slice: where each run of
// the part lies in the whole layer). With expert parallelism it holds, of each block with
// experts, only the rank's routed experts (Layer::expertParams). With expert or tensor
// parallelism (each tensor rank routes its own tokens through them) it keeps them apart: every
// layer's other parameters come first, in layer order (the dense segment), then, from
// `expertsAt`, the routed experts of each layer in layer order (the expert segment). The two
// segments are reduced and sharded over different groups — the D replicas, and the ranks
// holding the same experts (the expert-data group) — so each must be one contiguous range:
// `align` (the dense segment's shard count) rounds expertsAt up so that the dense segment
// pads and shards on its own; the gap between them is zero and stays zero.
//
// The one statement of that layout: the LayerChain places its layers by it, and the backends'
// sharding, their checkpoints, --init and --save-params convert by it.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_MODEL_STAGELAYOUT_H
#define CONDUIT_RUNTIME_MODEL_STAGELAYOUT_H

#include "runtime/model/GptShape.h"
#include "runtime/model/layers/Layer.h"
#include "runtime/plan/Plan.h"

#include <cstdint>
#include <vector>

namespace conduit::model {

class StageLayout {
public:
  /// The layout of shape's rank (its tensorRank and expertRank) for layers [first, end) of
  /// `plan`. Custom layers (which conduit-run refuses to train) count the plan's parameters.
  static StageLayout of(const runtime::Plan &plan, const GptShape &shape, int64_t first,
                        int64_t end, int64_t align = 1);

  /// The array's elements, the gap between the segments included.
  int64_t size() const { return expertsAt + experts; }
  /// The dense segment's elements, where the expert segment starts, and its elements (0
  /// without expert parallelism, when expertsAt == dense).
  int64_t dense = 0, expertsAt = 0, experts = 0;
  /// The whole layers' parameters (what the plan counts for them).
  int64_t whole = 0;
  /// Per layer of the range: where its parameters (all of them but its routed experts, which
  /// follow without expert parallelism) and where its routed experts start.
  std::vector<int64_t> layerAt, layerExpertsAt;
  /// Each run of the array in the whole layers' flat parameters (`whole` offsets from the
  /// range's first layer, `local` in the array).
  std::vector<ParameterRun> runs;

  /// Where the expert segment starts after `dense` elements: the next multiple of `align`, or
  /// `dense` itself when there are no routed experts.
  static int64_t expertsStart(int64_t dense, int64_t experts, int64_t align) {
    return experts > 0 ? (dense + align - 1) / align * align : dense;
  }

  /// The rank's array from the whole layers' parameters; the gap is zero.
  std::vector<float> part(const float *wholeParams) const;
  /// Writes the rank's array into its places in the whole layers' parameters.
  void intoWhole(const float *partParams, float *wholeParams) const;
};

/// Where a rank's array lies among the parts that split a model: its tensor rank and its place
/// in its expert group.
struct PartPlace {
  int64_t tensorRank = 0, expertRank = 0;
};
/// The whole layers' parameters of layers [first, end) from the arrays of ranks that together
/// hold every part (each tensor rank's, each expert place's), `parts` holding the i-th's at
/// i · size (StageLayout::of(..., align) for `places[i]`). What several hold is taken from each
/// (they hold the same bits).
std::vector<float> wholeFromParts(const runtime::Plan &plan, const GptShape &shape, int64_t first,
                                  int64_t end, int64_t align, const float *parts,
                                  const std::vector<PartPlace> &places);

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_STAGELAYOUT_H

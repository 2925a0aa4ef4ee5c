//===- TensorCollectives.h - what a tensor group communicates ---*- C++ -*-===//
//
// With tensor parallelism (config.tensor T > 1) every layer is split over the T ranks of a
// tensor group as Megatron-LM splits it (Shoeybi et al. 2019; Korthikanti et al. 2022 for
// sequence parallelism), and its compute communicates inside the group. This file is the one
// statement of which collectives a compute instruction issues, in which order, and how many
// bytes each moves: the compiler writes them into the plan after their compute instruction,
// the plan reader and the simulator check a plan against it, and the runtime's layers issue
// exactly these (a backend refuses a compute whose layers issue anything else).
//
// Per layer, with `x` the bytes of the layer's full hidden activations for the micro-batch
// (samples x output bytes per sample; the head uses its input's) and `ce` the bytes of one
// float per token (the parallel cross-entropy's row statistics):
//
//   layer      pass     without sequence parallelism    with sequence parallelism
//   embedding  forward  all-reduce x                     reduce-scatter x
//              input    -                                all-gather x (the output gradient)
//   block      forward  all-reduce x (attention out),    all-gather x, reduce-scatter x
//                       all-reduce x (MLP out)           (attention), the same pair (MLP)
//              input    all-reduce x (MLP input grad),   all-gather x, reduce-scatter x (MLP),
//                       all-reduce x (attention's)       the same pair (attention)
//              weight   -                                all-gather x (MLP's normed input,
//                                                        again), all-gather x (attention's),
//                                                        all-reduce n (the norms' gradients)
//   head       forward  all-reduce ce three times        all-gather x, then the three
//                       (row max, sum of exponentials,
//                       target logit)
//              input    all-reduce x (input gradient)    reduce-scatter x
//              weight   -                                all-gather x (the normed input,
//                                                        again), all-reduce n (the norm's)
//
// `n` is the bytes of the layer's norm parameters' gradients, counted as LayerNorm's gain and
// bias at the activations' width (2 h elements per norm for hidden size h; RMSNorm's are half
// of it). With sequence parallelism each rank computes the norms on its shard of the sequence,
// so their parameters' gradients cover that shard only and are summed over the group, once per
// weight pass (Megatron-LM sums them once per step; per weight pass keeps each compute's
// collectives a function of the compute alone). Every other replicated parameter's gradient is
// computed whole on every rank: the row-parallel biases' and the position table's from their
// gathered output gradients.
//
// Custom layers of a layer list are priced as blocks. A compute instruction issues, for its
// stage's layers [first, end):
//   forward          each layer's forward collectives, first to last;
//   backward         per layer from last to first: the forward's again when checkpointing is
//                    "full" (the layer is recomputed from its saved input), then the input
//                    pass's, then the weight pass's;
//   backward_input   per layer from last to first: the recomputed forward's ("full"), then the
//                    input pass's;
//   backward_weight  per layer from last to first: the weight pass's.
// Selective checkpointing recomputes the attention core only, which needs no collective.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_PLAN_TENSORCOLLECTIVES_H
#define CONDUIT_RUNTIME_PLAN_TENSORCOLLECTIVES_H

#include "runtime/plan/Plan.h"

#include <cstdint>
#include <vector>

namespace conduit::runtime {

/// One collective of a tensor group: TensorAllReduce, TensorAllGather or TensorReduceScatter,
/// issued by layer `layer` (global index) and moving `bytes` (the whole, unsplit buffer).
struct TensorCollective {
  Op op = Op::TensorAllReduce;
  int32_t layer = 0;
  int64_t bytes = 0;
};

/// The collectives of `pass` (Forward, BackwardInput or BackwardWeight) of layer `layer`
/// alone on `samples` samples, appended to `out`: the table above. None when T is 1.
void appendLayerCollectives(const Config &config, const std::vector<Layer> &layers, int32_t layer,
                            Op pass, int64_t samples, std::vector<TensorCollective> &out);

/// The collectives compute instruction `compute` (Forward, Backward, BackwardInput or
/// BackwardWeight) of layers [first, end) issues on a micro-batch of `samples` samples, in
/// order. Empty when T is 1.
std::vector<TensorCollective> tensorCollectives(const Config &config,
                                                const std::vector<Layer> &layers, int32_t first,
                                                int32_t end, Op compute, int64_t samples);

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_PLAN_TENSORCOLLECTIVES_H

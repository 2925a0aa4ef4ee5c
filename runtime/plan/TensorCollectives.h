//===- TensorCollectives.h - what a compute communicates inside itself -*- C++ -*-===//
//
// With tensor parallelism (config.tensor T > 1) every layer is split over the T ranks of a
// tensor group as Megatron-LM splits it (Shoeybi et al. 2019; Korthikanti et al. 2022 for
// sequence parallelism), and its compute communicates inside the group; with expert
// parallelism (config.expert E > 1) a mixture-of-experts block sends its routed tokens to the
// ranks of its expert group that hold their experts and receives the outputs back (two
// all-to-alls). This file is the one statement of which of these inner collectives a compute
// instruction issues, in which order, and how many bytes each moves: the compiler writes them
// into the plan after their compute instruction, the plan reader and the simulator check a
// plan against it, and the runtime's layers issue exactly these (a backend refuses a compute
// whose layers issue anything else).
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
//              input    all-reduce x (MLP input grad),   [all-gather x: the recomputed MLP's
//                       all-reduce x (attention's)       normed input, selective `mlp` only],
//                                                        all-gather x, reduce-scatter x (MLP),
//                                                        [all-gather x or l: the recomputed
//                                                        latent heads' input, see below], the
//                                                        same pair (attention)
//              weight   [all-reduce q: the q/k norms'    all-gather x (MLP's normed input,
//                       gains, with qk_norm]             again), all-gather x (attention's),
//                       [all-reduce m: latent            [all-reduce q], [all-reduce m],
//                       attention's replicated           all-reduce n (the norms' gradients)
//                       parameters]
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
// collectives a function of the compute alone). `q` is the bytes of the q/k norms' gains (a
// transformer with qk_norm, Qwen3): two of a head's width at the activations' element bytes.
// Each rank normalises its own heads with the gains every rank holds, so with or without
// sequence parallelism their gradients are partial and summed over the group in each weight
// pass (Megatron-LM sums them with the norms' once per step). Multi-head latent attention
// (DeepSeek-V2/V3) splits its heads as attention does (the up projections column-parallel, the
// output projection row-parallel) and keeps its down projections and the latents' norms whole on
// every rank: their gradients come from the rank's own heads (and rows) and are summed over the
// group in each weight pass, `m` the bytes of those parameters at the activations' element bytes
// (h x (q_lora + kv_lora + rope) + q_lora + kv_lora elements; without a query latent
// h x (kv_lora + rope) + kv_lora), where Megatron-Core sums its duplicated down projections'
// once per step. Without sequence parallelism each rank computes the latents on the whole
// sequence and the block's table holds as it is. With sequence parallelism and a query latent
// (Megatron-Core's split) each rank computes the latents of its own rows: the attention's pair
// becomes all-gather l, reduce-scatter x in the forward and all-gather x, reduce-scatter l in
// the input pass (`l` the normalised latents and the rotary key of every token, samples x seq x
// (q_lora + kv_lora + rope) elements, or their gradients), and its weight pass gathers `u`
// (the normalised latents, q_lora + kv_lora a token) in place of its input. Without a query
// latent the queries' projection reads the whole sequence's input: the attention's own pair.
// With sequence parallelism and the heads recomputed (selective `mla_up_proj`) the
// recomputation gathers again what the forward gathered, l or x (the input row's second
// bracket). Every other replicated parameter's gradient is computed whole on every rank: the
// row-parallel biases' and the position table's from their gathered output gradients.
//
// Mixture of experts (a transformer with `moe`, blocks from index dense_layers on): the block's
// MLP is a router, the routed experts and, optionally, shared experts, split as the dense MLP is.
// With T > 1 each tensor rank routes the tokens of its T-th of each sample (its sequence shard
// with sequence parallelism; without, it takes that T-th of the whole sequence it holds). Its
// forward issues, after the attention's collectives, the shared experts' (the dense MLP's
// above, when the block has them); with T > 1 and a capacity a tensor_all_gather of each
// member's counts of its choices (samples x experts floats from each, which tell a member how
// many of a sample's assignments of each expert come before its part), or with
// `drop_by_weight` of each member's assignments (samples x 2 x seq / T x top_k floats from each:
// every assignment's expert and weight, from which each member ranks a sample's assignments of
// each expert); with T > 1 and an
// auxiliary loss a tensor_all_reduce of
// the samples' routing statistics (samples x 2 x experts floats: each expert's count and summed
// score over the rank's tokens, which the per-sequence loss needs over the whole sequence);
// with E > 1 expert_dispatch a (each routed token to its expert's rank) and expert_combine a
// (the experts' outputs back); with T > 1 and without sequence parallelism a tensor_all_gather
// x that puts the routed output back together. The input pass: the shared experts'
// collectives, expert_combine a (the outputs' gradients to the experts), expert_dispatch a
// (the tokens' gradients back), the tensor_all_gather x (without sequence parallelism), then
// the attention's. The weight pass issues no all-to-all; with T > 1: with sequence parallelism
// the shared experts' gathered input again (when the block has them), a tensor_all_reduce r of
// the router's gradient (experts x hidden at the activations' element bytes: each rank's comes
// from its own tokens), then as a dense block the attention's gathered input (or latent
// attention's `u`), [the q/k norms' gains or latent attention's `m`] and the norms' gradients. `a`
// is the bytes of the routed tokens this rank sends, bounded by the stated imbalance
// (Transformer::imbalance, the busiest rank's routed tokens over the mean): ceil(tokens x top_k x
// imbalance) x hidden x element bytes, tokens = samples x seq / T (rounded up); with
// Transformer::fp8Dispatch the first of each pair (the tokens, or their output gradients, to the
// experts) moves ceil(tokens x top_k x imbalance) x (hidden + 4 x ceil(hidden / 128)) bytes. With E
// = 1 the experts are all local and no all-to-all is issued.
//
// An expert all-to-all's `group` is the plan group of its pipeline rank (the one its
// data-parallel collectives name); the ranks it exchanges with are the expert group of the
// issuing process, expertGroupRanks() below. Where a schedule pairs a forward with the next
// compute of another micro-batch (Instruction::kPaired, DualPipe's overlapped chunks), each
// all-to-all of either may hide behind the other's computation: it then names that compute
// in `peer_stage` and `peer_microbatch` (else both are -1). It never names its own compute,
// which reads its result.
//
// A multi-token prediction module (a block after the model's num_layers; runtime/model/layers/
// Mtp.h) issues its block's collectives, with `x` one hidden state a token (it passes on two),
// between those of the embedding and the head it borrows from: in the forward first the
// embedding's (its lookup of the table's vocabulary rows summed), then the block's, then the
// head's (the normed rows gathered with sequence parallelism, the three statistics); in the
// input pass first the head's, then the block's, then with sequence parallelism all-gather x
// (the lookup's output gradient over the whole sequence, which the table's rows read); in the
// weight pass, with sequence parallelism, all-gather x (the normed rows again, for the head's
// matrix), the block's, then all-reduce of its three norms' gradients and its projection M's
// (normBytes of three norms and 2h x h at the activations' element bytes: each rank computes
// them on its own rows).
//
// Custom layers of a layer list are priced as blocks. A compute instruction issues, for its
// stage's layers [first, end):
//   forward          each layer's forward collectives, first to last;
//   backward         per layer from last to first: the forward's again when the layer is
//                    recomputed from its saved input (checkpointing "full", or "blocks" for
//                    a layer other than the embedding and the head), then the input pass's,
//                    then the weight pass's;
//   backward_input   per layer from last to first: the recomputed forward's (as above), then
//                    the input pass's;
//   backward_weight  per layer from last to first: the weight pass's.
// Selective checkpointing's recomputations need no collective (the attention core, the norms
// on their rows, the routed experts' activations on their tokens), except under sequence
// parallelism a dense block's MLP (`mlp`), whose first projection reads the whole sequence: its
// input pass starts by gathering the normed input again (the table's first bracket); and
// latent attention's heads (`mla_up_proj`), which gather again what the forward gathered before
// the attention's input pass (the second).
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_PLAN_TENSORCOLLECTIVES_H
#define CONDUIT_RUNTIME_PLAN_TENSORCOLLECTIVES_H

#include "runtime/plan/Plan.h"

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

namespace conduit::runtime {

/// One collective a compute issues inside itself: a tensor group's (TensorAllReduce,
/// TensorAllGather or TensorReduceScatter; `bytes` the whole, unsplit buffer) or an expert
/// group's all-to-all (ExpertDispatch, ExpertCombine; `bytes` what this rank sends), issued by
/// layer `layer` (global index).
struct TensorCollective {
  Op op = Op::TensorAllReduce;
  int32_t layer = 0;
  int64_t bytes = 0;
  bool isExpertAllToAll() const { return runtime::isExpertAllToAll(op); }
};

/// Whether layer `layer` of the chain is a block with routed experts (`transformer` may be
/// null: a layer list has none).
bool layerHasExperts(const Transformer *transformer, const std::vector<Layer> &layers,
                     int32_t layer);
/// The bytes one expert all-to-all of a micro-batch of `samples` samples moves from this rank
/// (the table above); `toExperts` (the forward's expert_dispatch, the input pass's
/// expert_combine) with Transformer::fp8Dispatch: one byte an element and an fp32 scale per
/// 128 of the hidden size.
int64_t expertAllToAllBytes(const Config &config, const Transformer &transformer, int64_t samples,
                            bool toExperts);
/// Global ranks of the expert group of the process at (pipeline rank, replica, tensor rank):
/// its pipeline rank's D x T ranks indexed replica x T + tensor rank, cut into groups of E
/// consecutive indices (Megatron-Core's parallel folding). Ascending by index.
std::vector<int64_t> expertGroupRanks(const Config &config, int64_t pipelineRank, int64_t replica,
                                      int64_t tensorRank);
/// Global ranks of the tensor group of (pipeline rank, replica), by tensor rank.
std::vector<int64_t> tensorGroupRanks(const Config &config, int64_t pipelineRank, int64_t replica);
/// Global ranks of its expert-data group: the D x T / E ranks of its pipeline rank whose index
/// has the same remainder mod E, which hold the same experts.
std::vector<int64_t> expertDataGroupRanks(const Config &config, int64_t pipelineRank,
                                          int64_t replica, int64_t tensorRank);

/// The collectives of `pass` (Forward, BackwardInput or BackwardWeight) of layer `layer`
/// alone on `samples` samples, appended to `out`: the table above. None when T and E are 1
/// (or the layer has no experts and T is 1). `transformer` (null for a layer list) says which
/// blocks have experts.
void appendLayerCollectives(const Config &config, const std::vector<Layer> &layers, int32_t layer,
                            Op pass, int64_t samples, std::vector<TensorCollective> &out,
                            const Transformer *transformer = nullptr);

/// The collectives compute instruction `compute` (Forward, Backward, BackwardInput or
/// BackwardWeight) of layers [first, end) issues on a micro-batch of `samples` samples, in
/// order. Empty when T is 1 and no layer has experts over E > 1 ranks.
std::vector<TensorCollective> tensorCollectives(const Config &config,
                                                const std::vector<Layer> &layers, int32_t first,
                                                int32_t end, Op compute, int64_t samples,
                                                const Transformer *transformer = nullptr);

/// tensorCollectives() of one plan's layers, remembered per (layers, pass, samples): the
/// compiler's lowering, the plan checks, the simulator and the cost model ask once per compute,
/// and the micro-batches of a stage mostly have one size. It refers to `config`, `layers` and
/// `transformer`, which must outlive it.
class TensorCollectiveCache {
public:
  TensorCollectiveCache(const Config &config, const std::vector<Layer> &layers,
                        const Transformer *transformer)
      : config(&config), layers(&layers), transformer(transformer) {}
  TensorCollectiveCache(const TensorCollectiveCache &) = delete;
  TensorCollectiveCache &operator=(const TensorCollectiveCache &) = delete;

  /// tensorCollectives(config, layers, first, end, compute, samples, transformer); the
  /// reference lives as long as the cache.
  const std::vector<TensorCollective> &of(int32_t first, int32_t end, Op compute, int64_t samples);

private:
  const Config *config;
  const std::vector<Layer> *layers;
  const Transformer *transformer;
  std::map<std::tuple<int32_t, int32_t, Op, int64_t>, std::vector<TensorCollective>> known;
};

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_PLAN_TENSORCOLLECTIVES_H

//===- Moe.h - a mixture of experts, a block's second branch ----*- C++ -*-===//
//
// x + Σ_j w_j · Expert_{e_j}(x) + Shared(x) in place of the dense MLP, in the blocks after the
// first `denseBlocks` (GptShape::blockHasExperts). The router is a linear map h -> N experts
// without bias, scored by a softmax over the experts (Mixtral, Qwen) or a sigmoid per expert
// (DeepSeek-V3); each token takes the k experts of highest score (ties: the lower expert
// index), weighted by their scores, renormalised to sum to one with normalizeTopK. Each expert
// is a SwiGLU (or, with mlp gelu, a GELU) MLP of width expertFfn (biases as the dense MLP's); the
// shared experts are one such MLP of width sharedFfn that every token passes through (layers/Mlp.h
// on a shape of that width).
//
// The auxiliary load-balancing loss (Switch Transformer, Fedus et al., arXiv:2101.03961, as
// Mixtral and Qwen use it) is computed per sequence, as DeepSeek-V3's sequence-wise balance
// loss is (arXiv:2412.19437, §2.1.2): for each sample, coefficient · N · Σ_e f_e · P_e, with
// f_e the fraction of the sample's k · seq assignments that chose e and P_e the mean score of
// e over its tokens. Per sequence, so that it does not depend on how a batch is cut into
// micro-batches or samples (the CPU backend's bitwise equivalence). The loss trained is the
// LM cross-entropy plus the mean of this over the global batch's samples (summed over the
// blocks); Ops::takeAuxLoss reports the sum.
//
// The router z-loss (ST-MoE, Zoph et al., arXiv:2202.08906, §3.5), with zLossCoefficient
// β > 0: each sample adds β times the mean over its tokens of lse², lse the log-sum-exp of
// the token's router logits, whatever scores them; Ops::takeZLoss reports the sum apart from
// the auxiliary loss. Per token, so each tensor rank counts its own tokens' part.
//
// With capacityFactor c > 0 an expert takes at most ceil(c · seq · k / N) of each sample's
// assignments, the first in the sample's token order or, with dropByWeight, those of the
// highest weight (rounded to single precision, ties to the earlier token; Megatron-Core's `probs`
// policy), per sample, as the auxiliary loss, so that the model does not depend on how a batch
// is cut; the rest are dropped: they add
// nothing (their weight is not renormalised away), as in GShard and Switch. Without it the
// layer is dropless.
//
// The sigmoid router's per-expert bias (DeepSeek-V3's auxiliary-loss-free balancing) is added
// to the scores for the choice only. No gradient reaches it: it starts at zero (or as --init
// reads it) and stays, or, with biasUpdateRate above 0, moves by the load as DeepSeek-V3 moves
// it. Then the weight gradient adds each expert's count of this rank's choices (the router's,
// before any capacity drops one) where the bias's gradient lies, the gradients' reduction sums
// them over every rank that routed a token of the step, and the optimizer moves the bias by
// them (model::balanceBias, Layer::loadBalancedBias).
//
// The shared experts' output may be gated per token (Qwen2-MoE's shared_expert_gate): Shared(x)
// times sigmoid(x · wg), wg a vector of h. The gate is whole on every tensor rank and computed on
// the rows the rank holds; its weight gradient, from the rows the rank routes, is summed over the
// tensor group with the router's.
//
// Parameters, in this order: the router Wr [h × N] and, for the sigmoid router, its bias [N];
// the shared experts (if any) as an MLP of width fs (layers/Mlp.h: W1s [h × up(fs)], b1s,
// W2s [fs × h], b2s), and their gate wg [h × 1] (if gated); then for each expert e in order (each
// of the rank's, with expert parallelism) W1e [h × up(fe)] (for SwiGLU columns 0 to fe the gate, fe
// to 2fe the up projection), b1e [up(fe)], W2e [fe × h], b2e [h]. up(f) is 2f for SwiGLU, f for
// GELU; the biases only with bias "all", as the dense MLP's.
//
// The weights are applied where Megatron-Core's grouped experts apply them (a weighted SwiGLU):
// to each assignment's activation, before the expert's second projection, so that an expert's
// output arrives weighted and the combine is a plain sum. Nothing per assignment is kept on the
// token's side: a weight's gradient is the dot product of the assignment's activation
// (recomputed from the kept first projection) with the gradient that reaches it, computed where
// the expert runs. With biases the second projection's bias is weighted too, so the layer
// computes Σ_j w_j · Expert_{e_j}(x) exactly as written above.
//
// Expert parallelism (GptShape::expertSize E > 1): member q of the expert group computes
// experts [q·N/E, (q+1)·N/E) for the tokens of every member. After the routing each member
// sends its assignments' counts and then its tokens, each with its weight as one element more,
// to the experts' members (the dispatch, an all-to-all-v), which run their experts segment by
// segment (one segment per expert and sending member, the GEMMs the sender would have run
// itself) and send the weighted outputs back (the combine); the backward sends the tokens'
// output gradients (the combine's gradient) and returns the input gradients, each with its
// weight's gradient as one element more (the dispatch's). A member holds only its own experts'
// parameters (the branch's last, GptShape::localExperts of them; placeExperts says where they
// lie when the chain keeps them apart, StageLayout.h), and their gradients are its group's
// tokens' alone: the ranks holding the same experts (the expert-data group) reduce them. Where
// the chain accumulates in double (LayerCache::expertAccumulators), each segment's weight
// gradients are added there on their own, so that an expert's sum over the members' samples is
// the reference's sum over samples.
//
// Tensor parallelism (T > 1), as Megatron-Core runs experts beside it (the experts whole on
// each rank, the expert group drawn from the (replica, tensor rank) pairs): each tensor rank
// routes its T-th of each sample's tokens, its sequence shard with sequence parallelism, else
// that part of the sequence it holds, whose routed outputs and input gradients the group then
// gathers. The router is whole on every rank and its gradient, from each rank's tokens, is
// summed over the group; so are each sample's auxiliary-loss statistics, and one rank counts
// the loss. The shared experts are split as the dense MLP. With a capacity the members gather
// their choices' counts per sample and expert, and each drops what the parts before its own
// leave no room for (or, dropping by weight, gather every assignment's expert and weight and
// each ranks the whole sample's): the group drops what one rank routing the sample would.
// runtime/plan/TensorCollectives.h lists the collectives in their order.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_MODEL_LAYERS_MOE_H
#define CONDUIT_RUNTIME_MODEL_LAYERS_MOE_H

#include "runtime/model/GptShape.h"
#include "runtime/model/layers/Branch.h"

#include <memory>
#include <vector>

namespace conduit::model {

/// Group-limited routing: the experts cut into `groups` consecutive groups, of which each
/// token takes its experts from the `top` best (1 and 1: unlimited).
struct GroupLimit {
  int64_t groups = 1, top = 1;
};

/// Which experts each token takes and with which weights: the router's choice on the host.
struct Routing {
  int64_t rows = 0, experts = 0, topK = 0;
  /// Per token and slot j < topK (slots in descending score; ties: lower expert first): the
  /// expert, its weight, and where the assignment lies in the dispatch order (expert by
  /// expert, tokens ascending), -1 where capacity dropped it.
  std::vector<int32_t> expert, position;
  std::vector<double> weight;
  /// Dispatch order: where each expert's assignments start (experts + 1 entries), and the
  /// token of each assignment.
  std::vector<int64_t> start;
  std::vector<int32_t> token;

  /// The assignments this rank's experts take, in the order they run: segments of one expert's
  /// assignments from one member of the expert group (every assignment of this rank's tokens
  /// without one), and how many assignments the all-to-alls move to and from each member.
  struct Segment {
    int64_t expert = 0, first = 0, count = 0;
  };
  std::vector<Segment> segments;
  std::vector<int64_t> sentTo, receivedFrom;
  /// Per assignment this rank's experts take, in the order they run: its weight, as the
  /// dispatch carried it (rounded to the Ops's type).
  std::vector<double> takenWeight;
  /// With the auxiliary loss, per sample of the piece and expert: f_e, the fraction of the
  /// sample's assignments (over its whole sequence) that chose the expert.
  std::vector<double> fractions;
  /// With a gate on the shared experts, per row the rank holds (not only those it routes):
  /// sigmoid(x · wg).
  std::vector<double> gates;
  /// With the router z-loss, per row the rank routes and expert: the coefficient times the
  /// gradient of the row's squared log-sum-exp by its logits (routerZLoss).
  std::vector<double> zGradient;

  int64_t dispatched() const { return start.empty() ? 0 : start.back(); }
  int64_t taken() const {
    int64_t n = 0;
    for (int64_t c : receivedFrom)
      n += c;
    return n;
  }
  /// The all-to-alls' counts in elements of `width` per assignment.
  static std::vector<int64_t> times(const std::vector<int64_t> &counts, int64_t width) {
    std::vector<int64_t> out(counts);
    for (int64_t &c : out)
      c *= width;
    return out;
  }
  /// The choice from router scores [rows × experts] (softmax or sigmoid outputs), with
  /// `bias` (experts entries, or empty) added to the scores for the choice only; every
  /// assignment kept (dropless: see limit()). With a group limit a group's key is the sum of
  /// its best max(1, topK / top) keys (Megatron-Core's group-limited top-k; DeepSeek-V3's sum
  /// of the top two for 8 experts from 4 groups), and the `top` highest groups (ties: lower
  /// group first) hold the candidates.
  static Routing choose(const double *scores, int64_t rows, int64_t experts, int64_t topK,
                        const std::vector<double> &bias, bool normalize, GroupLimit limit = {});
  /// Each expert's assignments in each sample of `sampleRows` consecutive rows, drops
  /// included: [samples × experts].
  std::vector<int64_t> chosenPerSample(int64_t sampleRows) const;
  /// A capacity: drops each assignment that has `capacity` of its expert's before it in its
  /// sample's token order (samples of `sampleRows` consecutive rows). `ahead` [samples ×
  /// experts] counts, per sample, the expert's assignments in the sample's tokens ahead of
  /// this rank's rows (the other tensor ranks' parts; empty: none).
  void limit(int64_t capacity, int64_t sampleRows, const std::vector<int64_t> &ahead);
  /// A capacity by routing weight: in each sample an expert keeps the `capacity` of its
  /// assignments with the highest keys (ties: the earlier token, then the earlier slot) and
  /// drops the rest. `experts` and `keys` [samples × wholeRows × topK] hold every assignment
  /// of the whole samples in token order, this rank's `sampleRows` rows of each from row
  /// `offset` on (the other tensor ranks' parts around them).
  void limitByWeight(int64_t capacity, int64_t sampleRows, int64_t wholeRows, int64_t offset,
                     const std::vector<int32_t> &experts, const std::vector<float> &keys);

private:
  /// Positions and dispatch order from the kept assignments (position >= 0).
  void arrange();
};

/// Router scores [rows × experts] from logits: softmax over each row, or sigmoid.
void routerScores(int64_t rows, int64_t experts, bool sigmoid, const double *logits,
                  double *scores);
/// The router z-loss of logits [rows × experts] (ST-MoE, Zoph et al., arXiv:2202.08906, §3.5):
/// the sum over the rows of the square of each row's log-sum-exp, whatever the router scores
/// them with; `gradient` [rows × experts] receives its gradient by the logits, 2 · lse ·
/// softmax(row).
double routerZLoss(int64_t rows, int64_t experts, const double *logits, double *gradient);

template <typename T> class Moe final : public Branch<T> {
public:
  /// With `recomputeActivation` (the recompute module `moe_act`) the forward keeps no routed
  /// expert's activation output: recompute() computes them again from the kept first
  /// projections before the input gradient.
  explicit Moe(const GptShape &s, bool recomputeActivation = false);

  int64_t numParams() const override { return total; }
  void slice(int64_t wholeAt, int64_t localAt, std::vector<ParameterRun> &runs) const override;
  void initialise(T *params, Random &random) const override;
  void keep(Ops<T> &ops, int64_t samples, LayerCache<T> &cache) const override;
  /// Also adds the samples' auxiliary loss and z-loss to the Ops's (Ops::addAuxLoss,
  /// addZLoss); `cache.lossScale`, set by the block, is the loss gradient's factor their
  /// gradients take too.
  void forward(Ops<T> &ops, const T *params, const T *x, const T *residual, T *y,
               LayerCache<T> &cache) const override;
  Buffer<T> backwardInput(Ops<T> &ops, const T *params, LayerCache<T> &cache, const T *dy,
                          bool dyKept) const override;
  void backwardWeight(Ops<T> &ops, const LayerCache<T> &cache, const T *x, const T *dy,
                      T *dparams) const override;
  void recompute(Ops<T> &ops, const T *params, const T *x, LayerCache<T> &cache) const override;

  /// The rank's routed experts' parameters: the last of the branch's in local order.
  int64_t expertParams() const override { return s.localExperts() * perExpert; }
  void placeExperts(int64_t at) override { placed = at; }
  int64_t loadBalancedBias() const override { return s.biasUpdateRate > 0 ? biasAt : -1; }
  void placeExpertsApart(const T *params, T *grads) override {
    apartParams = params;
    apartGrads = grads;
  }

private:
  int64_t up() const { return s.gated ? 2 * s.expertFfn : s.expertFfn; }
  bool gated() const { return shared && s.sharedGate; }
  /// The tokens of a sample this rank routes: its T-th of the sequence with T > 1.
  int64_t routedSeq() const { return s.seq / s.tensorSize; }
  /// Whether the rank holds the whole sequence (tensor parallelism without sequence
  /// parallelism) and routes a part of it.
  bool routesPart() const { return s.tensorParallel() && !s.sequenceParallel; }
  /// The rows of `rows` (a branch's tensor over the sequence the rank holds) that it routes:
  /// `rows` itself, or its part copied into `part`.
  const T *routedRows(Ops<T> &ops, int64_t samples, const T *rows, Buffer<T> &part) const;
  /// Drops the assignments past each expert's capacity in each sample (Routing::limit); with
  /// T > 1 the tensor group's members first gather their choices' counts.
  void limitToCapacity(Ops<T> &ops, Routing &r) const;
  /// whole += the tensor group's routed parts [samples × routedSeq × h] gathered in sample order.
  void addGathered(Ops<T> &ops, int64_t samples, const T *part, T *whole) const;
  /// The expert group (null without expert parallelism).
  ExpertGroup<T> *groupOf(Ops<T> &ops) const {
    return s.expertSize > 1 ? ops.expertGroup() : nullptr;
  }
  /// Which assignments this rank's experts take (Routing::segments and the counts), from the
  /// routing of this rank's tokens and, in an expert group, the others' counts.
  void exchangeCounts(Ops<T> &ops, Routing &r) const;

  /// The activation of the segments' first projections u into g (both in dispatch order).
  void activate(Ops<T> &ops, const Routing &r, const T *u, T *g) const;
  /// Each taken assignment's row of x (`width` wide) times its weight, in place.
  void weigh(Ops<T> &ops, const Routing &r, int64_t width, T *x) const;
  /// The experts' weighted activations into g: the forward's, and the recomputation's.
  void weightedActivations(Ops<T> &ops, const Routing &r, const T *u, T *g) const;
  /// y = residual + gate · Shared(x) over the rows the rank holds, keeping Shared(x); returns
  /// the gates.
  std::vector<double> gatedShared(Ops<T> &ops, const T *params, const T *x, const T *residual, T *y,
                                  LayerCache<T> &cache) const;
  /// The gate's backward from the block's output gradient dy: stashes the shared experts'
  /// output gradient (DShared) and the gate logits' gradient over the rows the rank routes
  /// (DGate); returns that gradient over every row the rank holds.
  std::vector<double> gateBackward(Ops<T> &ops, LayerCache<T> &cache, const T *dy) const;

  GptShape s;
  bool recomputeActivation = false;
  std::unique_ptr<Branch<T>> shared; ///< null without shared experts
  /// Where the router's weights and bias (-1: none), the shared experts, their gate and the
  /// experts start; within an expert, where b1, W2 and b2 start.
  int64_t routerAt = 0, biasAt = -1, sharedAt = 0, gateAt = 0, expertsAt = 0;
  int64_t b1At = 0, w2At = 0, b2At = 0, perExpert = 0, total = 0;
  /// Where this rank's first routed expert lies relative to the branch's parameters (the chain
  /// may keep the experts apart: placeExperts); expertsAt unless placed elsewhere.
  int64_t placed = 0;
  /// Where (local) expert e's parameters start, relative to the branch's; e is one of this
  /// rank's experts.
  int64_t localExpertAt(int64_t e) const { return placed + (e - s.firstLocalExpert()) * perExpert; }
  /// Where the rank's routed experts lie when the chain keeps them in arrays of their own
  /// (placeExpertsApart; null: at `placed` from the pointers the layer is given).
  const T *apartParams = nullptr;
  T *apartGrads = nullptr;
  /// Expert e's parameters, from the branch's `p`; its gradients, from the branch's `dp`.
  const T *expertParamsAt(const T *p, int64_t e) const {
    return apartParams ? apartParams + (e - s.firstLocalExpert()) * perExpert
                       : p + localExpertAt(e);
  }
  T *expertGradsAt(T *dp, int64_t e) const {
    return apartGrads ? apartGrads + (e - s.firstLocalExpert()) * perExpert : dp + localExpertAt(e);
  }
};

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_LAYERS_MOE_H

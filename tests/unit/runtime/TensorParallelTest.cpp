//===- TensorParallelTest.cpp - the model split over a tensor group -------===//
//
// A tensor group of two ranks simulated in one process, one thread per rank, whose
// collectives combine the two ranks' buffers: each layer kind and variant (GPT-style, Llama's
// RMSNorm, SwiGLU, rotary positions, grouped-query attention and tied head, Qwen3's q/k norms,
// DeepSeek's latent attention with and without a query latent, blocks with a mixture of experts:
// softmax and sigmoid routers, shared experts, gated or not, SwiGLU or GELU experts, a capacity
// whose drops count a sample's tokens over both ranks), with and
// without sequence parallelism, whole and split backward, in double precision, gives the
// unsplit layers' outputs, loss (and auxiliary loss and z-loss), input gradients and parameter
// gradients (the routed experts', whole on every rank and computed from its own tokens, summed over
// the ranks, as their reduction over the expert-data group sums them; or, with expert parallelism,
// the experts divided over the two ranks, which send each other the tokens they route); each
// rank starts from its
// slice of the unsplit model's initial parameters; the layers issue exactly the collectives
// runtime/plan/TensorCollectives.h lists for their compute; and with one rank the same layers
// issue none and compute the unsplit model's bits.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/Data.h"
#include "runtime/model/Gpt.h"
#include "runtime/model/Random.h"
#include "runtime/plan/TensorCollectives.h"
#include "tests/unit/runtime/GptPlan.h"
#include "tests/unit/runtime/Meeting.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <thread>
#include <utility>

using namespace conduit;
using namespace conduit::model;
using runtime::Op;

namespace {

using TensorMeeting = model::Meeting<const double *>;

/// One member's collectives, which it records in the order issued.
class Member final : public TensorGroup<double> {
public:
  Member(TensorMeeting &meeting, int rank, int size) : meeting(meeting), rank(rank), size(size) {}

  void allReduce(int64_t n, double *data, Reduction op) override {
    issued.push_back(Op::TensorAllReduce);
    std::vector<double> mine(data, data + n);
    meeting.meet(rank, mine.data(), [&](const TensorMeeting::Inputs &in) {
      for (int64_t i = 0; i < n; ++i) {
        double v = in[0][i];
        for (int r = 1; r < size; ++r)
          v = op == Reduction::Sum ? v + in[r][i] : std::max(v, in[r][i]);
        data[i] = v;
      }
    });
  }
  void allGather(int64_t n, const double *shard, double *full) override {
    issued.push_back(Op::TensorAllGather);
    meeting.meet(rank, shard, [&](const TensorMeeting::Inputs &in) {
      for (int r = 0; r < size; ++r)
        std::copy(in[r], in[r] + n, full + r * n);
    });
  }
  void reduceScatter(int64_t n, const double *full, double *shard) override {
    issued.push_back(Op::TensorReduceScatter);
    meeting.meet(rank, full, [&](const TensorMeeting::Inputs &in) {
      for (int64_t i = 0; i < n; ++i) {
        double v = 0;
        for (int r = 0; r < size; ++r)
          v += in[r][rank * n + i];
        shard[i] = v;
      }
    });
  }

  std::vector<Op> issued;

private:
  TensorMeeting &meeting;
  const int rank, size;
};

/// A member of the expert group that records its all-to-alls where the tensor member records
/// its collectives, as the plan lists them together (the counts belong to the dispatch after
/// them, as the backends say).
class RecordingExpertGroup final : public ExpertGroup<double> {
public:
  RecordingExpertGroup(ExpertGroup<double> &group, std::vector<Op> &issued)
      : group(group), issued(issued) {}
  int64_t size() const override { return group.size(); }
  int64_t position() const override { return group.position(); }
  void allToAll(ExpertExchange what, const double *send, const std::vector<int64_t> &sendCounts,
                double *recv, const std::vector<int64_t> &recvCounts) override {
    if (what != ExpertExchange::Counts)
      issued.push_back(what == ExpertExchange::Dispatch ? Op::ExpertDispatch : Op::ExpertCombine);
    group.allToAll(what, send, sendCounts, recv, recvCounts);
  }

private:
  ExpertGroup<double> &group;
  std::vector<Op> &issued;
};

constexpr int kRanks = 2;

/// A shape every dimension of which splits over two ranks.
GptShape gptShape() {
  GptShape s = tinyShape();
  s.seq = 6;
  s.vocab = 12;
  return s;
}

GptShape llamaShape() {
  GptShape s = gptShape();
  s.hidden = 16;
  s.heads = 4;
  s.kvHeads = 2;
  s.gated = s.rmsNorm = s.rotary = s.tied = true;
  s.qkvBias = s.otherBias = false;
  s.normEps = 1e-3;
  s.ropeTheta = 100;
  return s;
}

/// Qwen3's attention on the Llama shape: heads 6 wide (not 16 / 4), q/k norms whose gains
/// every rank holds.
GptShape qwen3Shape() {
  GptShape s = llamaShape();
  s.headWidth = 6;
  s.qkNorm = true;
  return s;
}

/// DeepSeek's attention on the Llama shape: its 4 heads split 2 and 2, the latents' down
/// projections on every rank.
GptShape latentShape() { return withLatentAttention(llamaShape()); }

/// DeepSeek-V3's own rotary positions on it: yarn over a third of the sequence, with a magnitude
/// on the rotation and the softmax factor on the split heads' queries.
GptShape latentYarnShape() {
  GptShape s = latentShape();
  s.ropeScaling.type = runtime::RopeType::Yarn;
  s.ropeScaling.factor = 3;
  s.ropeScaling.originalPositions = std::max<int64_t>(1, s.seq / 3);
  s.ropeScaling.attentionFactor = 1.2;
  s.ropeScaling.mscaleAllDim = 1;
  return s;
}

/// `s` with a mixture of experts in its second block (experts whole on every rank, E = 1): 4
/// experts 6 wide (SwiGLU or GELU as its MLP), 2 per token, the auxiliary loss, whose
/// statistics the ranks sum, and the router z-loss, which each rank counts on its tokens.
GptShape withExperts(GptShape s) {
  s.experts = 4;
  s.topK = 2;
  s.expertFfn = 6;
  s.denseBlocks = 1;
  s.auxLossCoefficient = 0.01;
  s.zLossCoefficient = 0.001;
  return s;
}

/// On the Llama shape, softmax scores renormalised and a shared expert split as the dense MLP.
GptShape moeShape() {
  GptShape s = withExperts(llamaShape());
  s.sharedFfn = 4;
  s.normalizeTopK = true;
  return s;
}

/// DeepSeek-V3's routing: sigmoid scores with a bias for the choice, the routed weights scaled,
/// no shared expert.
GptShape moeSigmoidShape() {
  GptShape s = moeShape();
  s.sigmoidRouter = true;
  s.sharedFfn = 0;
  s.routedScaling = 2.5;
  return s;
}

/// Qwen2-MoE's gated shared expert, whose gate every rank holds.
GptShape moeGatedShape() {
  GptShape s = moeShape();
  s.sharedGate = true;
  return s;
}

/// A capacity of half a balanced share: ceil(0.5 · 6 · 2 / 4) = 2 of a sample's 12
/// assignments per expert, so that each sample drops some and the second rank's part counts
/// the first's.
GptShape moeCapacityShape(bool byWeight = false) {
  GptShape s = moeShape();
  s.capacityFactor = 0.5;
  s.dropByWeight = byWeight;
  return s;
}

/// Two multi-token prediction modules (DeepSeek-V3's) after the blocks; untied (as the base
/// shape says), the first keeps the table's copy, split by vocabulary rows as the embedding's.
GptShape withModules(GptShape s) {
  s.mtpLayers = 2;
  s.mtpLossCoefficient = 0.3;
  return s;
}

/// GELU experts with biases, on the GPT shape.
GptShape moeGptShape() { return withExperts(gptShape()); }

/// Without a query latent (DeepSeek-V2-Lite), with the output projection's bias and learned
/// positions.
GptShape latentDirectShape() {
  GptShape s = latentShape();
  s.qLora = 0;
  s.otherBias = true;
  s.rotary = false;
  return s;
}

/// What a chain computed: its output (or nothing after the head), loss, input gradient and
/// parameter gradients.
struct Result {
  std::vector<double> y, dx, dparams;
  double loss = 0, auxLoss = 0, zLoss = 0, mtpLoss = 0;
  int64_t dropped = 0; ///< assignments a capacity dropped
  std::vector<Op> forwardCalls, backwardCalls;
};

enum class Backward { Whole, Split };

/// Runs layers [first, end) of `shape` (tensor rank and size set, and with expert parallelism
/// its place in the expert group `experts`) from whole parameters `params`, input `x` and
/// output gradient `dy` of the whole sequence; with sequence parallelism the rank takes its
/// shard of them.
Result run(const GptShape &shape, int64_t first, int64_t end, const std::vector<double> &params,
           const std::vector<double> &x, const std::vector<double> &dy, int64_t samples,
           Backward backward, TensorGroup<double> *group, uint32_t recomputed = 0,
           ExpertGroup<double> *experts = nullptr) {
  runtime::Plan plan = planFor(shape.whole());
  plan.config.recomputeModules = recomputed;
  CpuOps<double> ops;
  ops.setTensorGroup(group);
  ops.setExpertGroup(experts);
  LayerChain<double> chain = *LayerChain<double>::build(
      plan, shape, first, end, ops, recomputed ? Checkpointing::Selective : Checkpointing::None);
  // This rank's part of the whole parameters, where its layout keeps it (the routed experts of
  // every layer after the others: StageLayout).
  std::vector<double> local(chain.numParams());
  for (const ParameterRun &run : chain.parameterLayout().runs)
    std::copy(params.begin() + run.whole, params.begin() + run.whole + run.length,
              local.begin() + run.local);
  // The rank's sequence shard of each sample's rows.
  const int64_t row = chain.sampleSize(), whole = shape.seq * shape.hidden;
  auto shard = [&](const std::vector<double> &all) {
    std::vector<double> out;
    if (all.empty())
      return out;
    const int64_t offset = shape.sequenceParallel ? shape.tensorRank * row : 0;
    for (int64_t n = 0; n < samples; ++n)
      out.insert(out.end(), all.begin() + n * whole + offset,
                 all.begin() + n * whole + offset + row);
    return out;
  };
  const std::vector<double> myX = shard(x), myDy = shard(dy);
  std::vector<int32_t> tokens, targets;
  SyntheticData(3, shape.vocab, shape.seq).batch(1, 0, samples, tokens, targets);
  const Tokens batch{tokens.data(), targets.data(), samples, 1.0};

  Result r;
  auto *member = dynamic_cast<Member *>(group);
  typename LayerChain<double>::Cache cache;
  r.y.assign(chain.hasHead() ? 0 : samples * row, 0.0);
  chain.forward(local.data(), myX.empty() ? nullptr : myX.data(), batch,
                r.y.empty() ? nullptr : r.y.data(), cache);
  r.loss = ops.takeLoss();
  if (member)
    r.forwardCalls = std::exchange(member->issued, {});
  r.dparams.assign(local.size(), 0.0);
  r.dx.assign(chain.hasEmbedding() ? 0 : samples * row, 0.0);
  const double *upstream = chain.hasHead() ? nullptr : myDy.data();
  double *dx = r.dx.empty() ? nullptr : r.dx.data();
  if (backward == Backward::Whole) {
    chain.backward(local.data(), cache, upstream, r.dparams.data(), dx);
  } else {
    chain.backwardInput(local.data(), cache, upstream, dx);
    chain.backwardWeight(cache, r.dparams.data());
  }
  if (member)
    r.backwardCalls = std::exchange(member->issued, {});
  r.auxLoss = ops.takeAuxLoss();
  r.zLoss = ops.takeZLoss();
  r.mtpLoss = ops.takeMtpLoss();
  r.dropped = ops.routedLoad().dropped;
  // Back in the whole layers' layout, for comparison: zero where another rank holds it.
  std::vector<double> dparams(params.size(), 0.0);
  for (const ParameterRun &run : chain.parameterLayout().runs)
    std::copy(r.dparams.begin() + run.local, r.dparams.begin() + run.local + run.length,
              dparams.begin() + run.whole);
  r.dparams = std::move(dparams);
  return r;
}

/// The collective kinds TensorCollectives.h lists for `compute` on layers [first, end).
std::vector<Op> listed(const GptShape &whole, bool sequenceParallel, int64_t first, int64_t end,
                       Op compute, uint32_t recomputed, int32_t expert) {
  runtime::Plan plan = planFor(whole);
  plan.config.tensor = kRanks;
  plan.config.expert = expert;
  plan.config.sequenceParallel = sequenceParallel;
  if (recomputed) {
    plan.config.checkpointing = Checkpointing::Selective;
    plan.config.recomputeModules = recomputed;
  }
  std::vector<Op> kinds;
  for (const runtime::TensorCollective &c :
       runtime::tensorCollectives(plan.config, plan.layers, static_cast<int32_t>(first),
                                  static_cast<int32_t>(end), compute, 1, &*plan.transformer))
    kinds.push_back(c.op);
  return kinds;
}

void expectClose(const std::vector<double> &got, const std::vector<double> &want,
                 const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-10 + 1e-9 * std::abs(want[i])) << what << " " << i;
}

/// Layers [first, end) of `whole` split over two ranks give the unsplit layers' results.
/// With `recomputed`, selective checkpointing of those modules (the reference keeps everything);
/// with `expert` 2, the routed experts divided over the two ranks as their expert group (the
/// plan of one replica, whose tensor ranks are its expert group), not whole on each.
void checkSplit(const GptShape &whole, int64_t first, int64_t end, bool sequenceParallel,
                Backward backward, uint32_t recomputed, int32_t experts) {
  runtime::Plan plan = planFor(whole);
  CpuOps<double> ops;
  LayerChain<double> reference = *LayerChain<double>::build(plan, whole, first, end, ops);
  std::vector<double> params(reference.numParams());
  reference.initialise(params.data(), 42);
  Random random({9});
  for (double &p : params)
    p += 0.3 * random.normal();
  const int64_t samples = 2, width = whole.seq * whole.hidden;
  std::vector<double> x, dy(samples * width);
  if (!reference.hasEmbedding())
    for (int64_t i = 0; i < samples * width; ++i)
      x.push_back(random.normal());
  for (double &d : dy)
    d = random.normal();
  const Result want = run(whole, first, end, params, x, dy, samples, Backward::Whole, nullptr);

  TensorMeeting meeting(kRanks);
  Meeting<ThreadedExpertGroup<double>::Sent> expertMeeting(kRanks);
  std::vector<Result> got(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      GptShape shape = whole;
      shape.tensorSize = kRanks;
      shape.tensorRank = r;
      shape.sequenceParallel = sequenceParallel;
      Member member(meeting, r, kRanks);
      std::optional<ThreadedExpertGroup<double>> place;
      std::optional<RecordingExpertGroup> recorded;
      if (experts > 1) {
        shape.expertSize = experts;
        shape.expertRank = r;
        place.emplace(expertMeeting, experts, r);
        recorded.emplace(*place, member.issued);
      }
      got[r] = run(shape, first, end, params, x, dy, samples, backward, &member, recomputed,
                   recorded ? &*recorded : nullptr);
    });
  for (std::thread &t : threads)
    t.join();

  // Outputs and input gradients: whole on each rank, or its shard of the sequence.
  auto assemble = [&](std::vector<double> Result::*field) {
    if (!sequenceParallel || (got[0].*field).empty())
      return got[0].*field;
    std::vector<double> all;
    const int64_t row = width / kRanks;
    for (int64_t n = 0; n < samples; ++n)
      for (int r = 0; r < kRanks; ++r)
        all.insert(all.end(), (got[r].*field).begin() + n * row,
                   (got[r].*field).begin() + (n + 1) * row);
    return all;
  };
  for (int r = 0; r < kRanks && !sequenceParallel; ++r) {
    expectClose(got[r].y, want.y, "output of rank " + std::to_string(r));
    expectClose(got[r].dx, want.dx, "input gradient of rank " + std::to_string(r));
  }
  expectClose(assemble(&Result::y), want.y, "output");
  expectClose(assemble(&Result::dx), want.dx, "input gradient");
  // The loss and the auxiliary loss are counted once, by tensor rank 0.
  EXPECT_NEAR(got[0].loss, want.loss, 1e-10 * std::abs(want.loss));
  EXPECT_EQ(got[1].loss, 0.0);
  EXPECT_NEAR(got[0].auxLoss, want.auxLoss, 1e-12 + 1e-10 * std::abs(want.auxLoss));
  EXPECT_EQ(got[1].auxLoss, 0.0);
  // The multi-token prediction modules' loss too.
  EXPECT_NEAR(got[0].mtpLoss, want.mtpLoss, 1e-10 * std::abs(want.mtpLoss));
  EXPECT_EQ(got[1].mtpLoss, 0.0);
  EXPECT_EQ(want.mtpLoss > 0, whole.mtpLayers > 0 && end > whole.blocks + 1 &&
                                  first <= whole.blocks + whole.mtpLayers);
  EXPECT_EQ(want.auxLoss > 0, whole.moe() && whole.auxLossCoefficient > 0 &&
                                  end > whole.denseBlocks + 1 &&
                                  first <= whole.blocks + whole.mtpLayers);
  // A capacity's drops, each rank counting its own tokens'.
  EXPECT_EQ(got[0].dropped + got[1].dropped, want.dropped);
  EXPECT_EQ(want.dropped > 0, whole.capacityFactor > 0);
  // The z-loss: each rank's own tokens', adding up to the whole's.
  EXPECT_NEAR(got[0].zLoss + got[1].zLoss, want.zLoss, 1e-12 + 1e-10 * std::abs(want.zLoss));
  EXPECT_EQ(want.zLoss > 0, whole.moe() && whole.zLossCoefficient > 0 &&
                                end > whole.denseBlocks + 1 &&
                                first <= whole.blocks + whole.mtpLayers);
  // The routed experts' parameters: each layer's last (Layer::expertParams), whole on every
  // rank, whose gradients each rank computes from the tokens it routes; or with expert
  // parallelism each on one rank, which computes its gradients from the tokens both route.
  // expertOf: the routed expert each parameter belongs to (each expert's in turn, Moe.h), or -1.
  std::vector<int64_t> expertOf(want.dparams.size(), -1);
  int64_t at = 0;
  for (int64_t l = first; l < end; ++l) {
    at += plan.layers[l].params;
    const int64_t routed =
        makeLayer<double>(plan.layers[l].kind, whole, Checkpointing::None, l)->expertParams();
    for (int64_t i = 0; i < routed; ++i)
      expertOf[at - routed + i] = i / (routed / whole.experts);
  }
  // Every rank's other gradients are the whole gradients' slice (replicated parameters on
  // each); the experts' add up over the ranks to the whole ones (with expert parallelism, one
  // rank's and zero).
  for (int r = 0; r < kRanks; ++r)
    for (size_t i = 0; i < want.dparams.size(); ++i) {
      if (got[r].dparams[i] != 0.0 && expertOf[i] < 0) {
        EXPECT_NEAR(got[r].dparams[i], want.dparams[i], 1e-10 + 1e-9 * std::abs(want.dparams[i]))
            << "parameter gradient " << i << " of rank " << r;
      }
    }
  std::vector<double> covered(want.dparams.size(), 0.0);
  for (int r = 0; r < kRanks; ++r)
    for (size_t i = 0; i < covered.size(); ++i) {
      if (expertOf[i] >= 0)
        covered[i] += got[r].dparams[i];
      else if (got[r].dparams[i] != 0.0)
        covered[i] = got[r].dparams[i];
    }
  expectClose(covered, want.dparams, "parameter gradients");
  // With expert parallelism, expert e lies on member e / (N / E) alone (GptShape::
  // firstLocalExpert): its gradient there, none on the other member.
  for (size_t i = 0; i < expertOf.size() && experts > 1; ++i)
    if (expertOf[i] >= 0) {
      const int64_t owner = expertOf[i] / (whole.experts / experts);
      EXPECT_NEAR(got[owner].dparams[i], want.dparams[i], 1e-10 + 1e-9 * std::abs(want.dparams[i]))
          << "expert " << expertOf[i] << "'s gradient " << i << " on its member " << owner;
      EXPECT_EQ(got[1 - owner].dparams[i], 0.0)
          << "expert " << expertOf[i] << " on member " << 1 - owner;
    }

  // The collectives, in TensorCollectives.h's order.
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(got[r].forwardCalls,
              listed(whole, sequenceParallel, first, end, Op::Forward, recomputed, experts));
    if (backward == Backward::Whole)
      EXPECT_EQ(got[r].backwardCalls,
                listed(whole, sequenceParallel, first, end, Op::Backward, recomputed, experts));
    else {
      std::vector<Op> both =
          listed(whole, sequenceParallel, first, end, Op::BackwardInput, recomputed, experts);
      for (Op op :
           listed(whole, sequenceParallel, first, end, Op::BackwardWeight, recomputed, experts))
        both.push_back(op);
      EXPECT_EQ(got[r].backwardCalls, both);
    }
  }
}

struct Case {
  std::string name;
  GptShape shape;
  int64_t first, end;
  uint32_t recomputed = 0; ///< selective checkpointing's modules
  int32_t expert = 1;      ///< the routed experts' group: the two ranks with 2
};

std::vector<Case> cases() {
  GptShape gqa = gptShape();
  gqa.heads = 4;
  gqa.kvHeads = 2;
  GptShape qkvBias = tinyShape(true, false);
  qkvBias.seq = 6;
  qkvBias.vocab = 12;
  GptShape swiglu = gptShape();
  swiglu.gated = true;
  const GptShape llama = llamaShape(), qwen3 = qwen3Shape(), latent = latentShape(),
                 direct = latentDirectShape();
  // The latent heads and the attention core recomputed: without a query latent the queries
  // are projected again from the gathered input.
  const uint32_t heads = runtime::kRecomputeLatentUpProjection | runtime::kRecomputeCoreAttention;
  return {{"embedding", gptShape(), 0, 1},
          {"block", gptShape(), 1, 2},
          {"head", gptShape(), 3, 4},
          {"model", gptShape(), 0, 4},
          {"gqa_block", gqa, 1, 2},
          {"qkv_bias_block", qkvBias, 1, 2},
          {"swiglu_block", swiglu, 1, 2},
          {"llama_embedding", llama, 0, 1},
          {"llama_block", llama, 1, 2},
          {"llama_head", llama, 3, 4},
          {"llama_model", llama, 0, 4},
          {"qwen3_block", qwen3, 1, 2},
          {"qwen3_model", qwen3, 0, 4},
          {"latent_block", latent, 1, 2},
          {"latent_model", latent, 0, 4},
          {"latent_direct_block", direct, 1, 2},
          {"latent_yarn_block", latentYarnShape(), 1, 2},
          {"latent_block_recomputed", latent, 1, 3, heads},
          {"latent_direct_block_recomputed", direct, 1, 3, heads},
          {"moe_block", moeShape(), 2, 3},
          {"moe_model", moeShape(), 0, 4},
          {"moe_block_head", moeShape(), 2, 4},
          {"moe_sigmoid_block", moeSigmoidShape(), 2, 3},
          {"moe_gated_block", moeGatedShape(), 2, 3},
          {"moe_gpt_block", moeGptShape(), 2, 3},
          {"moe_capacity_block", moeCapacityShape(), 2, 3},
          {"moe_capacity_weight_block", moeCapacityShape(/*byWeight=*/true), 2, 3},
          // Expert parallelism beside tensor parallelism: the two ranks each hold two of the
          // four experts and send each other the tokens they route to them.
          {"moe_block_ep", moeShape(), 2, 3, 0, 2},
          {"moe_model_ep", moeShape(), 0, 4, 0, 2},
          {"moe_block_head_ep", moeShape(), 2, 4, 0, 2},
          {"moe_sigmoid_block_ep", moeSigmoidShape(), 2, 3, 0, 2},
          {"moe_gated_block_ep", moeGatedShape(), 2, 3, 0, 2},
          {"moe_gpt_block_ep", moeGptShape(), 2, 3, 0, 2},
          {"moe_capacity_block_ep", moeCapacityShape(), 2, 3, 0, 2},
          {"moe_capacity_weight_block_ep", moeCapacityShape(/*byWeight=*/true), 2, 3, 0, 2},
          {"moe_block_ep_recomputed", moeShape(), 2, 3,
           runtime::kRecomputeMoeActivation | runtime::kRecomputeLayerNorm, 2},
          // Multi-token prediction: the modules and the head, tied (the head's matrix is the
          // table) and untied (the first module's copy), with experts in their blocks over the
          // expert group, and the whole model.
          {"mtp_head", withModules(llama), 3, 6},
          {"mtp_untied_head", withModules(swiglu), 3, 6},
          {"mtp_moe_head_ep", withModules(moeShape()), 3, 6, 0, 2},
          {"mtp_moe_head_ep_recomputed", withModules(moeShape()), 3, 6,
           runtime::kRecomputeMoeActivation | runtime::kRecomputeLayerNorm, 2},
          {"mtp_model", withModules(llama), 0, 6}};
}

class TensorParallel : public ::testing::TestWithParam<std::tuple<Case, bool, Backward>> {};

TEST_P(TensorParallel, TwoRanksGiveTheUnsplitLayers) {
  const auto &[c, sequenceParallel, backward] = GetParam();
  checkSplit(c.shape, c.first, c.end, sequenceParallel, backward, c.recomputed, c.expert);
}

INSTANTIATE_TEST_SUITE_P(Layers, TensorParallel,
                         ::testing::Combine(::testing::ValuesIn(cases()), ::testing::Bool(),
                                            ::testing::Values(Backward::Whole, Backward::Split)),
                         [](const auto &info) {
                           return std::get<0>(info.param).name +
                                  (std::get<1>(info.param) ? "_sp" : "") +
                                  (std::get<2>(info.param) == Backward::Split ? "_split" : "");
                         });

// One rank is the unsplit model: its layers are the same code as the split ones, and issue no
// collective even where the Ops has a group, computing the bits of a run without one.
TEST(TensorParallel, OneRankIssuesNoCollectiveAndComputesTheUnsplitBits) {
  for (const GptShape &whole :
       {gptShape(), llamaShape(), qwen3Shape(), latentShape(), latentDirectShape(), moeShape(),
        moeSigmoidShape(), moeGatedShape()}) {
    for (const auto &[first, end] : {std::pair<int64_t, int64_t>{0, 4}, {1, 3}}) {
      runtime::Plan plan = planFor(whole);
      CpuOps<double> ops;
      LayerChain<double> chain = *LayerChain<double>::build(plan, whole, first, end, ops);
      std::vector<double> params(chain.numParams());
      chain.initialise(params.data(), 42);
      Random random({9});
      const int64_t samples = 2, width = whole.seq * whole.hidden;
      std::vector<double> x, dy(samples * width);
      if (!chain.hasEmbedding())
        for (int64_t i = 0; i < samples * width; ++i)
          x.push_back(random.normal());
      for (double &d : dy)
        d = random.normal();
      const Result alone = run(whole, first, end, params, x, dy, samples, Backward::Whole, nullptr);
      TensorMeeting meeting(1);
      Member member(meeting, 0, 1);
      const Result grouped =
          run(whole, first, end, params, x, dy, samples, Backward::Split, &member);
      EXPECT_TRUE(grouped.forwardCalls.empty());
      EXPECT_TRUE(grouped.backwardCalls.empty());
      EXPECT_EQ(grouped.y, alone.y);
      EXPECT_EQ(grouped.dx, alone.dx);
      EXPECT_EQ(grouped.dparams, alone.dparams);
      EXPECT_EQ(grouped.loss, alone.loss);
      EXPECT_EQ(grouped.auxLoss, alone.auxLoss);
    }
  }
}

TEST(TensorParallelSlices, EachRankStartsFromItsSliceOfTheUnsplitModel) {
  for (const GptShape &whole : {gptShape(), llamaShape(), qwen3Shape(), latentShape(),
                                latentDirectShape(), moeShape(), moeGatedShape()}) {
    const runtime::Plan plan = planFor(whole);
    for (size_t l = 0; l < plan.layers.size(); ++l) {
      const runtime::LayerKind kind = plan.layers[l].kind;
      std::vector<float> all(plan.layers[l].params);
      initialiseLayer(kind, whole, all.data(), 7, static_cast<int64_t>(l));
      std::vector<int> covered(all.size(), 0);
      for (int r = 0; r < kRanks; ++r) {
        GptShape shape = whole;
        shape.tensorSize = kRanks;
        shape.tensorRank = r;
        const int64_t index = static_cast<int64_t>(l);
        std::vector<float> mine(
            makeLayer<float>(kind, shape, Checkpointing::None, index)->numParams());
        initialiseLayer(kind, shape, mine.data(), 7, index);
        int64_t count = 0;
        for (const ParameterRun &run : tensorSlice(kind, shape, index)) {
          for (int64_t i = 0; i < run.length; ++i) {
            EXPECT_EQ(mine[run.local + i], all[run.whole + i]) << plan.layers[l].name;
            covered[run.whole + i] = 1;
          }
          count += run.length;
        }
        EXPECT_EQ(count, static_cast<int64_t>(mine.size())) << plan.layers[l].name;
      }
      EXPECT_EQ(std::count(covered.begin(), covered.end(), 1), static_cast<int64_t>(covered.size()))
          << plan.layers[l].name << ": some parameter is on no rank";
    }
  }
}

TEST(TensorParallelSlices, ShapesThatDoNotSplitAreRefusedNamingTheKey) {
  runtime::Plan plan = planFor(gptShape());
  plan.config.tensor = 4; // 2 heads
  absl::StatusOr<GptShape> shape = GptShape::fromPlan(plan);
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find("model.num_heads"), std::string::npos) << shape.status();
  plan = planFor(gptShape());
  plan.config.tensor = 2;
  plan.config.sequenceParallel = true;
  plan.transformer->seqLength = 5;
  shape = GptShape::fromPlan(plan);
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find("model.seq_length"), std::string::npos) << shape.status();
}

} // namespace

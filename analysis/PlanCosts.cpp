//===- PlanCosts.cpp - the duration of every instruction of a plan -------===//

#include "analysis/PlanCosts.h"
#include "runtime/plan/MemoryKinds.h"
#include "runtime/plan/TensorCollectives.h"

#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>

using namespace conduit;
using runtime::Instruction;
using runtime::Op;

namespace {

Collective collectiveOf(Op op) {
  switch (op) {
  case Op::AllGather:
  case Op::TensorAllGather:
    return Collective::AllGather;
  case Op::ReduceScatter:
  case Op::TensorReduceScatter:
    return Collective::ReduceScatter;
  default:
    return Collective::AllReduce;
  }
}

/// log C(a, b), for 0 <= b <= a.
double logChoose(int64_t a, int64_t b) {
  return std::lgamma(double(a + 1)) - std::lgamma(double(b + 1)) - std::lgamma(double(a - b + 1));
}

/// Of `candidates` equally likely experts, the chance that `draws` distinct ones miss a set of
/// `set` of them: the hypergeometric probability of no success.
double missProbability(double candidates, double set, int64_t draws) {
  double p = 1;
  for (int64_t i = 0; i < draws && p > 0; ++i) {
    const double d = static_cast<double>(i);
    p *= std::max(0.0, (candidates - set - d) / (candidates - d));
  }
  return p;
}

} // namespace

double conduit::expertAllToAllTime(const CostModel &cost, int64_t bytes, int64_t members,
                                   std::pair<int64_t, int64_t> peers,
                                   const runtime::Transformer &t) {
  const auto [away, near] = peers;
  auto part = [&](int64_t others, Link link) {
    // `others` members' shares, as an all-to-all among them and this rank.
    return cost.allToAllTime(bytes * (others + 1) / members, others + 1, link);
  };
  if (t.dispatch == 0 || away == 0 || t.topK < 1)
    return std::max(part(near, Link::IntraNode), part(away, Link::InterNode));
  const double e = static_cast<double>(members), inNode = static_cast<double>(near + 1);
  const int64_t nodes = llvm::divideCeilSigned(members, near + 1);
  const double n = static_cast<double>(nodes);
  const double remote =
      expectedTokenNodes(t.numExperts, t.topK, t.routerGroups, t.routerGroupTopK, nodes) * (n - 1) /
      n;
  const double perToken = static_cast<double>(bytes) / static_cast<double>(t.topK);
  const double network =
      cost.latency(Link::InterNode) + perToken * remote / cost.bandwidth(Link::InterNode);
  // Its own node's shares, and the copies it forwards: of the shares bound for other nodes,
  // those for members other than the receiving one.
  const double forwarded =
      static_cast<double>(near) + static_cast<double>(away) * static_cast<double>(near) / inNode;
  const double local =
      near > 0 ? cost.latency(Link::IntraNode) +
                     static_cast<double>(bytes) * forwarded / e / cost.bandwidth(Link::IntraNode)
               : 0.0;
  return std::max(network, local);
}

double conduit::fastestExpertAllToAll(const CostModel &cost, int64_t bytes, int64_t members,
                                      const runtime::Transformer &t) {
  if (members <= 1)
    return 0;
  double fastest = std::numeric_limits<double>::infinity();
  for (int64_t near = 0; near < std::min(members, cost.nodeSize()); ++near)
    fastest =
        std::min(fastest, expertAllToAllTime(cost, bytes, members, {members - 1 - near, near}, t));
  return fastest;
}

double conduit::expectedTokenNodes(int64_t experts, int64_t topK, int64_t groups, int64_t groupTopK,
                                   int64_t nodes) {
  if (nodes <= 1 || experts < 1 || topK < 1)
    return nodes >= 1 ? 1.0 : 0.0;
  const double n = static_cast<double>(experts), perNode = n / static_cast<double>(nodes);
  const bool limited = groups > 1 && groupTopK < groups;
  double miss = missProbability(n, perNode, topK); // a node none of the k experts lies on
  if (limited && groups % nodes == 0) {
    // A node holds r whole groups, j of which are among the token's chosen (hypergeometric).
    const int64_t r = groups / nodes;
    const double candidates = static_cast<double>(groupTopK) * n / static_cast<double>(groups);
    miss = 0;
    for (int64_t j = 0; j <= std::min(r, groupTopK); ++j)
      if (groupTopK - j <= groups - r)
        miss += std::exp(logChoose(r, j) + logChoose(groups - r, groupTopK - j) -
                         logChoose(groups, groupTopK)) *
                missProbability(candidates,
                                static_cast<double>(j) * n / static_cast<double>(groups), topK);
  } else if (limited && nodes % groups == 0) {
    // A group spans whole nodes: the node is a candidate with its group's chance.
    const double chosen = static_cast<double>(groupTopK) / static_cast<double>(groups);
    const double candidates = static_cast<double>(groupTopK) * n / static_cast<double>(groups);
    miss = (1 - chosen) + chosen * missProbability(candidates, perNode, topK);
  }
  return static_cast<double>(nodes) * (1 - miss);
}

PlanCosts PlanCosts::fromCostModel(const runtime::Plan &plan, const CostModel &cost,
                                   const std::vector<int64_t> &rankParams) {
  PlanCosts costs;
  costs.cost = &cost;
  costs.progressBetweenComputes = cost.progressBetweenComputes();
  const runtime::Config &c = plan.config;
  // The routed experts apart are reduced and sharded over their expert-data group (the
  // D x T / E ranks holding the same experts, E apart), as conduit-run does, not the replicas.
  const bool expertsApart = plan.expertsApart();
  if (expertsApart) {
    costs.expertDataMembers = int64_t(c.data) * c.tensor / c.expert;
    costs.elementBytes = c.elementBytes();
  }
  for (const runtime::Stage &stage : plan.stages) {
    CostModel::MicrobatchTimes times =
        cost.stageMicrobatchTimes(stage.firstLayer, stage.endLayer, stage.samples);
    costs.forward.push_back(std::move(times.forward));
    costs.backward.push_back(std::move(times.backward));
    costs.input.push_back(std::move(times.input));
    costs.weight.push_back(std::move(times.weight));
    // A rank's routed experts of the stage.
    int64_t experts = 0;
    if (expertsApart) {
      for (int32_t l = stage.firstLayer; l < stage.endLayer; ++l)
        experts += plan.layers[l].expertParams;
      experts /= c.expert;
      costs.stageExpertParams.push_back(experts);
    }
    costs.optimizer.push_back(cost.replicaOptimizerStepTime(
        c.optimizer == runtime::Optimizer::Adam, rankParams[stage.index], c.data,
        c.sharding != runtime::Sharding::None, experts, costs.expertDataMembers));
  }
  // Pipelined with the GEMMs only with sequence parallelism and the overlap (Megatron-Core's
  // tp_comm_overlap); otherwise every tensor collective is exposed.
  if (c.tensor > 1 && c.sequenceParallel && c.tensorCommOverlap) {
    runtime::TensorCollectiveCache issued(c, plan.layers,
                                          plan.transformer ? &*plan.transformer : nullptr);
    for (const runtime::Stage &stage : plan.stages) {
      auto &fractions = costs.exposed.emplace_back();
      for (int64_t m = 0; m < stage.numMicrobatches(); ++m) {
        const int64_t samples = stage.samples[m + 1] - stage.samples[m];
        std::array<double, 4> &f = fractions.emplace_back();
        const Op passes[] = {Op::Forward, Op::Backward, Op::BackwardInput, Op::BackwardWeight};
        const double compute[] = {costs.forward[stage.index][m], costs.backward[stage.index][m],
                                  costs.input[stage.index][m], costs.weight[stage.index][m]};
        for (int p = 0; p < 4; ++p) {
          double comm = 0;
          for (const runtime::TensorCollective &x :
               issued.of(stage.firstLayer, stage.endLayer, passes[p], samples))
            if (!x.isExpertAllToAll()) // priced apart (priceAllToAlls)
              comm += cost.tensorCollectiveTime(collectiveOf(x.op), x.bytes);
          f[p] = comm > 0 ? std::max(0.0, comm - compute[p]) / comm : 0;
        }
      }
    }
  }
  // A plan group's collective joins the replicas of each of its pipeline ranks, one ring per
  // tensor rank.
  for (const runtime::Group &group : plan.groups) {
    Ring slowest = Ring::fastest();
    std::vector<int64_t> members;
    for (int64_t t = 0; t < c.tensor; ++t) {
      members.clear();
      for (int32_t r : group.ranks)
        for (int64_t d = 0; d < c.data; ++d)
          members.push_back(cost.globalRank(r, d, t));
      slowest = Ring::slower(slowest, cost.ringOver(members));
    }
    costs.dpRing.push_back(slowest);
    costs.groupMembers.push_back(static_cast<int64_t>(group.ranks.size()) * c.data);
  }
  if (expertsApart) {
    // The routed experts' share of each stage's collectives goes over their expert-data group.
    for (const runtime::Group &group : plan.groups)
      costs.expertDataRing.push_back(conduit::expertDataRing(cost, c, group.ranks[0]));
  }
  costs.p2pLink.assign(c.pipeline, std::vector<Link>(c.pipeline, Link::IntraNode));
  for (int32_t a = 0; a < c.pipeline; ++a)
    for (int32_t b = 0; b < c.pipeline; ++b)
      costs.p2pLink[a][b] = cost.pipelineLink(a, b);
  if (cost.slowsBesideCollectives())
    costs.priceOverlaps(plan);
  if (plan.transformer && plan.transformer->isMoe() && c.expert > 1)
    costs.priceAllToAlls(plan);
  return costs;
}

std::pair<int64_t, int64_t> conduit::expertPeers(const runtime::Config &c, const CostModel &cost,
                                                 int64_t pipelineRank) {
  std::pair<int64_t, int64_t> busiest{0, 0}; // (other nodes, same node)
  // Each group once: E consecutive (replica, tensor rank) indices.
  for (int64_t i = 0; i < int64_t(c.data) * c.tensor; i += std::max<int32_t>(c.expert, 1)) {
    const std::vector<int64_t> group =
        runtime::expertGroupRanks(c, pipelineRank, i / c.tensor, i % c.tensor);
    for (int64_t member : group) {
      int64_t away = 0;
      for (int64_t peer : group)
        away += cost.linkBetween(member, peer) == Link::InterNode;
      busiest = std::max(busiest, {away, static_cast<int64_t>(group.size()) - 1 - away});
    }
  }
  return busiest;
}

Ring conduit::expertDataRing(const CostModel &cost, const runtime::Config &config,
                             int64_t pipelineRank) {
  // A group is the ranks whose index (replica x T + tensor rank) has one remainder mod E; the
  // first E indices, those of replica q / T and tensor rank q % T, meet each remainder once.
  Ring slowest = Ring::fastest();
  for (int64_t q = 0; q < config.expert; ++q)
    slowest =
        Ring::slower(slowest, cost.ringOver(runtime::expertDataGroupRanks(
                                  config, pipelineRank, q / config.tensor, q % config.tensor)));
  return slowest;
}

std::vector<double> conduit::collectiveOverlapSurcharges(const std::vector<OverlapItem> &items,
                                                         size_t numStages, double slowdown) {
  std::vector<double> surcharge(items.size(), 0.0);
  std::vector<double> gathered(numStages, 0.0), reduced(numStages, 0.0);
  // The collective stream runs one collective at a time, so its intervals come sorted and
  // disjoint; the computes' starts only grow, so those ended before one can be skipped.
  std::vector<std::pair<double, double>> running;
  size_t firstOpen = 0;
  double compute = 0, collectives = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const OverlapItem &item = items[i];
    switch (item.kind) {
    case OverlapItem::Kind::Gather:
    case OverlapItem::Kind::Reduction: {
      const double start = std::max(compute, collectives);
      collectives = start + item.seconds;
      running.push_back({start, collectives});
      (item.kind == OverlapItem::Kind::Gather ? gathered : reduced)[item.stage] = collectives;
      break;
    }
    case OverlapItem::Kind::Compute:
    case OverlapItem::Kind::OptimizerStep: {
      const double start =
          std::max(compute, item.kind == OverlapItem::Kind::Compute ? gathered[item.stage]
                                                                    : reduced[item.stage]);
      compute = start + item.seconds;
      while (firstOpen < running.size() && running[firstOpen].second <= start)
        ++firstOpen;
      double overlap = 0;
      for (size_t k = firstOpen; k < running.size() && running[k].first < compute; ++k)
        overlap += std::min(running[k].second, compute) - std::max(running[k].first, start);
      surcharge[i] = slowdown * overlap;
      break;
    }
    }
  }
  return surcharge;
}

void PlanCosts::priceOverlaps(const runtime::Plan &plan) {
  // Each compute is one (stage, micro-batch, pass) and each optimizer step one stage, all of
  // one rank, so a rank's durations take its surcharges in place without changing another's.
  std::vector<OverlapItem> items;
  std::vector<const Instruction *> slowed;
  for (const runtime::RankProgram &program : plan.ranks) {
    items.clear();
    slowed.clear();
    for (const Instruction &x : program.instructions) {
      OverlapItem::Kind kind;
      if (x.op == Op::OptimizerStep)
        kind = OverlapItem::Kind::OptimizerStep;
      else if (x.isCompute())
        kind = OverlapItem::Kind::Compute;
      else if (x.op == Op::AllGather)
        kind = OverlapItem::Kind::Gather;
      else if (x.op == Op::ReduceScatter || x.op == Op::AllReduce)
        kind = OverlapItem::Kind::Reduction;
      else
        continue;
      items.push_back({kind, x.stage, of(plan, program.rank, x)});
      slowed.push_back(&x);
    }
    const std::vector<double> surcharge =
        collectiveOverlapSurcharges(items, plan.stages.size(), kCollectiveOverlapSlowdown);
    for (size_t k = 0; k < items.size(); ++k) {
      const Instruction &x = *slowed[k];
      switch (x.op) {
      case Op::Forward:
        forward[x.stage][x.microbatch] += surcharge[k];
        break;
      case Op::Backward:
        backward[x.stage][x.microbatch] += surcharge[k];
        break;
      case Op::BackwardInput:
        input[x.stage][x.microbatch] += surcharge[k];
        break;
      case Op::BackwardWeight:
        weight[x.stage][x.microbatch] += surcharge[k];
        break;
      case Op::OptimizerStep:
        optimizer[x.stage] += surcharge[k];
        break;
      default: // a collective: 0
        break;
      }
    }
  }
}

double conduit::pairedStepTime(const std::vector<double> *const compute[2],
                               const std::vector<double> *const comm[2], double sharedRate) {
  constexpr double kNever = std::numeric_limits<double>::infinity();
  size_t next[2] = {0, 0};  // item 2k: segment k; item 2k+1: all-to-all k
  double ready[2] = {0, 0}; // when the chain's next item may start
  // What runs on the stream (0) and the link (1): its chain (-1: idle) and the work left, in
  // full-speed seconds.
  int chain[2] = {-1, -1};
  double left[2] = {0, 0};
  double now = 0;
  auto pending = [&](int h) { return next[h] < 2 * compute[h]->size() - 1; };
  for (;;) {
    // Start what can start now on each idle resource (the first chain, where both can).
    for (int resource = 0; resource < 2; ++resource) {
      if (chain[resource] >= 0)
        continue;
      int best = -1;
      for (int h = 0; h < 2 && best < 0; ++h)
        if (pending(h) && chain[0] != h && chain[1] != h &&
            static_cast<int>(next[h] % 2) == resource && ready[h] <= now)
          best = h;
      if (best < 0)
        continue;
      const size_t k = next[best] / 2;
      chain[resource] = best;
      left[resource] = resource == 0 ? (*compute[best])[k] : (*comm[best])[k];
    }
    const double rate = chain[1] >= 0 ? sharedRate : 1.0;
    double step = kNever;
    if (chain[0] >= 0)
      step = std::min(step, left[0] / rate);
    if (chain[1] >= 0)
      step = std::min(step, left[1]);
    for (int h = 0; h < 2; ++h)
      if (pending(h) && chain[0] != h && chain[1] != h && ready[h] > now)
        step = std::min(step, ready[h] - now);
    if (step == kNever)
      return now;
    now += step;
    if (chain[0] >= 0)
      left[0] -= step * rate;
    if (chain[1] >= 0)
      left[1] -= step;
    for (int resource = 0; resource < 2; ++resource) {
      const int h = chain[resource];
      if (h < 0 || left[resource] > 1e-15 * std::max(1.0, now))
        continue;
      ready[h] = now;
      ++next[h];
      chain[resource] = -1;
    }
  }
}

double conduit::pairedComputeRate(const CostModel &cost, const runtime::Transformer &t) {
  const int64_t sms = cost.deviceSms();
  if (t.dispatch == 1 && sms > kDispatchSms)
    return static_cast<double>(sms - kDispatchSms) / static_cast<double>(sms);
  return cost.slowsBesideCollectives() ? 1 / (1 + kCollectiveOverlapSlowdown) : 1.0;
}

std::vector<double> conduit::computeSegments(const runtime::Transformer &t,
                                             const std::vector<runtime::Layer> &layers,
                                             int32_t first, int32_t end, Op op,
                                             llvm::function_ref<double(int32_t)> time,
                                             llvm::function_ref<double(int32_t)> recomputed) {
  std::vector<double> cut{0};
  auto work = [&](double time) { cut.back() += time; };
  auto allToAll = [&] { cut.push_back(0); };
  // The routed experts' share of a block: top-k experts' FLOPs (three products of a gated MLP,
  // two of GELU's) of the block's forward FLOPs, the same for its backward.
  const double expertFlops =
      static_cast<double>(t.topK) * (t.mlp == 1 ? 3 : 2) * 2 * static_cast<double>(t.hiddenSize) *
      static_cast<double>(t.expertFfnHiddenSize) * static_cast<double>(t.seqLength);
  auto routed = [&](int32_t l) {
    const double total = layers[l].fwdFlops;
    return total > 0 ? std::clamp(expertFlops / total, 0.0, 1.0) : 0.0;
  };
  auto forward = [&](int32_t l, double time) {
    const double q = routed(l);
    work((1 - q) * time); // attention, router, shared experts
    allToAll();           // dispatch
    work(q * time);       // the routed experts
    allToAll();           // combine
  };
  for (int32_t k = 0; k < end - first; ++k) {
    const int32_t l = op == Op::Forward ? first + k : end - 1 - k;
    const bool experts = runtime::layerHasExperts(&t, layers, l);
    switch (op) {
    case Op::Forward:
      if (experts)
        forward(l, time(l));
      else
        work(time(l));
      break;
    case Op::Backward:
    case Op::BackwardInput: {
      const double whole = time(l);
      if (!experts) {
        work(whole);
        break;
      }
      const double again = recomputed ? recomputed(l) : 0;
      if (recomputed)
        forward(l, again);
      const double q = routed(l);
      allToAll();                // combine's gradient
      work(q * (whole - again)); // the routed experts' gradients
      allToAll();                // dispatch's gradient
      work((1 - q) * (whole - again));
      break;
    }
    default:
      work(time(l));
      break;
    }
  }
  return cut;
}

std::optional<double> conduit::pairExposedAllToAll(const std::vector<double> *const cuts[2],
                                                   const double own[2],
                                                   const std::vector<double> *const comms[2],
                                                   double sharedRate) {
  std::vector<double> scaled[2];
  double compute = 0, communication = 0;
  for (int h = 0; h < 2; ++h) {
    const std::vector<double> &cut = *cuts[h], &comm = *comms[h];
    if (cut.size() != comm.size() + 1)
      return std::nullopt;
    // The segments add up to the compute's own duration.
    const double sum = std::accumulate(cut.begin(), cut.end(), 0.0);
    for (double segment : cut)
      scaled[h].push_back(sum > 0 ? segment * own[h] / sum
                                  : own[h] / static_cast<double>(cut.size()));
    compute += own[h];
    communication += std::accumulate(comm.begin(), comm.end(), 0.0);
  }
  if (!(communication > 0))
    return std::nullopt;
  const std::vector<double> *computeOf[2] = {&scaled[0], &scaled[1]};
  return std::max(0.0, pairedStepTime(computeOf, comms, sharedRate) - compute);
}

void PlanCosts::priceAllToAlls(const runtime::Plan &plan) {
  const runtime::Config &c = plan.config;
  // Per-node dispatch kernels (DeepEP) run on SMs of their own, taken from the computation
  // they overlap; NCCL's all-to-all slows it as its other collectives do.
  const double sharedRate = pairedComputeRate(*cost, *plan.transformer);
  const bool recomputed = runtime::recomputesWhole(c.checkpointing);
  // A compute's segments depend on its stage, pass and size only: each is cut once.
  std::map<std::tuple<int32_t, Op, int64_t>, std::vector<double>> cutOf;
  auto segmentsOf = [&](const Instruction &x) -> const std::vector<double> & {
    const runtime::Stage &stage = plan.stages[x.stage];
    const int64_t samples = stage.samples[x.microbatch + 1] - stage.samples[x.microbatch];
    auto [it, fresh] = cutOf.try_emplace({x.stage, x.op, samples});
    if (fresh) {
      auto time = [&](int32_t l) {
        switch (x.op) {
        case Op::Forward:
          return cost->forwardTime(l, samples);
        case Op::Backward:
          return cost->backwardTime(l, samples);
        case Op::BackwardInput:
          return cost->inputGradientTime(l, samples);
        default:
          return cost->weightGradientTime(l, samples);
        }
      };
      auto again = [&](int32_t l) { return cost->recomputeTime(l, samples); };
      it->second =
          computeSegments(*plan.transformer, plan.layers, stage.firstLayer, stage.endLayer, x.op,
                          time, recomputed ? llvm::function_ref<double(int32_t)>(again) : nullptr);
    }
    return it->second;
  };
  for (const runtime::RankProgram &program : plan.ranks) {
    const int32_t r = program.rank;
    const std::pair<int64_t, int64_t> peers = expertPeers(c, *cost, r);
    const std::vector<Instruction> &list = program.instructions;
    std::vector<double> &whole = allToAllWhole.emplace_back(list.size(), 0.0);
    std::vector<double> &added = allToAllAdded.emplace_back(list.size(), 0.0);
    // Per compute instruction: its all-to-alls (instruction indices), in order.
    std::vector<std::vector<int64_t>> issued(list.size());
    int64_t owner = -1;
    for (size_t i = 0; i < list.size(); ++i) {
      const Instruction &x = list[i];
      if (x.isCompute())
        owner = static_cast<int64_t>(i);
      if (!x.isExpertAllToAll())
        continue;
      whole[i] = added[i] = expertAllToAllTime(*cost, x.bytes, c.expert, peers, *plan.transformer);
      if (owner >= 0)
        issued[owner].push_back(static_cast<int64_t>(i));
    }
    // Paired steps whose all-to-alls hide behind each other.
    for (size_t i = 0; i < list.size(); ++i) {
      if (!list[i].isCompute() || list[i].flags != Instruction::kPaired)
        continue;
      size_t j = i + 1;
      while (j < list.size() && !list[j].isCompute())
        ++j;
      if (j >= list.size())
        continue;
      const size_t half[2] = {i, j};
      bool hidden = !issued[i].empty() || !issued[j].empty();
      for (size_t h : half)
        for (int64_t k : issued[h])
          hidden = hidden && list[k].peerStage == list[half[h == i]].stage &&
                   list[k].peerMicrobatch == list[half[h == i]].microbatch;
      if (!hidden)
        continue;
      std::vector<double> cuts[2], comms[2];
      double own[2], communication = 0;
      for (int h = 0; h < 2; ++h) {
        cuts[h] = segmentsOf(list[half[h]]);
        own[h] = of(plan, r, list[half[h]]);
        for (int64_t k : issued[half[h]])
          comms[h].push_back(whole[k]);
        communication += std::accumulate(comms[h].begin(), comms[h].end(), 0.0);
      }
      // Null where the halves are not cut as TensorCollectives.h lists their all-to-alls:
      // those are priced whole.
      const std::vector<double> *cutOf[2] = {&cuts[0], &cuts[1]};
      const std::vector<double> *commOf[2] = {&comms[0], &comms[1]};
      const std::optional<double> exposed = pairExposedAllToAll(cutOf, own, commOf, sharedRate);
      if (!exposed)
        continue;
      for (size_t h : half)
        for (int64_t k : issued[h])
          added[k] = *exposed * whole[k] / communication;
    }
  }
}

double PlanCosts::expertAllToAll(int32_t rank, int64_t index) const {
  return allToAllAdded.empty() ? 0 : allToAllAdded[rank][index];
}

double PlanCosts::expertAllToAllWhole(int32_t rank, int64_t index) const {
  return allToAllWhole.empty() ? 0 : allToAllWhole[rank][index];
}

PlanCosts PlanCosts::unit(const runtime::Plan &plan) {
  PlanCosts costs;
  for (const runtime::Stage &stage : plan.stages) {
    std::vector<double> &f = costs.forward.emplace_back(), &b = costs.backward.emplace_back(),
                        &in = costs.input.emplace_back(), &w = costs.weight.emplace_back();
    for (int64_t m = 0; m < stage.numMicrobatches(); ++m) {
      double samples = static_cast<double>(stage.samples[m + 1] - stage.samples[m]);
      f.push_back(samples);
      b.push_back(2 * samples);
      in.push_back(samples);
      w.push_back(samples);
    }
    costs.optimizer.push_back(0);
  }
  return costs;
}

double PlanCosts::of(const runtime::Plan &plan, int32_t rank, const Instruction &inst) const {
  switch (inst.op) {
  case Op::Forward:
    return forward[inst.stage][inst.microbatch];
  case Op::Backward:
    return backward[inst.stage][inst.microbatch];
  case Op::BackwardInput:
    return input[inst.stage][inst.microbatch];
  case Op::BackwardWeight:
    return weight[inst.stage][inst.microbatch];
  case Op::OptimizerStep:
    return optimizer[inst.stage];
  case Op::Send:
  case Op::Recv:
    return cost ? cost->transferTime(inst.bytes, p2pLink[rank][inst.peer]) : 0;
  case Op::TieGrads: // both directions at once; an in-place sum is free next to compute
    return cost && inst.peer != rank ? cost->transferTime(inst.bytes, p2pLink[rank][inst.peer]) : 0;
  case Op::AllGather:
  case Op::ReduceScatter:
  case Op::AllReduce: {
    if (!cost)
      return 0;
    // With expert parallelism the routed experts' part runs over the expert-data group, after
    // the rest (nothing to move when that group is one rank).
    int64_t experts = 0;
    if (!stageExpertParams.empty())
      experts = std::min(inst.bytes,
                         stageExpertParams[inst.stage] *
                             (inst.op == Op::AllGather ? elementBytes : runtime::kGradientBytes));
    const double dense = cost->collectiveTime(collectiveOf(inst.op), inst.bytes - experts,
                                              groupMembers[inst.group], dpRing[inst.group]);
    if (experts == 0 || expertDataMembers <= 1)
      return dense;
    return dense + cost->collectiveTime(collectiveOf(inst.op), experts, expertDataMembers,
                                        expertDataRing[inst.group]);
  }
  default:
    return 0;
  }
}

double PlanCosts::tensorCollective(const Instruction &inst, Op pass) const {
  if (!cost)
    return 0;
  const double whole = cost->tensorCollectiveTime(collectiveOf(inst.op), inst.bytes);
  if (exposed.empty())
    return whole;
  const int p = pass == Op::Forward         ? 0
                : pass == Op::Backward      ? 1
                : pass == Op::BackwardInput ? 2
                                            : 3;
  return whole * exposed[inst.stage][inst.microbatch][p];
}

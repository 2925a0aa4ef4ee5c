//===- PlanCosts.cpp - the duration of every instruction of a plan -------===//

#include "analysis/PlanCosts.h"
#include "runtime/plan/TensorCollectives.h"

using namespace conduit;
using runtime::Instruction;
using runtime::Op;

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

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

} // namespace

PlanCosts PlanCosts::fromCostModel(const runtime::Plan &plan, const CostModel &cost) {
  PlanCosts costs;
  costs.cost = &cost;
  const runtime::Config &c = plan.config;
  for (const runtime::Stage &stage : plan.stages) {
    CostModel::MicrobatchTimes times =
        cost.stageMicrobatchTimes(stage.firstLayer, stage.endLayer, stage.samples);
    costs.forward.push_back(std::move(times.forward));
    costs.backward.push_back(std::move(times.backward));
    costs.input.push_back(std::move(times.input));
    costs.weight.push_back(std::move(times.weight));
    bool sharded = c.data > 1 && c.sharding != runtime::Sharding::None;
    int64_t params = sharded ? ceilDiv(stage.params, c.data) : stage.params;
    costs.optimizer.push_back(
        cost.optimizerStepTime(c.optimizer == runtime::Optimizer::Adam, params));
  }
  if (c.tensor > 1 && c.sequenceParallel)
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
          for (const runtime::TensorCollective &x : runtime::tensorCollectives(
                   c, plan.layers, stage.firstLayer, stage.endLayer, passes[p], samples))
            comm += cost.tensorCollectiveTime(collectiveOf(x.op), x.bytes);
          f[p] = comm > 0 ? std::max(0.0, comm - compute[p]) / comm : 0;
        }
      }
    }
  for (const runtime::Group &group : plan.groups) {
    Link link = Link::IntraNode;
    for (int32_t r : group.ranks)
      if (cost.dataParallelLink(r) == Link::InterNode)
        link = Link::InterNode;
    for (size_t i = 1; i < group.ranks.size(); ++i)
      if (cost.pipelineLink(group.ranks[0], group.ranks[i]) == Link::InterNode)
        link = Link::InterNode;
    costs.dpLink.push_back(link);
    costs.groupMembers.push_back(static_cast<int64_t>(group.ranks.size()) * c.data);
  }
  costs.p2pLink.assign(c.pipeline, std::vector<Link>(c.pipeline, Link::IntraNode));
  for (int32_t a = 0; a < c.pipeline; ++a)
    for (int32_t b = 0; b < c.pipeline; ++b)
      costs.p2pLink[a][b] = cost.pipelineLink(a, b);
  return costs;
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
    return cost->collectiveTime(collectiveOf(inst.op), inst.bytes, groupMembers[inst.group],
                                dpLink[inst.group]);
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

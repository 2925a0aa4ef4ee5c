//===- StageLayout.cpp - where a rank keeps its parameters of a stage ------===//

#include "runtime/model/StageLayout.h"

#include "runtime/model/Gpt.h"

#include <algorithm>

namespace conduit::model {

StageLayout StageLayout::of(const runtime::Plan &plan, const GptShape &shape, int64_t first,
                            int64_t end, int64_t align) {
  StageLayout l;
  // Per layer: its runs (offsets within the layer) and how many of its parameters are routed
  // experts kept in the expert segment (the last ones of the layer's local order).
  struct Local {
    std::vector<ParameterRun> runs;
    int64_t params = 0, experts = 0;
  };
  std::vector<Local> locals;
  for (int64_t i = first; i < end; ++i) {
    const runtime::Layer &spec = plan.layers[i];
    Local x;
    std::unique_ptr<Layer<float>> layer =
        shape.split() ? makeLayer<float>(spec.kind, shape, Checkpointing::None, i) : nullptr;
    if (layer) {
      x.params = layer->numParams();
      x.runs = layer->slice();
      x.experts = shape.expertsApart() ? layer->expertParams() : 0;
    } else {
      x.params = spec.params;
      addRun(x.runs, 0, 0, spec.params);
    }
    l.layerAt.push_back(l.dense);
    l.dense += x.params - x.experts;
    l.experts += x.experts;
    locals.push_back(std::move(x));
  }
  l.expertsAt = expertsStart(l.dense, l.experts, align);
  int64_t expertAt = l.expertsAt;
  for (size_t k = 0; k < locals.size(); ++k) {
    const Local &x = locals[k];
    l.layerExpertsAt.push_back(expertAt);
    // The layer's local offsets below `boundary` go to its place in the dense segment, the
    // rest to its place in the expert segment.
    const int64_t boundary = x.params - x.experts;
    auto place = [&](int64_t local) {
      return local < boundary ? l.layerAt[k] + local : expertAt + (local - boundary);
    };
    for (const ParameterRun &run : x.runs) {
      const int64_t split = std::clamp(boundary - run.local, int64_t(0), run.length);
      addRun(l.runs, l.whole + run.whole, place(run.local), split);
      addRun(l.runs, l.whole + run.whole + split, place(run.local + split), run.length - split);
    }
    expertAt += x.experts;
    l.whole += plan.layers[first + static_cast<int64_t>(k)].params;
  }
  return l;
}

std::vector<float> StageLayout::part(const float *wholeParams) const {
  std::vector<float> out(size(), 0.0f);
  for (const ParameterRun &run : runs)
    std::copy(wholeParams + run.whole, wholeParams + run.whole + run.length,
              out.begin() + run.local);
  return out;
}

void StageLayout::intoWhole(const float *partParams, float *wholeParams) const {
  for (const ParameterRun &run : runs)
    std::copy(partParams + run.local, partParams + run.local + run.length, wholeParams + run.whole);
}

std::vector<float> wholeFromParts(const runtime::Plan &plan, const GptShape &shape, int64_t first,
                                  int64_t end, int64_t align, const float *parts,
                                  const std::vector<PartPlace> &places) {
  std::vector<float> whole;
  for (size_t i = 0; i < places.size(); ++i) {
    GptShape member = shape;
    member.tensorRank = places[i].tensorRank;
    member.expertRank = places[i].expertRank;
    const StageLayout layout = StageLayout::of(plan, member, first, end, align);
    whole.resize(layout.whole);
    layout.intoWhole(parts + static_cast<int64_t>(i) * layout.size(), whole.data());
  }
  return whole;
}

} // namespace conduit::model

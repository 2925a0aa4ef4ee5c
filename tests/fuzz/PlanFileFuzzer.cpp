//===- PlanFileFuzzer.cpp - libFuzzer target: the plan file reader --------===//
//
// A plan file is untrusted input to conduit-run. Everything conduit-run does with one before
// the first step must hold for any bytes: the structural and semantic checks of readPlan,
// and, for a plan they accept, the model's construction (shape, every stage's layer chain and
// its parameter count) without allocating or running it.
//
//===----------------------------------------------------------------------===//

#include "runtime/model/Gpt.h"
#include "runtime/model/Ops.h"
#include "runtime/plan/PlanFile.h"

#include <cstddef>
#include <cstdint>

using namespace conduit;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  absl::StatusOr<runtime::Plan> plan = runtime::readPlan(data, size);
  if (!plan.ok())
    return 0;
  absl::StatusOr<model::GptShape> shape = model::GptShape::fromPlan(*plan);
  if (!shape.ok())
    return 0;
  model::CpuOps<float> ops;
  for (const runtime::Stage &stage : plan->stages) {
    absl::StatusOr<model::LayerChain<float>> chain =
        model::LayerChain<float>::build(*plan, *shape, stage.firstLayer, stage.endLayer, ops);
    if (chain.ok())
      (void)chain->numParams();
  }
  return 0;
}

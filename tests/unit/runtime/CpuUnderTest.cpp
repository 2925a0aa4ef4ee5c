//===- CpuUnderTest.cpp - runtime_tests runs the shared suites on the CPU ----===//
//
// The implementations and backends the suites shared with runtime_cuda_tests run on in this
// binary (OpsConformance.h, exec/PlanRuns.h): the CPU's.
//
//===----------------------------------------------------------------------===//

#include "runtime/model/Ops.h"
#include "tests/unit/runtime/OpsConformance.h"
#include "tests/unit/runtime/exec/PlanRuns.h"

namespace conduit::model::testing {

std::vector<Implementation> implementationsUnderTest() {
  return {{"cpu", [](std::string &) { return std::make_unique<CpuOps<float>>(); }, 2e-5, {}}};
}

} // namespace conduit::model::testing

namespace conduit::runtime::testing {

std::vector<BackendKind> backendsUnderTest() { return {cpuBackend()}; }

} // namespace conduit::runtime::testing

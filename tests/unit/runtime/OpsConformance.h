//===- OpsConformance.h - the implementations the conformance suite tests --*- C++ -*-===//
//
// OpsConformanceTest.cpp runs one suite on every implementation of the model's math that its
// binary names (implementationsUnderTest): the CPU in runtime_tests, CUDA at float32 and at
// bf16 GEMM precision in runtime_cuda_tests, so that only the binary that needs the CUDA
// libraries loads them.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_TESTS_UNIT_RUNTIME_OPSCONFORMANCE_H
#define CONDUIT_TESTS_UNIT_RUNTIME_OPSCONFORMANCE_H

#include "runtime/model/Ops.h"

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace conduit::model::testing {

/// An implementation under test, and how close to the double-precision oracle it must come
/// (largest error relative to the largest reference magnitude).
struct Implementation {
  std::string name;
  /// The Ops, or null with `skip` saying why.
  std::function<std::unique_ptr<Ops<float>>(std::string &skip)> make;
  double tolerance;
  /// The first failure an Ops kept instead of returning it (CUDA's), or empty; checked after
  /// each test. Null where the Ops returns every failure.
  std::function<std::string(Ops<float> &)> keptFailure;
};

/// Test names and ctest show the implementation's name.
inline void PrintTo(const Implementation &implementation, std::ostream *out) {
  *out << implementation.name;
}

/// The implementations this test binary runs the suite on (defined once per binary).
std::vector<Implementation> implementationsUnderTest();

} // namespace conduit::model::testing

#endif // CONDUIT_TESTS_UNIT_RUNTIME_OPSCONFORMANCE_H

//===- Initialise.h - how the layer units draw their weights ----*- C++ -*-===//
//
// Weights are normal with standard deviation 0.02, drawn from a stream determined by (seed,
// global layer index) in the layer's parameter order, so that every plan of a job, whatever
// its tensor size, starts from the same model; gains are 1 and biases 0.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_MODEL_LAYERS_INITIALISE_H
#define CONDUIT_RUNTIME_MODEL_LAYERS_INITIALISE_H

#include "runtime/model/Random.h"

#include <cstdint>

namespace conduit::model {

constexpr double kInitStd = 0.02;

/// The next `n` normals of `random`, times kInitStd, into p.
template <typename T> void fillNormal(T *p, int64_t n, Random &random) {
  for (int64_t i = 0; i < n; ++i)
    p[i] = static_cast<T>(kInitStd * random.normal());
}

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_LAYERS_INITIALISE_H

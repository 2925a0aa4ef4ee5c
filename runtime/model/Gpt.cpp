//===- Gpt.cpp - the decoder's layers and the chain that runs them ---------===//
//
// The layer of each kind (makeLayer), a tensor rank's slices of the whole layers' parameters and
// their initialisation, and the LayerChain: forward, whole and split backward, full
// checkpointing's recomputation, and the per-sample pieces of a micro-batch.
//
//===----------------------------------------------------------------------===//

#include "runtime/model/Gpt.h"

#include "runtime/model/layers/Block.h"
#include "runtime/model/layers/Embedding.h"
#include "runtime/model/layers/Head.h"
#include "runtime/model/layers/Mtp.h"
#include "runtime/plan/Limits.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <chrono>

namespace conduit::model {

template <typename T>
std::unique_ptr<Layer<T>> makeLayer(runtime::LayerKind kind, const GptShape &shape,
                                    Checkpointing checkpointing, int64_t layer,
                                    uint32_t recomputeModules) {
  const bool selective = checkpointing == Checkpointing::Selective;
  switch (kind) {
  case runtime::LayerKind::Embedding:
    return std::make_unique<Embedding<T>>(shape);
  case runtime::LayerKind::Block:
    if (const int64_t depth = shape.mtpDepth(layer); depth >= 0)
      return std::make_unique<Mtp<T>>(shape, depth, selective ? recomputeModules : 0u,
                                      shape.layerHasExperts(layer));
    return std::make_unique<Block<T>>(shape, selective ? recomputeModules : 0u,
                                      shape.layerHasExperts(layer));
  case runtime::LayerKind::Head:
    return std::make_unique<Head<T>>(shape);
  case runtime::LayerKind::Custom:
    return nullptr;
  }
  return nullptr;
}

std::vector<ParameterRun> tensorSlice(runtime::LayerKind kind, const GptShape &shape,
                                      int64_t index) {
  std::unique_ptr<Layer<float>> layer = makeLayer<float>(kind, shape, Checkpointing::None, index);
  return layer ? layer->slice() : std::vector<ParameterRun>();
}

template <typename T>
void initialiseLayer(runtime::LayerKind kind, const GptShape &shape, T *params, uint64_t seed,
                     int64_t layer) {
  if (!shape.split()) {
    makeLayer<T>(kind, shape, Checkpointing::None, layer)->initialise(params, seed, layer);
    return;
  }
  std::unique_ptr<Layer<T>> whole = makeLayer<T>(kind, shape.whole(), Checkpointing::None, layer);
  std::vector<T> all(whole->numParams());
  whole->initialise(all.data(), seed, layer);
  for (const ParameterRun &run : tensorSlice(kind, shape, layer))
    std::copy(all.begin() + run.whole, all.begin() + run.whole + run.length, params + run.local);
}

template <typename T>
absl::StatusOr<LayerChain<T>> LayerChain<T>::build(const runtime::Plan &plan, const GptShape &shape,
                                                   int64_t first, int64_t end, Ops<T> &ops,
                                                   Checkpointing checkpointing, int64_t align) {
  LayerChain chain;
  int64_t total = 0; // the layers' parameters, checked against the limits as they are added
  chain.shape = shape;
  chain.firstLayer = first;
  chain.checkpointing = checkpointing;
  chain.ops = &ops;
  for (int64_t l = first; l < end; ++l) {
    const runtime::Layer &spec = plan.layers[l];
    std::unique_ptr<Layer<T>> layer =
        makeLayer<T>(spec.kind, shape, checkpointing, l, plan.config.recomputeModules);
    if (!layer)
      return absl::FailedPreconditionError(
          absl::StrCat("layer ", spec.name,
                       " is a custom layer; conduit-run trains the "
                       "layers of a transformer only"));
    const int64_t whole =
        shape.split() ? makeLayer<T>(spec.kind, shape.whole(), checkpointing, l)->numParams()
                      : layer->numParams();
    if (whole != spec.params)
      return absl::FailedPreconditionError(absl::StrCat(
          "layer ", spec.name, ": the plan counts ", spec.params, " parameters, the model has ",
          whole, "; the plan was compiled for a different architecture"));
    const bool isEmbedding = spec.kind == runtime::LayerKind::Embedding;
    const bool isHead = spec.kind == runtime::LayerKind::Head;
    if ((isEmbedding && l != 0) || (isHead && l != static_cast<int64_t>(plan.layers.size()) - 1))
      return absl::FailedPreconditionError(
          absl::StrCat("layer ", spec.name, " is out of place in the chain"));
    chain.embedding = chain.embedding || isEmbedding;
    chain.head = chain.head || isHead;
    std::optional<int64_t> sum = limits::checkedAdd(total, layer->numParams());
    if (!sum || *sum > limits::kMaxExact)
      return absl::FailedPreconditionError(absl::StrCat(
          "layers ", first, " to ", l, " have more than ", limits::kMaxExact, " parameters"));
    total = *sum;
    chain.layers.push_back(std::move(layer));
    chain.names.push_back(spec.name);
    chain.kinds.push_back(spec.kind);
  }
  // Where each layer's parameters lie; with expert parallelism its routed experts apart.
  chain.layout = StageLayout::of(plan, shape, first, end, align);
  for (size_t i = 0; i < chain.layers.size(); ++i)
    if (chain.layout.experts > 0)
      chain.layers[i]->placeExperts(chain.layout.layerExpertsAt[i] - chain.layout.layerAt[i]);
  CONDUIT_RETURN_IF_ERROR(chain.placeShared(plan));
  return chain;
}

template <typename T> absl::Status LayerChain<T>::placeShared(const runtime::Plan &plan) {
  // The head's matrix, after its norm; untied, the first module's copy of the token table,
  // its first parameters (Mtp.h). The modules lie right before the head.
  const int64_t headMatrix = head ? layout.layerAt.back() + shape.normParams() : -1;
  tableCopy = shape.tied ? headMatrix : -1;
  const int64_t headLayer = static_cast<int64_t>(plan.layers.size()) - 1;
  const int64_t firstModule = headLayer - shape.mtpLayers, end = globalLayer(layers.size());
  if (shape.mtpLayers == 0 || end <= firstModule)
    return absl::OkStatus(); // no module here
  const size_t from = static_cast<size_t>(std::max<int64_t>(firstModule - firstLayer, 0));
  if (!head)
    return absl::FailedPreconditionError(absl::StrCat(
        "layer ", names[from], " is a multi-token prediction module without the head (layer ",
        plan.layers[headLayer].name, ") on its stage; recompile the job"));
  if (firstLayer > firstModule)
    return absl::FailedPreconditionError(
        absl::StrCat("layer ", names[from],
                     " is a multi-token prediction module on another stage than the first (layer ",
                     plan.layers[firstModule].name, "); recompile the job"));
  if (!shape.tied)
    tableCopy = layout.layerAt[from];
  for (size_t i = from; i + 1 < layers.size(); ++i)
    layers[i]->placeShared(tableCopy - layout.layerAt[i], headMatrix - layout.layerAt[i]);
  return absl::OkStatus();
}

template <typename T> std::vector<int64_t> LayerChain<T>::loadBalancedBiases() const {
  std::vector<int64_t> out;
  for (size_t i = 0; i < layers.size(); ++i)
    if (const int64_t bias = layers[i]->loadBalancedBias(); bias >= 0)
      out.push_back(layout.layerAt[i] + bias);
  return out;
}

template <typename T>
void LayerChain<T>::placeExpertsApart(const T *params, T *grads, double *doubleGrads) {
  if (layout.experts == 0)
    return; // every expert in the layers' own ranges (no expert parallelism)
  for (size_t i = 0; i < layers.size(); ++i) {
    const int64_t at = layout.layerExpertsAt[i] - layout.expertsAt;
    if (layers[i]->expertParams() > 0)
      layers[i]->placeExpertsApart(params ? params + at : nullptr, grads ? grads + at : nullptr);
  }
  apartDoubleGrads = doubleGrads;
}

template <typename T> void LayerChain<T>::accumulate(const T *dparams, double *grads) const {
  if (!apartDoubleGrads) {
    ops->accumulate(numParams(), dparams, grads);
    return;
  }
  ops->accumulate(layout.expertsAt, dparams, grads);
  ops->accumulate(layout.experts, dparams + layout.expertsAt, apartDoubleGrads);
}

template <typename T> void LayerChain<T>::initialise(T *params, uint64_t seed) const {
  std::vector<T> host(numParams(), T(0)), one;
  for (size_t i = 0; i < layers.size(); ++i) {
    // The layer's parameters in its local order, then in their places.
    one.assign(layers[i]->numParams(), T(0));
    initialiseLayer(kinds[i], shape, one.data(), seed, globalLayer(i));
    const int64_t experts = layout.experts > 0 ? layers[i]->expertParams() : 0;
    const auto boundary = one.end() - experts;
    std::copy(one.begin(), boundary, host.begin() + layout.layerAt[i]);
    std::copy(boundary, one.end(), host.begin() + layout.layerExpertsAt[i]);
  }
  ops->upload(host.data(), numParams(), params);
}

namespace {
double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// The buffer one piece's parameter gradients are computed in before they are added to the
/// double accumulators: it stands for the plan's float gradients with them, so it counts for
/// nothing of its own (MemoryCounter.h).
template <typename T> Buffer<T> pieceGradients(Ops<T> &ops, int64_t n) {
  MemoryScope scope(ops.memory(), MemoryUse::Gradients, /*countedWidth=*/0);
  return ops.allocate(n);
}

/// Adds one piece's per-layer seconds to the micro-batch's (when it keeps them).
void addSeconds(const std::vector<double> &piece, std::vector<double> *total) {
  if (!total)
    return;
  total->resize(piece.size(), 0);
  for (size_t i = 0; i < piece.size(); ++i)
    (*total)[i] += piece[i];
}
} // namespace

template <typename T>
void LayerChain<T>::forward(const T *params, const T *x, const Tokens &batch, T *y, Cache &cache,
                            std::vector<double> *seconds) const {
  const int64_t activation = batch.samples * sampleSize(); // the chain's input
  cache.layers.clear();
  cache.layers.resize(layers.size());
  cache.samples = batch.samples;
  cache.inputs.clear();
  if (runtime::recomputesWhole(checkpointing)) {
    // What the recomputation needs: each recomputed layer's input, kept from here on, and the
    // tokens.
    cache.inputs.resize(layers.size());
    if (x && recomputes(0)) {
      cache.inputs[0] = ops->allocate(activation);
      ops->copy(activation, x, cache.inputs[0].data());
    }
    const int64_t tokens = batch.samples * shape.seq;
    cache.tokens.assign(batch.tokens, batch.tokens + (embedding ? tokens : 0));
    cache.targets.assign(batch.targets, batch.targets + (head ? tokens : 0));
    cache.lossScale = batch.lossScale;
  }
  // Between two layers, the output of one is the input of the next, which keeps its own copy
  // of it: it is released once the next layer's forward has run (or, where the next layer is
  // recomputed, kept as its input). A recomputed layer's cache goes after its forward.
  Buffer<T> input, output;
  const T *in = x;
  for (size_t i = 0; i < layers.size(); ++i) {
    const bool last = i + 1 == layers.size();
    T *out = y;
    if (!last) {
      output = ops->allocate(activation * layers[i]->outputWidth());
      out = output.data();
    }
    if (seconds)
      ops->synchronize();
    const auto start = std::chrono::steady_clock::now();
    {
      std::optional<MemoryScope> working; // a recomputed layer's cache lives while it runs
      if (recomputes(i))
        working.emplace(ops->memory(), MemoryUse::Working);
      layers[i]->forward(*ops, params + offset(i), in, batch, out, cache.layers[i]);
    }
    if (seconds) {
      ops->synchronize();
      seconds->push_back(secondsSince(start));
    }
    if (recomputes(i))
      cache.layers[i] = LayerCache<T>();
    if (!last && recomputes(i + 1))
      cache.inputs[i + 1] = std::move(output);
    else
      input = std::move(output);
    in = out;
  }
}

template <typename T> void LayerChain<T>::recompute(size_t k, const T *params, Cache &cache) const {
  MemoryScope working(ops->memory(), MemoryUse::Working);
  const Tokens batch{cache.tokens.data(), cache.targets.data(), cache.samples, cache.lossScale};
  Buffer<T> output; // the next layer's input, which it kept
  if (!(head && k + 1 == layers.size()))
    output = ops->allocate(cache.samples * sampleSize() * layers[k]->outputWidth());
  ops->countLoss(false);
  layers[k]->forward(*ops, params + offset(k), cache.inputs[k].data(), batch, output.data(),
                     cache.layers[k]);
  ops->countLoss(true);
}

template <typename T>
void LayerChain<T>::weightOf(size_t k, Cache &cache, T *dparams, double *grads) const {
  LayerCache<T> &layer = cache.layers[k];
  if (grads && layout.experts > 0 && layers[k]->expertParams() > 0) {
    // Where accumulate() adds the layer's experts' range of the piece's gradients.
    const int64_t at = layout.layerExpertsAt[k];
    layer.reachExperts(apartDoubleGrads ? apartDoubleGrads + (at - layout.expertsAt) : grads + at);
  }
  layers[k]->backwardWeight(*ops, layer, dparams + offset(k));
  layer = LayerCache<T>();
}

template <typename T>
void LayerChain<T>::inputPass(const T *params, Cache &cache, const T *dy, T *dx, T *dparams,
                              double *grads, std::vector<double> *seconds) const {
  if (seconds)
    seconds->assign(layers.size(), 0);
  Buffer<T> grad, next;
  const T *upstream = dy;
  for (size_t k = layers.size(); k-- > 0;) {
    const bool first = k == 0;
    T *down = dx;
    if (!first) {
      // The layer's input gradient, as wide as the layer before's output.
      next = transient(*ops, cache.samples * sampleSize() * layers[k - 1]->outputWidth());
      down = next.data();
    }
    if (seconds)
      ops->synchronize();
    const auto start = std::chrono::steady_clock::now();
    if (recomputes(k))
      recompute(k, params, cache);
    layers[k]->backwardInput(*ops, params + offset(k), cache.layers[k], upstream, down);
    if (dparams)
      weightOf(k, cache, dparams, grads);
    if (!cache.inputs.empty())
      cache.inputs[k].reset();
    if (seconds) {
      ops->synchronize();
      (*seconds)[k] = secondsSince(start);
    }
    if (!first) {
      grad = std::move(next);
      upstream = grad.data();
    }
  }
}

template <typename T>
void LayerChain<T>::backward(const T *params, Cache &cache, const T *dy, T *dparams, T *dx,
                             std::vector<double> *seconds) const {
  inputPass(params, cache, dy, dx, dparams, /*grads=*/nullptr, seconds);
  cache.layers.clear();
}

template <typename T>
void LayerChain<T>::backwardInput(const T *params, Cache &cache, const T *dy, T *dx,
                                  std::vector<double> *seconds) const {
  inputPass(params, cache, dy, dx, /*dparams=*/nullptr, /*grads=*/nullptr, seconds);
}

template <typename T>
void LayerChain<T>::backwardWeight(Cache &cache, T *dparams, std::vector<double> *seconds) const {
  weightPass(cache, dparams, /*grads=*/nullptr, seconds);
}

template <typename T>
void LayerChain<T>::weightPass(Cache &cache, T *dparams, double *grads,
                               std::vector<double> *seconds) const {
  if (seconds)
    seconds->assign(layers.size(), 0);
  for (size_t k = layers.size(); k-- > 0;) {
    if (seconds)
      ops->synchronize();
    const auto start = std::chrono::steady_clock::now();
    weightOf(k, cache, dparams, grads);
    if (seconds) {
      ops->synchronize();
      (*seconds)[k] = secondsSince(start);
    }
  }
  cache.layers.clear();
}

template <typename T>
void LayerChain<T>::forwardSamples(const T *params, const T *x, const Tokens &batch, T *y,
                                   std::vector<Cache> &caches, std::vector<double> *seconds) const {
  const int64_t row = sampleSize();
  const int64_t step = ops->perSample() ? 1 : batch.samples;
  caches.clear();
  caches.resize((batch.samples + step - 1) / step);
  std::vector<double> one;
  for (int64_t n = 0, k = 0; n < batch.samples; n += step, ++k) {
    Tokens piece = batch;
    piece.tokens = batch.tokens + n * shape.seq;
    piece.targets = batch.targets + n * shape.seq;
    piece.samples = std::min(step, batch.samples - n);
    one.clear();
    forward(params, x ? x + n * row : nullptr, piece, y ? y + n * row : nullptr, caches[k],
            seconds ? &one : nullptr);
    addSeconds(one, seconds);
  }
}

template <typename T>
void LayerChain<T>::backwardSamples(const T *params, std::vector<Cache> &caches, const T *dy,
                                    double *grads, T *dx, std::vector<double> *seconds) const {
  const int64_t row = sampleSize();
  Buffer<T> dparams = pieceGradients(*ops, numParams());
  std::vector<double> one;
  int64_t at = 0; // the first sample of the piece
  for (Cache &cache : caches) {
    const int64_t samples = cache.samples;
    ops->fill(numParams(), T(0), dparams.data());
    inputPass(params, cache, dy ? dy + at * row : nullptr, dx ? dx + at * row : nullptr,
              dparams.data(), grads, seconds ? &one : nullptr);
    cache.layers.clear();
    accumulate(dparams.data(), grads);
    addSeconds(one, seconds);
    at += samples;
  }
}

template <typename T>
void LayerChain<T>::backwardInputSamples(const T *params, std::vector<Cache> &caches, const T *dy,
                                         T *dx, std::vector<double> *seconds) const {
  const int64_t row = sampleSize();
  std::vector<double> one;
  int64_t at = 0;
  for (Cache &cache : caches) {
    backwardInput(params, cache, dy ? dy + at * row : nullptr, dx ? dx + at * row : nullptr,
                  seconds ? &one : nullptr);
    addSeconds(one, seconds);
    at += cache.samples;
  }
}

template <typename T>
void LayerChain<T>::backwardWeightSamples(std::vector<Cache> &caches, double *grads,
                                          std::vector<double> *seconds) const {
  Buffer<T> dparams = pieceGradients(*ops, numParams());
  std::vector<double> one;
  for (Cache &cache : caches) {
    ops->fill(numParams(), T(0), dparams.data());
    weightPass(cache, dparams.data(), grads, seconds ? &one : nullptr);
    accumulate(dparams.data(), grads);
    addSeconds(one, seconds);
  }
}

template void initialiseLayer<float>(runtime::LayerKind, const GptShape &, float *, uint64_t,
                                     int64_t);
template void initialiseLayer<double>(runtime::LayerKind, const GptShape &, double *, uint64_t,
                                      int64_t);
template class LayerChain<float>;
template class LayerChain<double>;
template std::unique_ptr<Layer<float>> makeLayer<float>(runtime::LayerKind, const GptShape &,
                                                        Checkpointing, int64_t, uint32_t);
template std::unique_ptr<Layer<double>> makeLayer<double>(runtime::LayerKind, const GptShape &,
                                                          Checkpointing, int64_t, uint32_t);

} // namespace conduit::model

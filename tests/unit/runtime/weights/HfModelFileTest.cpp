//===- HfModelFileTest.cpp - a model read from shards, and DeepSeek's FP8 -----===//
//
// A model in the shards and index the transformers library writes for large models
// (model.safetensors.index.json) reads as the same model in one file, from the index or its
// folder, with its step; and an index that does not agree with its files (a tensor in no file
// or in another, a file name outside the folder, disagreeing steps, not JSON, no weight_map) is
// refused naming the file and the tensor. DeepSeek-V3's released form reads too: FP8 matrices
// times their block scales, and a multi-token prediction layer the plan leaves out.
//
//===----------------------------------------------------------------------===//

#include "runtime/weights/HfWeights.h"
#include "tests/unit/runtime/weights/HfPlans.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include <array>
#include <filesystem>
#include <fstream>
#include <functional>

namespace conduit::runtime {
namespace {

namespace fs = std::filesystem;

/// A model written in one file, and its tensors' names and values as they lie there.
class Shards : public ::testing::Test {
protected:
  void SetUp() override {
    plan = planOf(llama());
    int64_t total = 0;
    for (const Layer &l : plan.layers)
      total += l.params;
    params.resize(total);
    for (int64_t i = 0; i < total; ++i)
      params[i] = 0.001f * static_cast<float>(i);
    const int64_t table = plan.transformer->vocabSize * plan.transformer->hiddenSize;
    std::copy(params.begin(), params.begin() + table, params.end() - table); // the tied head
    single = (fs::path(::testing::TempDir()) / "hf-shards-single").string();
    ASSERT_TRUE(writeHfModel(plan, single, params.data(), /*step=*/0).ok());
    absl::StatusOr<SafeTensorsReader> file = SafeTensorsReader::open(single + "/model.safetensors");
    ASSERT_TRUE(file.ok()) << file.status();
    for (const TensorEntry &t : file->header().tensors) {
      specs.push_back({t.name, t.shape});
      values.emplace_back(t.elements());
      ASSERT_TRUE(file->readFloats(t, values.back().data()).ok());
    }
  }

  /// Writes the tensors [0, cut) to the first shard and the rest to the second, each with
  /// `steps[f]` as its conduit.step unless empty, and an index that places tensor i in
  /// `placed(i)` (the file that holds it, unless changed); returns the folder.
  std::string write(const std::string &name, size_t cut,
                    const std::function<std::string(size_t, const std::string &)> &placed = {},
                    std::array<std::string, 2> steps = {"4", "4"}) {
    const fs::path dir = fs::path(::testing::TempDir()) / name;
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string files[2] = {"model-00001-of-00002.safetensors",
                                  "model-00002-of-00002.safetensors"};
    nlohmann::json map = nlohmann::json::object();
    for (int f = 0; f < 2; ++f) {
      std::vector<TensorSpec> part;
      std::vector<const float *> data;
      for (size_t i = f == 0 ? 0 : cut; i < (f == 0 ? cut : specs.size()); ++i) {
        part.push_back(specs[i]);
        data.push_back(values[i].data());
        map[specs[i].name] = placed ? placed(i, files[f]) : files[f];
      }
      std::map<std::string, std::string> metadata{{"format", "pt"}};
      if (!steps[f].empty())
        metadata["conduit.step"] = steps[f];
      EXPECT_TRUE(writeSafeTensors((dir / files[f]).string(), part, data, metadata).ok());
    }
    std::ofstream(dir / "model.safetensors.index.json")
        << nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", map}}.dump();
    return dir.string();
  }

  /// The refusal of the model at `path`, or "" when it opens.
  std::string refusal(const std::string &path) {
    absl::StatusOr<HfModelFile> model = openHfModel(plan, path);
    return model.ok() ? std::string() : std::string(model.status().message());
  }

  Plan plan;
  std::vector<float> params;
  std::string single;
  std::vector<TensorSpec> specs;
  std::vector<std::vector<float>> values;
};

TEST_F(Shards, ReadAsTheModelInOneFile) {
  const std::string dir = write("hf-shards", specs.size() / 2);
  for (const std::string &path : {dir, dir + "/model.safetensors.index.json"}) {
    SCOPED_TRACE(path);
    absl::StatusOr<HfModelFile> model = openHfModel(plan, path);
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ(model->files.size(), 2u);
    EXPECT_EQ(model->step, 4);
    absl::StatusOr<std::vector<float>> back =
        readHfLayers(*model, plan, 0, static_cast<int64_t>(plan.layers.size()));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, params);
  }
  // A folder without an index reads its model.safetensors.
  absl::StatusOr<HfModelFile> model = openHfModel(plan, single);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->files.size(), 1u);
  EXPECT_EQ(model->step, 0);
  // Files without Conduit's metadata start at step 0.
  model = openHfModel(plan, write("hf-shards-no-step", 3, {}, {"", ""}));
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->step, 0);
}

TEST_F(Shards, AnIndexThatDisagreesWithItsFilesIsRefused) {
  const std::string first = "model-00001-of-00002.safetensors";
  // A tensor placed in the file that does not hold it.
  std::string why = refusal(write("hf-shards-moved", 3, [&](size_t i, const std::string &f) {
    return i == 0 ? "model-00002-of-00002.safetensors" : f;
  }));
  EXPECT_NE(why.find(first + ": holds tensor \"" + specs[0].name + "\", which "), std::string::npos)
      << why;
  EXPECT_NE(why.find("places in "), std::string::npos) << why;
  // A file name outside the index's folder.
  why = refusal(write("hf-shards-escape", 3,
                      [&](size_t i, const std::string &f) { return i == 1 ? "../" + f : f; }));
  EXPECT_NE(why.find("the weight_map places \"" + specs[1].name + "\" in \"../" + first +
                     "\", which is not a file of the index's folder"),
            std::string::npos)
      << why;
  // A file the index names that is not there.
  why = refusal(write("hf-shards-absent", 3, [&](size_t i, const std::string &f) {
    return i == 2 ? "model-00003-of-00002.safetensors" : f;
  }));
  EXPECT_NE(why.find("cannot read"), std::string::npos) << why;
  EXPECT_NE(why.find("model-00003-of-00002.safetensors"), std::string::npos) << why;
  // Steps that disagree.
  why = refusal(write("hf-shards-steps", 3, {}, {"4", "5"}));
  EXPECT_NE(why.find("the metadata's conduit.step is "), std::string::npos) << why;
  EXPECT_NE(why.find(" where another file of the model says "), std::string::npos) << why;
}

TEST_F(Shards, AModelWithoutExactlyItsTensorsIsRefused) {
  // The index and its files agree, but a tensor of the model is in neither.
  const fs::path dir = write("hf-shards-short", 3);
  std::vector<TensorSpec> part(specs.begin() + 3, specs.end() - 1);
  std::vector<const float *> data;
  nlohmann::json index;
  std::ifstream(dir / "model.safetensors.index.json") >> index;
  for (size_t i = 3; i + 1 < specs.size(); ++i)
    data.push_back(values[i].data());
  index["weight_map"].erase(specs.back().name);
  ASSERT_TRUE(
      writeSafeTensors((dir / "model-00002-of-00002.safetensors").string(), part, data).ok());
  std::ofstream(dir / "model.safetensors.index.json") << index.dump();
  const std::string why = refusal(dir.string());
  EXPECT_NE(
      why.find("model.safetensors.index.json: tensor \"" + specs.back().name + "\" is missing"),
      std::string::npos)
      << why;
}

TEST_F(Shards, AnIndexThatIsNotOneIsRefused) {
  const fs::path dir = write("hf-shards-broken", 3);
  const fs::path index = dir / "model.safetensors.index.json";
  std::ofstream(index) << "{\"weight_map\": ";
  EXPECT_NE(refusal(dir.string()).find(index.string() + ": the index is not valid JSON"),
            std::string::npos);
  std::ofstream(index) << R"({"metadata": {}})";
  EXPECT_NE(refusal(dir.string()).find("has no \"weight_map\" object"), std::string::npos);
  std::ofstream(index) << R"({"weight_map": {"model.embed_tokens.weight": 3}})";
  EXPECT_NE(refusal(dir.string())
                .find("the weight_map's \"model.embed_tokens.weight\" is not a "
                      "file name"),
            std::string::npos);
  const fs::path empty = fs::path(::testing::TempDir()) / "hf-shards-empty";
  fs::create_directories(empty);
  EXPECT_NE(refusal(empty.string())
                .find("holds neither model.safetensors.index.json nor model.safetensors"),
            std::string::npos);
}

/// DeepSeek's model 136 wide with a vocabulary of 300, so that the token table [300, 136]
/// spans three blocks of FP8 scales down and two across, and every matrix of the blocks two
/// one way or the other.
class Fp8 : public ::testing::Test {
protected:
  void SetUp() override {
    Transformer t = deepSeek();
    t.hiddenSize = 136;
    t.vocabSize = 300;
    plan = planOf(t);
    absl::StatusOr<std::vector<HfTensor>> all = hfTensors(plan);
    ASSERT_TRUE(all.ok()) << all.status();
    for (const HfTensor &h : *all)
      if (!h.tied)
        tensors.push_back(h);
  }

  /// Writes the model with every matrix in F8_E4M3 (byte i % 0x70 at element i, so no NaN)
  /// beside block scales (2^-(block's row + column) + 1), and the others F32, to `fp8`; and the
  /// same values, converted, as F32 to `f32`. `edit` may change the FP8 file's tensors.
  void write(const std::string &fp8, const std::string &f32,
             const std::function<void(std::vector<TensorSpec> &, std::vector<std::string> &,
                                      std::vector<std::string> &)> &edit = {}) {
    std::vector<TensorSpec> specs, plain;
    std::vector<std::string> dtypes, bytes;
    std::vector<std::vector<float>> values;
    for (const HfTensor &h : tensors) {
      std::vector<float> v(h.elements());
      if (h.shape.size() == 2) {
        const int64_t rows = h.shape[0], cols = h.shape[1];
        const int64_t across = (cols + kFp8Block - 1) / kFp8Block,
                      down = (rows + kFp8Block - 1) / kFp8Block;
        std::string codes(rows * cols, '\0'), scales;
        std::vector<float> scale(down * across);
        for (int64_t b = 0; b < down * across; ++b)
          scale[b] = std::ldexp(1.0f, -static_cast<int>(b / across + b % across)) + 1;
        scales.assign(reinterpret_cast<const char *>(scale.data()), scale.size() * 4);
        for (int64_t i = 0; i < rows * cols; ++i) {
          codes[i] = static_cast<char>(i % 0x70);
          const int64_t r = i / cols, c = i % cols;
          v[i] = fp8Value(i % 0x70) * scale[(r / kFp8Block) * across + c / kFp8Block];
        }
        specs.push_back({h.name, h.shape});
        dtypes.push_back("F8_E4M3");
        bytes.push_back(codes);
        specs.push_back({h.name + kFp8ScaleSuffix, {down, across}});
        dtypes.push_back("F32");
        bytes.push_back(scales);
      } else {
        for (int64_t i = 0; i < h.elements(); ++i)
          v[i] = 0.25f * static_cast<float>(i % 7);
        specs.push_back({h.name, h.shape});
        dtypes.push_back("F32");
        bytes.emplace_back(reinterpret_cast<const char *>(v.data()), v.size() * 4);
      }
      plain.push_back({h.name, h.shape});
      values.push_back(std::move(v));
    }
    if (edit)
      edit(specs, dtypes, bytes);
    writeRaw(fp8, specs, dtypes, bytes);
    std::vector<const float *> pointers;
    for (const std::vector<float> &v : values)
      pointers.push_back(v.data());
    ASSERT_TRUE(writeSafeTensors(f32, plain, pointers).ok());
  }

  /// E4M3 byte `b` (below 0x70: positive, no NaN).
  static float fp8Value(int b) {
    const int exponent = b >> 3, mantissa = b & 7;
    return exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -9)
                         : std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);
  }

  /// A safetensors file of raw tensors of any dtype, in this order.
  static void writeRaw(const std::string &path, const std::vector<TensorSpec> &specs,
                       const std::vector<std::string> &dtypes,
                       const std::vector<std::string> &bytes) {
    nlohmann::ordered_json header;
    uint64_t at = 0;
    for (size_t i = 0; i < specs.size(); ++i) {
      header[specs[i].name] = {{"dtype", dtypes[i]},
                               {"shape", specs[i].shape},
                               {"data_offsets", {at, at + bytes[i].size()}}};
      at += bytes[i].size();
    }
    const std::string text = header.dump();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    const uint64_t length = text.size();
    out.write(reinterpret_cast<const char *>(&length), 8);
    out << text;
    for (const std::string &b : bytes)
      out << b;
  }

  std::string refusal(const std::string &path) {
    absl::StatusOr<HfModelFile> model = openHfModel(plan, path);
    return model.ok() ? std::string() : std::string(model.status().message());
  }

  std::vector<float> read(const std::string &path) {
    absl::StatusOr<HfModelFile> model = openHfModel(plan, path);
    EXPECT_TRUE(model.ok()) << model.status();
    if (!model.ok())
      return {};
    absl::StatusOr<std::vector<float>> params =
        readHfLayers(*model, plan, 0, static_cast<int64_t>(plan.layers.size()));
    EXPECT_TRUE(params.ok()) << params.status();
    return params.ok() ? *params : std::vector<float>();
  }

  std::string path(const std::string &name) {
    return (fs::path(::testing::TempDir()) / name).string();
  }

  Plan plan;
  std::vector<HfTensor> tensors;
};

TEST_F(Fp8, MatricesReadAsTheirValuesTimesTheirBlockScales) {
  write(path("fp8.safetensors"), path("fp8-as-f32.safetensors"));
  const std::vector<float> fp8 = read(path("fp8.safetensors"));
  EXPECT_EQ(fp8, read(path("fp8-as-f32.safetensors")));
  EXPECT_FALSE(fp8.empty());
}

TEST_F(Fp8, AMultiTokenPredictionLayerThePlanLeavesOutIsSkipped) {
  // DeepSeek-V3 keeps its module as the layer after its blocks (here layer 2), with a
  // projection of its own (eh_proj); without one, a layer past the blocks is an error.
  auto withLayer = [](int layer, bool module) {
    return [=](std::vector<TensorSpec> &specs, std::vector<std::string> &dtypes,
               std::vector<std::string> &bytes) {
      const std::string prefix = "model.layers." + std::to_string(layer) + ".";
      specs.push_back({prefix + "enorm.weight", {8}});
      dtypes.push_back("F32");
      bytes.push_back(std::string(32, '\0'));
      if (!module)
        return;
      specs.push_back({prefix + "eh_proj.weight", {8, 16}});
      dtypes.push_back("F8_E4M3");
      bytes.push_back(std::string(128, '\x38'));
      specs.push_back({prefix + "eh_proj.weight_scale_inv", {1, 1}});
      dtypes.push_back("F32");
      bytes.push_back(std::string(4, '\0'));
    };
  };
  write(path("fp8-mtp.safetensors"), path("fp8-mtp-as-f32.safetensors"), withLayer(2, true));
  EXPECT_EQ(read(path("fp8-mtp.safetensors")), read(path("fp8-mtp-as-f32.safetensors")));
  write(path("fp8-extra.safetensors"), path("fp8-extra-as-f32.safetensors"), withLayer(2, false));
  EXPECT_NE(refusal(path("fp8-extra.safetensors"))
                .find("tensor \"model.layers.2.enorm.weight\" is not a parameter of this model"),
            std::string::npos);
  // A layer named with a leading zero is not layer 2.
  write(path("fp8-zero.safetensors"), path("fp8-zero-as-f32.safetensors"),
        [&](auto &specs, auto &dtypes, auto &bytes) {
          withLayer(2, true)(specs, dtypes, bytes);
          specs[specs.size() - 3].name = "model.layers.02.enorm.weight";
        });
  EXPECT_NE(refusal(path("fp8-zero.safetensors"))
                .find("tensor \"model.layers.02.enorm.weight\" is not a parameter of this model"),
            std::string::npos);
}

TEST_F(Fp8, ScalesThatDoNotFitTheirMatrixAreRefused) {
  const std::string table = "model.embed_tokens.weight";
  auto find = [](std::vector<TensorSpec> &specs, const std::string &name) {
    return static_cast<size_t>(std::find_if(specs.begin(), specs.end(),
                                            [&](const TensorSpec &s) { return s.name == name; }) -
                               specs.begin());
  };
  const std::string file = path("fp8-bad.safetensors"), other = path("fp8-bad-as-f32.safetensors");
  // The token table [300, 136] without its scales.
  write(file, other, [&](auto &specs, auto &dtypes, auto &bytes) {
    const size_t at = find(specs, table + kFp8ScaleSuffix);
    specs.erase(specs.begin() + at);
    dtypes.erase(dtypes.begin() + at);
    bytes.erase(bytes.begin() + at);
  });
  EXPECT_NE(refusal(file).find("tensor \"" + table + "\" is F8_E4M3 without its block scales \"" +
                               table + "_scale_inv\""),
            std::string::npos)
      << refusal(file);
  // Its scales for blocks of 64 rows, in one column of blocks.
  write(file, other, [&](auto &specs, auto &dtypes, auto &bytes) {
    const size_t at = find(specs, table + kFp8ScaleSuffix);
    specs[at].shape = {5, 1};
    bytes[at] = std::string(20, '\0');
  });
  EXPECT_NE(refusal(file).find("tensor \"" + table +
                               "_scale_inv\" has shape [5, 1]; the scales "
                               "of \"" +
                               table + "\" [300, 136] in blocks of 128 x 128 are [3, 2]"),
            std::string::npos)
      << refusal(file);
  // A vector in FP8.
  write(file, other, [&](auto &specs, auto &dtypes, auto &bytes) {
    const size_t at = find(specs, "model.norm.weight");
    dtypes[at] = "F8_E4M3";
    bytes[at] = std::string(136, '\x38');
  });
  EXPECT_NE(refusal(file).find("tensor \"model.norm.weight\" is F8_E4M3 and not a matrix"),
            std::string::npos)
      << refusal(file);
  // Scales of a weight that is not FP8, and scales that are not floats.
  write(file, other, [&](auto &specs, auto &dtypes, auto &bytes) {
    specs.push_back({"model.norm.weight" + std::string(kFp8ScaleSuffix), {1, 1}});
    dtypes.push_back("F32");
    bytes.push_back(std::string(4, '\0'));
  });
  EXPECT_NE(refusal(file).find("tensor \"model.norm.weight_scale_inv\" is not a parameter"),
            std::string::npos)
      << refusal(file);
  write(file, other, [&](auto &specs, auto &dtypes, auto &bytes) {
    dtypes[find(specs, table + kFp8ScaleSuffix)] = "I32";
  });
  EXPECT_NE(refusal(file).find("tensor \"" + table +
                               "_scale_inv\" has dtype I32; the scales of an FP8 weight are F32"),
            std::string::npos)
      << refusal(file);
}

} // namespace
} // namespace conduit::runtime

//===- HfShardsTest.cpp - a model read from the shards of an index ---------===//
//
// A model in the shards and index the transformers library writes for large models
// (model.safetensors.index.json) reads as the same model in one file, from the index or its
// folder, with its step; and an index that does not agree with its files (a tensor in no file
// or in another, a file name outside the folder, disagreeing steps, not JSON, no weight_map) is
// refused naming the file and the tensor.
//
//===----------------------------------------------------------------------===//

#include "runtime/weights/HfWeights.h"
#include "tests/unit/runtime/weights/HfPlans.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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
  EXPECT_NE(refusal(dir.string()).find(index.string() + ": is not JSON"), std::string::npos);
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

} // namespace
} // namespace conduit::runtime

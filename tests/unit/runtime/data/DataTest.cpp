//===- DataTest.cpp - the sources of training tokens ----------------------===//
//
// Synthetic data pinned to its tokens (every plan test and the end-to-end suite depend on
// them); files of uint16, uint32 and text tokens read as samples that do not depend on how a
// batch is cut, whose targets are their inputs shifted by one within the file; every refusal
// of a file that cannot be trained on, with its message, from the factory, the backends'
// check and the reference; and the reference learning from text.
//
//===----------------------------------------------------------------------===//

#include "tests/unit/runtime/GptPlan.h"

#include "runtime/data/Data.h"
#include "runtime/exec/StageWork.h"
#include "runtime/session/Reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

using namespace conduit;
using namespace conduit::model;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kSeq = 8;

/// A fresh directory for this test's files.
fs::path scratch() {
  const testing::TestInfo *test = testing::UnitTest::GetInstance()->current_test_info();
  fs::path dir = fs::path(testing::TempDir()) /
                 (std::string("data-") + test->test_suite_name() + "-" + test->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string writeBytes(const fs::path &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
  return path.string();
}

/// `tokens` as little-endian ids of `width` bytes.
std::string encode(const std::vector<uint32_t> &tokens, int width) {
  std::string bytes;
  for (uint32_t token : tokens)
    for (int b = 0; b < width; ++b)
      bytes.push_back(static_cast<char>(token >> (8 * b) & 0xff));
  return bytes;
}

/// 0, 1, ..., n - 1.
std::vector<uint32_t> counting(uint32_t n) {
  std::vector<uint32_t> tokens(n);
  for (uint32_t i = 0; i < n; ++i)
    tokens[i] = i;
  return tokens;
}

runtime::Config configFor(runtime::DataKind kind, const std::string &path, uint8_t width = 2) {
  runtime::Config c;
  c.seed = 7;
  c.dataSource.kind = kind;
  c.dataSource.path = path;
  c.dataSource.tokenBytes = width;
  return c;
}

struct Batch {
  std::vector<int32_t> tokens, targets;
};
Batch batchOf(const TokenSource &data, int64_t step, int64_t first, int64_t count) {
  Batch b;
  data.batch(step, first, count, b.tokens, b.targets);
  return b;
}

/// The message of a refusal of `config`'s data, which must name `path`.
std::string refusal(const runtime::Config &config, int64_t vocab, const std::string &path) {
  absl::StatusOr<std::unique_ptr<TokenSource>> made = makeTokenSource(config, vocab, kSeq);
  EXPECT_FALSE(made.ok()) << "accepted " << path;
  if (made.ok())
    return "";
  const std::string message(made.status().message());
  EXPECT_NE(message.find(path), std::string::npos) << message;
  return message;
}

#define EXPECT_CONTAINS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

//===----------------------------------------------------------------------===//
// Synthetic data
//===----------------------------------------------------------------------===//

// The first tokens of the stream: a change here changes every loss the tests and the
// end-to-end suite compare against.
TEST(SyntheticData, TokensArePinned) {
  SyntheticData data(1234, 128, 8);
  Batch b = batchOf(data, 1, 0, 2);
  EXPECT_EQ(b.tokens, std::vector<int32_t>({35, 106, 77, 10, 93, 8, 126, 116, //
                                            7, 125, 44, 28, 5, 11, 100, 21}));
  EXPECT_EQ(b.targets, std::vector<int32_t>({106, 77, 10, 93, 8, 126, 116, 55, //
                                             125, 44, 28, 5, 11, 100, 21, 99}));
  b = batchOf(data, 3, 5, 1);
  EXPECT_EQ(b.tokens, std::vector<int32_t>({115, 109, 32, 35, 80, 4, 64, 34}));
}

TEST(SyntheticData, IsTheDefaultSource) {
  runtime::Config c;
  c.seed = 1234;
  absl::StatusOr<std::unique_ptr<TokenSource>> made = makeTokenSource(c, 128, 8);
  ASSERT_TRUE(made.ok()) << made.status().message();
  Batch b = batchOf(**made, 1, 0, 2), direct = batchOf(SyntheticData(1234, 128, 8), 1, 0, 2);
  EXPECT_EQ(b.tokens, direct.tokens);
  EXPECT_EQ(b.targets, direct.targets);
}

//===----------------------------------------------------------------------===//
// Files of tokens
//===----------------------------------------------------------------------===//

// Token i of the file is i: every sample is a run of consecutive ids starting at its offset,
// and its targets are the same run one further.
TEST(TokenFile, SamplesAreRunsOfTheFileWithTargetsShiftedByOne) {
  const fs::path dir = scratch();
  for (int width : {2, 4}) {
    const std::string path =
        writeBytes(dir / ("count" + std::to_string(width) + ".bin"), encode(counting(1000), width));
    absl::StatusOr<std::unique_ptr<TokenFile>> file = TokenFile::open(path, width, 7, 1000, kSeq);
    ASSERT_TRUE(file.ok()) << file.status().message();
    EXPECT_EQ((*file)->size(), 1000);
    const Batch b = batchOf(**file, 3, 10, 6);
    ASSERT_EQ(b.tokens.size(), size_t(6 * kSeq));
    for (int64_t n = 0; n < 6; ++n) {
      const int64_t offset = (*file)->offsetOf(3, 10 + n);
      ASSERT_GE(offset, 0);
      ASSERT_LE(offset + kSeq, 999);
      for (int64_t t = 0; t < kSeq; ++t) {
        EXPECT_EQ(b.tokens[n * kSeq + t], offset + t);
        EXPECT_EQ(b.targets[n * kSeq + t], offset + t + 1);
      }
    }
  }
}

// The samples of a step depend on (seed, step, global index) only: any cut of the batch into
// micro-batches and replicas sees the same ones.
TEST(TokenFile, SamplesDoNotDependOnTheCut) {
  const fs::path dir = scratch();
  const std::string path = writeBytes(dir / "count.bin", encode(counting(5000), 2));
  absl::StatusOr<std::unique_ptr<TokenSource>> made =
      makeTokenSource(configFor(runtime::DataKind::Tokens, path), 5000, kSeq);
  ASSERT_TRUE(made.ok()) << made.status().message();
  const TokenSource &data = **made;
  const Batch whole = batchOf(data, 2, 0, 4);
  Batch joined = batchOf(data, 2, 0, 2);
  const Batch rest = batchOf(data, 2, 2, 2);
  joined.tokens.insert(joined.tokens.end(), rest.tokens.begin(), rest.tokens.end());
  joined.targets.insert(joined.targets.end(), rest.targets.begin(), rest.targets.end());
  EXPECT_EQ(whole.tokens, joined.tokens);
  EXPECT_EQ(whole.targets, joined.targets);
  const Batch last = batchOf(data, 2, 3, 1);
  EXPECT_EQ(last.tokens, std::vector<int32_t>(whole.tokens.begin() + 3 * kSeq, whole.tokens.end()));
  // Another step, another seed: other samples.
  EXPECT_NE(batchOf(data, 3, 0, 4).tokens, whole.tokens);
  absl::StatusOr<std::unique_ptr<TokenSource>> reseeded = makeTokenSource(
      [&] {
        runtime::Config c = configFor(runtime::DataKind::Tokens, path);
        c.seed = 8;
        return c;
      }(),
      5000, kSeq);
  ASSERT_TRUE(reseeded.ok());
  EXPECT_NE(batchOf(**reseeded, 2, 0, 4).tokens, whole.tokens);
}

// Offsets cover the whole file, the last sample ending on its last token; a file of exactly
// one sample gives that sample every time.
TEST(TokenFile, OffsetsCoverTheFile) {
  const fs::path dir = scratch();
  const std::string path = writeBytes(dir / "small.bin", encode(counting(20), 2));
  absl::StatusOr<std::unique_ptr<TokenFile>> file = TokenFile::open(path, 2, 1, 20, kSeq);
  ASSERT_TRUE(file.ok()) << file.status().message();
  std::vector<bool> seen(20 - kSeq, false);
  for (int64_t i = 0; i < 1000; ++i) {
    const int64_t offset = (*file)->offsetOf(1, i);
    ASSERT_TRUE(offset >= 0 && offset < 20 - kSeq) << offset;
    seen[offset] = true;
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), true), 20 - kSeq);

  const std::string exact = writeBytes(dir / "exact.bin", encode(counting(kSeq + 1), 4));
  file = TokenFile::open(exact, 4, 1, 100, kSeq);
  ASSERT_TRUE(file.ok()) << file.status().message();
  const Batch b = batchOf(**file, 5, 0, 3);
  for (int64_t n = 0; n < 3; ++n)
    for (int64_t t = 0; t < kSeq; ++t) {
      EXPECT_EQ(b.tokens[n * kSeq + t], t);
      EXPECT_EQ(b.targets[n * kSeq + t], t + 1);
    }
}

// Ids are little-endian whatever the host; the widest uint32 below the vocabulary is read whole.
TEST(TokenFile, IdsAreLittleEndian) {
  const fs::path dir = scratch();
  std::vector<uint32_t> tokens(kSeq + 1, 0x1234);
  tokens[1] = 0xfffe;
  std::string path = writeBytes(dir / "u16.bin", encode(tokens, 2));
  absl::StatusOr<std::unique_ptr<TokenFile>> file = TokenFile::open(path, 2, 1, 65536, kSeq);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ((*file)->at(0), 0x1234u);
  EXPECT_EQ((*file)->at(1), 0xfffeu);
  tokens[1] = 0x01020304;
  path = writeBytes(dir / "u32.bin", encode(tokens, 4));
  file = TokenFile::open(path, 4, 1, 0x01020305, kSeq);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ((*file)->at(1), 0x01020304u);
  EXPECT_EQ((*file)->at(2), 0x1234u);
}

// Text: one byte, one token, bytes above 127 included.
TEST(TokenFile, TextIsReadByteByByte) {
  const fs::path dir = scratch();
  const std::string text = "Conduit \xc3\x97 pipelines";
  const std::string path = writeBytes(dir / "text.txt", text);
  absl::StatusOr<std::unique_ptr<TokenSource>> made =
      makeTokenSource(configFor(runtime::DataKind::Text, path, /*width=*/2), 256, kSeq);
  ASSERT_TRUE(made.ok()) << made.status().message();
  const Batch b = batchOf(**made, 1, 0, 16);
  for (int64_t n = 0; n < 16; ++n) {
    const std::string sample(b.tokens.begin() + n * kSeq, b.tokens.begin() + (n + 1) * kSeq);
    const size_t at = text.find(sample);
    ASSERT_NE(at, std::string::npos);
    EXPECT_EQ(b.targets[n * kSeq + kSeq - 1], static_cast<unsigned char>(text[at + kSeq]));
  }
  for (int32_t token : b.tokens)
    EXPECT_TRUE(token >= 0 && token < 256);
}

//===----------------------------------------------------------------------===//
// Refusals
//===----------------------------------------------------------------------===//

TEST(TokenFileRefusal, MissingFile) {
  const std::string path = (scratch() / "absent.bin").string();
  const std::string message = refusal(configFor(runtime::DataKind::Tokens, path), 100, path);
  EXPECT_CONTAINS(message, "cannot be opened: No such file or directory");
  EXPECT_TRUE(absl::IsNotFound(
      makeTokenSource(configFor(runtime::DataKind::Tokens, path), 100, kSeq).status()));
}

TEST(TokenFileRefusal, UnreadableFile) {
  if (geteuid() == 0)
    GTEST_SKIP() << "root reads any file";
  const std::string path = writeBytes(scratch() / "secret.bin", encode(counting(100), 2));
  fs::permissions(path, fs::perms::none);
  const std::string message = refusal(configFor(runtime::DataKind::Tokens, path), 100, path);
  EXPECT_CONTAINS(message, "cannot be opened: Permission denied");
}

TEST(TokenFileRefusal, DirectoryAndFifo) {
  const fs::path dir = scratch();
  std::string message =
      refusal(configFor(runtime::DataKind::Text, dir.string()), 256, dir.string());
  EXPECT_CONTAINS(message, "is a directory");
  // A FIFO is refused at once rather than waiting for a writer.
  const std::string fifo = (dir / "fifo").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  message = refusal(configFor(runtime::DataKind::Tokens, fifo), 100, fifo);
  EXPECT_CONTAINS(message, "is not a regular file");
}

TEST(TokenFileRefusal, EmptyFile) {
  const std::string path = writeBytes(scratch() / "empty.bin", "");
  const std::string message = refusal(configFor(runtime::DataKind::Tokens, path), 100, path);
  EXPECT_CONTAINS(message, "is empty");
}

TEST(TokenFileRefusal, SizeNotAWholeNumberOfTokens) {
  const fs::path dir = scratch();
  std::string path = writeBytes(dir / "odd.bin", encode(counting(100), 2) + "x");
  std::string message = refusal(configFor(runtime::DataKind::Tokens, path), 100, path);
  EXPECT_CONTAINS(message, "holds 201 bytes, not a whole number of 2-byte uint16 tokens");
  path = writeBytes(dir / "u32.bin", encode(counting(101), 2)); // 202 bytes
  message = refusal(configFor(runtime::DataKind::Tokens, path, 4), 100, path);
  EXPECT_CONTAINS(message, "holds 202 bytes, not a whole number of 4-byte uint32 tokens");
}

TEST(TokenFileRefusal, ShorterThanOneSample) {
  const fs::path dir = scratch();
  std::string path = writeBytes(dir / "short.bin", encode(counting(kSeq), 2));
  std::string message = refusal(configFor(runtime::DataKind::Tokens, path), 100, path);
  EXPECT_CONTAINS(message, "holds 8 uint16 tokens; one sample needs model.seq_length + 1 = 9");
  path = writeBytes(dir / "short.txt", "too short");
  EXPECT_TRUE(makeTokenSource(configFor(runtime::DataKind::Text, path), 256, kSeq).ok());
  path = writeBytes(dir / "shorter.txt", "short");
  message = refusal(configFor(runtime::DataKind::Text, path), 256, path);
  EXPECT_CONTAINS(message, "holds 5 byte tokens; one sample needs");
}

// Anywhere in the file, however wide the id: the whole file is read once at open.
TEST(TokenFileRefusal, TokenOutsideTheVocabulary) {
  const fs::path dir = scratch();
  std::vector<uint32_t> tokens = counting(300);
  tokens[299] = 300;
  std::string path = writeBytes(dir / "u16.bin", encode(tokens, 2));
  EXPECT_TRUE(makeTokenSource(configFor(runtime::DataKind::Tokens, path), 301, kSeq).ok());
  std::string message = refusal(configFor(runtime::DataKind::Tokens, path), 300, path);
  EXPECT_CONTAINS(message, "token 299 (byte 598) is 300, outside the model's vocabulary of 300 "
                           "(model.vocab_size)");
  message = refusal(configFor(runtime::DataKind::Tokens, path), 256, path);
  EXPECT_CONTAINS(message, "token 256 (byte 512) is 256");
  tokens.assign(100, 1);
  tokens[40] = 0xffffffffu;
  path = writeBytes(dir / "u32.bin", encode(tokens, 4));
  message = refusal(configFor(runtime::DataKind::Tokens, path, 4), 50000, path);
  EXPECT_CONTAINS(message, "token 40 (byte 160) is 4294967295, outside the model's vocabulary");
}

TEST(TokenFileRefusal, TextNeedsAByteVocabulary) {
  const std::string path = writeBytes(scratch() / "text.txt", "any text at all, long enough");
  const std::string message = refusal(configFor(runtime::DataKind::Text, path), 128, path);
  EXPECT_CONTAINS(message, "needs model.vocab_size of at least 256; the model has 128");
}

TEST(TokenFileRefusal, NoPathOrAnOddWidth) {
  absl::StatusOr<std::unique_ptr<TokenSource>> made =
      makeTokenSource(configFor(runtime::DataKind::Tokens, ""), 100, kSeq);
  ASSERT_FALSE(made.ok());
  EXPECT_CONTAINS(std::string(made.status().message()), "needs a path");
  const std::string path = writeBytes(scratch() / "u24.bin", encode(counting(99), 3));
  const std::string message = refusal(configFor(runtime::DataKind::Tokens, path, 3), 100, path);
  EXPECT_CONTAINS(message, "tokens of 3 bytes; uint16 (2) and uint32 (4) are read");
}

//===----------------------------------------------------------------------===//
// Where the runtime opens the data
//===----------------------------------------------------------------------===//

GptShape textShape() {
  GptShape s;
  s.blocks = 1;
  s.hidden = 16;
  s.heads = 2;
  s.ffn = 32;
  s.seq = kSeq;
  s.vocab = 256;
  return s;
}

runtime::Plan textPlan(const std::string &path) {
  runtime::Plan plan = planFor(textShape());
  runtime::Config &c = plan.config;
  c.microbatches = 2;
  c.microbatchSize = 4;
  c.tokensPerSample = kSeq;
  c.dtype = runtime::DType::FP32;
  c.seed = 3;
  c.learningRate = 1e-2;
  c.dataSource.kind = runtime::DataKind::Text;
  c.dataSource.path = path;
  return plan;
}

// The backends' check and the reference refuse the plan before training, naming the file.
TEST(TokenFileRefusal, BeforeTraining) {
  const std::string path = (scratch() / "absent.txt").string();
  const runtime::Plan plan = textPlan(path);
  absl::Status checked = runtime::validateModel(plan, "CPU");
  ASSERT_FALSE(checked.ok());
  EXPECT_CONTAINS(std::string(checked.message()), path);
  absl::StatusOr<runtime::Reference> reference = runtime::Reference::create(plan);
  ASSERT_FALSE(reference.ok());
  EXPECT_CONTAINS(std::string(reference.status().message()), path);
}

// A text with structure to learn: the reference's loss falls from ln(256).
TEST(TokenFile, TheReferenceLearnsText) {
  std::string text;
  for (int i = 0; i < 200; ++i)
    text += "the quick brown fox jumps over the lazy dog. ";
  const std::string path = writeBytes(scratch() / "fox.txt", text);
  const runtime::Plan plan = textPlan(path);
  ASSERT_TRUE(runtime::validateModel(plan, "CPU").ok());
  absl::StatusOr<runtime::Reference> reference = runtime::Reference::create(plan);
  ASSERT_TRUE(reference.ok()) << reference.status().message();
  const double first = reference->step(1).loss;
  EXPECT_NEAR(first, std::log(256.0), 0.5);
  double last = first;
  for (int64_t step = 2; step <= 40; ++step)
    last = reference->step(step).loss;
  EXPECT_LT(last, first - 2.0) << "from " << first << " to " << last;
}

} // namespace

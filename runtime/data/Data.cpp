//===- Data.cpp - where the training tokens come from ---------------------===//

#include "runtime/data/Data.h"

#include "runtime/Status.h"
#include "runtime/model/Random.h"

#include "absl/strings/str_cat.h"

#include <cerrno>
#include <fcntl.h>
#include <numeric>
#include <sys/mman.h>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>
#include <utility>

using namespace conduit::model;

namespace {
/// Probability that a token is its predecessor's successor rather than random.
constexpr double kStructure = 0.8;
constexpr uint64_t kTableKey = 0x5eed7ab1e;
/// Keeps a file's sample offsets apart from every other stream of (seed, step, index).
constexpr uint64_t kOffsetKey = 0x0ff5e7;

/// Token `i` of `width`-byte little-endian tokens at `bytes`, on any host.
uint32_t load(const unsigned char *bytes, int width, int64_t i) {
  const unsigned char *p = bytes + i * width;
  switch (width) {
  case 1:
    return p[0];
  case 2:
    return uint32_t(p[0]) | uint32_t(p[1]) << 8;
  default:
    return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
  }
}

/// The first of `n` tokens that is `vocab` or more, or -1. A maximum first, a loop the compiler
/// vectorises, then the position only when the file is bad.
template <int Width> int64_t firstOutside(const unsigned char *bytes, int64_t n, int64_t vocab) {
  uint32_t largest = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t token = load(bytes, Width, i);
    largest = token > largest ? token : largest;
  }
  if (largest < vocab)
    return -1;
  for (int64_t i = 0;; ++i)
    if (load(bytes, Width, i) >= vocab)
      return i;
}

const char *widthName(int width) { return width == 1 ? "byte" : width == 2 ? "uint16" : "uint32"; }

absl::Status refused(const std::string &path, const std::string &reason) {
  return absl::FailedPreconditionError(absl::StrCat("training data ", path, ": ", reason));
}
} // namespace

SyntheticData::SyntheticData(uint64_t seed, int64_t vocab, int64_t seq)
    : seed(seed), vocab(vocab), seq(seq), successor(vocab) {
  std::iota(successor.begin(), successor.end(), 0);
  Random random({seed, kTableKey});
  for (int64_t i = vocab - 1; i > 0; --i)
    std::swap(successor[i], successor[random.below(static_cast<uint64_t>(i) + 1)]);
}

void SyntheticData::batch(int64_t step, int64_t first, int64_t count, std::vector<int32_t> &tokens,
                          std::vector<int32_t> &targets) const {
  tokens.resize(count * seq);
  targets.resize(count * seq);
  for (int64_t n = 0; n < count; ++n) {
    Random random({seed, static_cast<uint64_t>(step), static_cast<uint64_t>(first + n)});
    int32_t token = static_cast<int32_t>(random.below(vocab));
    for (int64_t t = 0; t <= seq; ++t) {
      if (t < seq)
        tokens[n * seq + t] = token;
      if (t > 0)
        targets[n * seq + t - 1] = token;
      token = random.uniform() < kStructure ? successor[token]
                                            : static_cast<int32_t>(random.below(vocab));
    }
  }
}

TokenFile::TokenFile(const unsigned char *bytes, size_t length, int width, uint64_t seed,
                     int64_t seq)
    : bytes(bytes), length(length), width(width), numTokens(static_cast<int64_t>(length) / width),
      seed(seed), seq(seq) {}

TokenFile::~TokenFile() { munmap(const_cast<unsigned char *>(bytes), length); }

absl::StatusOr<std::unique_ptr<TokenFile>>
TokenFile::open(const std::string &path, int width, uint64_t seed, int64_t vocab, int64_t seq) {
  if (width != 1 && width != 2 && width != 4)
    return refused(path, absl::StrCat("tokens of ", width,
                                      " bytes; text (1), uint16 (2) and uint32 (4) are read"));
  if (seq < 1 || vocab < 1)
    return absl::InvalidArgumentError(absl::StrCat("training data ", path, ": samples of ", seq,
                                                   " tokens over a vocabulary of ", vocab));
  // Non-blocking, so that a FIFO named as the data does not wait for a writer before fstat
  // refuses it; no effect on a regular file.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int error = errno;
    const std::string reason =
        absl::StrCat("cannot be opened: ", std::generic_category().message(error));
    if (error == ENOENT)
      return absl::NotFoundError(absl::StrCat("training data ", path, ": ", reason));
    return refused(path, reason);
  }
  struct stat info;
  if (fstat(fd, &info) != 0) {
    const int error = errno;
    ::close(fd);
    return refused(path, absl::StrCat("cannot be read: ", std::generic_category().message(error)));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    return refused(path, S_ISDIR(info.st_mode) ? "is a directory, not a file of tokens"
                                               : "is not a regular file");
  }
  const int64_t size = static_cast<int64_t>(info.st_size);
  const std::string tokens = absl::StrCat(widthName(width), " tokens");
  absl::Status wrong;
  if (size == 0)
    wrong = refused(path, "is empty");
  else if (size % width != 0)
    wrong = refused(path, absl::StrCat("holds ", size, " bytes, not a whole number of ", width,
                                       "-byte ", widthName(width), " tokens (the wrong dtype?)"));
  else if (size / width < seq + 1)
    wrong = refused(path, absl::StrCat("holds ", size / width, " ", tokens,
                                       "; one sample needs model.seq_length + 1 = ", seq + 1));
  if (!wrong.ok()) {
    ::close(fd);
    return wrong;
  }
  void *mapped = mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0);
  const int error = errno;
  ::close(fd); // the mapping holds the file
  if (mapped == MAP_FAILED)
    return refused(path,
                   absl::StrCat("cannot be mapped: ", std::generic_category().message(error)));
  std::unique_ptr<TokenFile> file(new TokenFile(static_cast<const unsigned char *>(mapped),
                                                static_cast<size_t>(size), width, seed, seq));

  // Every token once, before training: an id outside the vocabulary would index the
  // embedding out of bounds. Bytes of text are all below a vocabulary of 256 or more.
  const int64_t n = file->numTokens;
  const bool mayExceed = width == 4 || vocab < (int64_t(1) << (8 * width));
  if (mayExceed) {
    const unsigned char *b = file->bytes;
    const int64_t bad = width == 1   ? firstOutside<1>(b, n, vocab)
                        : width == 2 ? firstOutside<2>(b, n, vocab)
                                     : firstOutside<4>(b, n, vocab);
    if (bad >= 0)
      return refused(path, absl::StrCat("token ", bad, " (byte ", bad * width, ") is ",
                                        file->at(bad), ", outside the model's vocabulary of ",
                                        vocab, " (model.vocab_size)"));
  }
  return file;
}

uint32_t TokenFile::at(int64_t i) const { return load(bytes, width, i); }

int64_t TokenFile::offsetOf(int64_t step, int64_t index) const {
  Random random({seed, static_cast<uint64_t>(step), static_cast<uint64_t>(index), kOffsetKey});
  return static_cast<int64_t>(random.below(static_cast<uint64_t>(numTokens - seq)));
}

void TokenFile::batch(int64_t step, int64_t first, int64_t count, std::vector<int32_t> &tokens,
                      std::vector<int32_t> &targets) const {
  tokens.resize(count * seq);
  targets.resize(count * seq);
  for (int64_t n = 0; n < count; ++n) {
    const int64_t offset = offsetOf(step, first + n);
    int32_t *in = tokens.data() + n * seq, *out = targets.data() + n * seq;
    for (int64_t t = 0; t < seq; ++t) {
      in[t] = static_cast<int32_t>(at(offset + t));
      out[t] = static_cast<int32_t>(at(offset + t + 1));
    }
  }
}

absl::StatusOr<std::unique_ptr<TokenSource>>
conduit::model::makeTokenSource(const runtime::Config &config, int64_t vocab, int64_t seq) {
  const runtime::DataSource &data = config.dataSource;
  const uint64_t seed = static_cast<uint64_t>(config.seed);
  if (data.kind == runtime::DataKind::Synthetic)
    return std::make_unique<SyntheticData>(seed, vocab, seq);
  if (data.path.empty())
    return absl::InvalidArgumentError(
        "training.data: a file of tokens or text needs a path, and the plan names none");
  int width = data.tokenBytes;
  if (data.kind == runtime::DataKind::Text) {
    if (vocab < 256)
      return refused(data.path, absl::StrCat("text is read one byte per token, which needs "
                                             "model.vocab_size of at least 256; the model has ",
                                             vocab));
    width = 1;
  } else if (width != 2 && width != 4) {
    return refused(data.path,
                   absl::StrCat("tokens of ", width, " bytes; uint16 (2) and uint32 (4) are read"));
  }
  CONDUIT_ASSIGN_OR_RETURN(std::unique_ptr<TokenFile> file,
                           TokenFile::open(data.path, width, seed, vocab, seq));
  return std::unique_ptr<TokenSource>(std::move(file));
}

// WriteFileSet: the bytes on disk are the pieces concatenated, the digests computed while
// writing equal a fresh read of each file, with O_DIRECT and buffered, one or several I/O
// threads, sizes around the 4 KiB alignment and the chunk size; a failure in the middle of a
// write (a file size limit: EFBIG) or a missing directory names the file, replaces nothing
// and leaves no temp file.
#include <signal.h>
#include <sys/resource.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "models/io/file_digest.h"
#include "models/io/file_set_writer.h"
#include "models/io/model_test_util.h"

namespace tandem::models {
namespace {

using testing::ReadRaw;
using testing::ScratchDir;
using testing::WriteRaw;

constexpr uint64_t kChunk = 3 * 4096;

std::span<const std::byte> View(const std::vector<char>& s, size_t from, size_t n) {
  return std::as_bytes(std::span<const char>(s.data() + from, n));
}

// `total` random bytes, and a file of them split into uneven pieces (some empty). The bytes
// live on the heap (a vector's buffer survives moves, a short string's does not).
struct Content {
  std::vector<char> bytes;
  FileToWrite file;
  std::string str() const { return std::string(bytes.begin(), bytes.end()); }
};

Content MakeContent(const std::string& path, size_t total, uint32_t seed) {
  Content c;
  std::mt19937 rng(seed);
  c.bytes.resize(total);
  for (char& b : c.bytes) b = static_cast<char>(rng());
  c.file.path = path;
  for (size_t at = 0; at < total;) {
    const size_t n = std::min<size_t>(total - at, rng() % 9000);
    c.file.parts.push_back(View(c.bytes, at, n));  // n == 0: an empty piece
    at += n;
  }
  return c;
}

bool HasTemp(const std::string& dir) {
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) return true;
  return false;
}

class FileSetWriterTest : public ::testing::TestWithParam<std::tuple<bool, int>> {};

TEST_P(FileSetWriterTest, WritesEveryByteAndDigestsWhileWriting) {
  const auto [direct, threads] = GetParam();
  ScratchDir dir;
  const std::vector<size_t> sizes = {0, 1, 4095, 4096, 4097, kChunk - 1, kChunk, kChunk + 1,
                                     5 * kChunk + 777};
  std::vector<Content> contents;
  for (size_t i = 0; i < sizes.size(); ++i)
    contents.push_back(MakeContent(dir.File("f" + std::to_string(i)), sizes[i], 7 + i));
  WriteRaw(contents[3].file.path, "an older version, replaced");
  std::vector<FileToWrite> files;
  for (const Content& c : contents) files.push_back(c.file);
  FileSetWriteStats stats;
  auto written = WriteFileSet(files, {.io_threads = threads, .chunk_bytes = kChunk,
                                      .direct = direct}, &stats);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  ASSERT_EQ(written->size(), files.size());
  EXPECT_EQ(stats.direct_files + stats.buffered_files, static_cast<int>(files.size()));
  if (!direct) {
    EXPECT_EQ(stats.direct_files, 0);
  }
  for (size_t i = 0; i < files.size(); ++i) {
    const WrittenFile& w = (*written)[i];
    EXPECT_EQ(w.path, files[i].path);
    EXPECT_EQ(w.bytes, sizes[i]);
    EXPECT_TRUE(ReadRaw(w.path) == contents[i].str()) << w.path << " differs";
    uint64_t on_disk = 0;
    auto fresh = FileXxh3(w.path, &on_disk);
    ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
    EXPECT_EQ(on_disk, sizes[i]) << w.path;
    EXPECT_EQ(w.xxh3, *fresh) << w.path;
    EXPECT_EQ(w.xxh3, Xxh3(View(contents[i].bytes, 0, sizes[i]))) << w.path;
  }
  EXPECT_FALSE(HasTemp(dir.path()));
}

INSTANTIATE_TEST_SUITE_P(DirectAndBuffered, FileSetWriterTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Values(1, 3)));

TEST(FileSetWriterErrorsTest, AMissingDirectoryNamesTheFileAndReplacesNothing) {
  ScratchDir dir;
  Content a = MakeContent(dir.File("a"), 10000, 1);
  Content b = MakeContent(dir.File("no/such/dir/b"), 10, 2);
  WriteRaw(a.file.path, "old a");
  std::vector<FileToWrite> files = {a.file, b.file};
  auto written = WriteFileSet(files);
  ASSERT_FALSE(written.ok());
  EXPECT_NE(written.status().message().find(dir.File("no/such/dir/b")), std::string::npos)
      << written.status().ToString();
  EXPECT_EQ(ReadRaw(a.file.path), "old a");
  EXPECT_FALSE(HasTemp(dir.path()));
}

TEST(FileSetWriterErrorsTest, AWriteThatFailsMidFileNamesItAndReplacesNothing) {
  ScratchDir dir;
  Content a = MakeContent(dir.File("a"), 2000, 1);
  Content big = MakeContent(dir.File("big"), 40 * kChunk, 2);
  WriteRaw(big.file.path, "old big");
  // A file size limit below the big file: its writes past the limit fail with EFBIG.
  struct rlimit old_limit;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  struct rlimit limit = old_limit;
  limit.rlim_cur = 8 * kChunk;
  auto old_handler = signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limit), 0);
  std::vector<FileToWrite> files = {a.file, big.file};
  auto written = WriteFileSet(files, {.io_threads = 3, .chunk_bytes = kChunk});
  setrlimit(RLIMIT_FSIZE, &old_limit);
  signal(SIGXFSZ, old_handler);
  ASSERT_FALSE(written.ok());
  EXPECT_NE(written.status().message().find(dir.File("big") + ".tmp."), std::string::npos)
      << written.status().ToString();
  EXPECT_NE(written.status().message().find("write failed"), std::string::npos)
      << written.status().ToString();
  EXPECT_EQ(ReadRaw(big.file.path), "old big");
  EXPECT_FALSE(std::filesystem::exists(a.file.path)) << "renamed although the set failed";
  EXPECT_FALSE(HasTemp(dir.path()));
}

TEST(FileSetWriterErrorsTest, BadOptionsAreRefused) {
  ScratchDir dir;
  std::vector<FileToWrite> files = {{dir.File("x"), {}}};
  EXPECT_FALSE(WriteFileSet(files, {.io_threads = 0}).ok());
  EXPECT_FALSE(WriteFileSet(files, {.chunk_bytes = 1000}).ok());
  EXPECT_FALSE(std::filesystem::exists(dir.File("x")));
}

}  // namespace
}  // namespace tandem::models

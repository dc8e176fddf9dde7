#include "runtime/core/logging.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <string>

namespace tandem::log {
namespace {

Level LevelFromEnv() {
  const char* v = std::getenv("TANDEM_LOG_LEVEL");
  if (v == nullptr) return Level::kInfo;
  std::string_view s(v);
  if (s == "debug") return Level::kDebug;
  if (s == "warn") return Level::kWarn;
  if (s == "error") return Level::kError;
  return Level::kInfo;
}

std::atomic<int>& LevelVar() {
  static std::atomic<int> level{static_cast<int>(LevelFromEnv())};
  return level;
}

std::mutex& SinkMutex() {
  static std::mutex mu;
  return mu;
}
Sink& SinkVar() {
  static Sink sink;
  return sink;
}

thread_local std::string tls_prefix;

char LevelChar(Level l) {
  switch (l) {
    case Level::kDebug: return 'D';
    case Level::kInfo: return 'I';
    case Level::kWarn: return 'W';
    case Level::kError: return 'E';
  }
  return '?';
}

}  // namespace

void SetLevel(Level level) { LevelVar().store(static_cast<int>(level)); }
Level GetLevel() { return static_cast<Level>(LevelVar().load(std::memory_order_relaxed)); }

void SetThreadPrefix(std::string prefix) { tls_prefix = std::move(prefix); }
const std::string& ThreadPrefix() { return tls_prefix; }

void SetSink(Sink sink) {
  std::lock_guard<std::mutex> lock(SinkMutex());
  SinkVar() = std::move(sink);
}

void Write(Level level, std::string_view message) {
  auto now = std::chrono::system_clock::now();
  auto secs = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm tm{};
  localtime_r(&secs, &tm);
  char ts[32];
  std::strftime(ts, sizeof ts, "%H:%M:%S", &tm);
  std::string line = tls_prefix.empty()
                         ? fmt::format("{} {}.{:03d} {}", LevelChar(level), ts, ms.count(), message)
                         : fmt::format("{} {}.{:03d} [{}] {}", LevelChar(level), ts, ms.count(),
                                       tls_prefix, message);
  std::lock_guard<std::mutex> lock(SinkMutex());
  if (SinkVar()) {
    SinkVar()(level, line);
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

}  // namespace tandem::log

// Logging through fmt: levels, wall-clock timestamps, and a per-thread prefix (the name of
// the actor whose executor runs on that thread).
//
//   TLOG_INFO("loaded {} tensors from {}", n, path);
//
// Output goes to stderr by default; tests and the daemon can install a sink.
// Thread-safety: all functions are safe to call from any thread; lines are never interleaved.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace tandem::log {

enum class Level : int { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// Lines below this level are dropped. Default: kInfo, or TANDEM_LOG_LEVEL (debug|info|warn|error).
void SetLevel(Level level);
Level GetLevel();
inline bool Enabled(Level level) { return static_cast<int>(level) >= static_cast<int>(GetLevel()); }

// Sets the prefix shown on lines logged from the calling thread ("" clears it).
void SetThreadPrefix(std::string prefix);
const std::string& ThreadPrefix();

// A sink gets every formatted line (without trailing newline). nullptr restores stderr.
using Sink = std::function<void(Level, std::string_view line)>;
void SetSink(Sink sink);

void Write(Level level, std::string_view message);

template <typename... Args>
void Logf(Level level, fmt::format_string<Args...> f, Args&&... args) {
  if (!Enabled(level)) return;
  Write(level, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace tandem::log

#define TLOG_DEBUG(...) ::tandem::log::Logf(::tandem::log::Level::kDebug, __VA_ARGS__)
#define TLOG_INFO(...) ::tandem::log::Logf(::tandem::log::Level::kInfo, __VA_ARGS__)
#define TLOG_WARN(...) ::tandem::log::Logf(::tandem::log::Level::kWarn, __VA_ARGS__)
#define TLOG_ERROR(...) ::tandem::log::Logf(::tandem::log::Level::kError, __VA_ARGS__)

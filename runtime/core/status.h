// Status and Result<T>: the error values every tandem call returns.
//
// A Status is OK or a code plus a message that says what failed, where, and how to fix it.
// Result<T> holds either a T or a non-OK Status. Both are [[nodiscard]]. Nothing in tandem
// throws across a module boundary; errors travel as these values.
//
// Thread-safety: values; safe to copy between threads.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace tandem {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,   // the caller's input is wrong (job file, shape, path)
  kNotFound,          // a named thing does not exist
  kOutOfMemory,       // a pool or arena is full after waiting
  kUnavailable,       // peer stopped, channel closed, actor failed
  kDeadlineExceeded,  // a wait ran past its timeout
  kCancelled,         // stopped on request
  kDataLoss,          // corrupt or truncated data
  kInternal,          // a bug in tandem
  kCudaError,         // a CUDA / cuBLAS / cuDNN / NCCL call failed
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: message" or "OK".
  std::string ToString() const;

  // Returns a copy with `context` prepended: "context: message".
  Status WithContext(std::string_view context) const;

  bool operator==(const Status& o) const { return code_ == o.code_ && message_ == o.message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

#define TANDEM_STATUS_FACTORY(Name)                                                    \
  template <typename... Args>                                                          \
  Status Name##Error(fmt::format_string<Args...> f, Args&&... args) {                  \
    return Status(StatusCode::k##Name, fmt::format(f, std::forward<Args>(args)...));   \
  }
TANDEM_STATUS_FACTORY(InvalidArgument)
TANDEM_STATUS_FACTORY(NotFound)
TANDEM_STATUS_FACTORY(OutOfMemory)
TANDEM_STATUS_FACTORY(Unavailable)
TANDEM_STATUS_FACTORY(DeadlineExceeded)
TANDEM_STATUS_FACTORY(Cancelled)
TANDEM_STATUS_FACTORY(DataLoss)
TANDEM_STATUS_FACTORY(Internal)

template <typename... Args>
Status CudaError(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kCudaError, fmt::format(f, std::forward<Args>(args)...));
}
#undef TANDEM_STATUS_FACTORY

[[noreturn]] void CheckFailed(const char* file, int line, const char* cond, const std::string& msg);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    if (status_.ok()) CheckFailed(__FILE__, __LINE__, "!status.ok()", "Result built from OK");
  }

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  // REQUIRES: ok().
  T& value() & { CheckOk(); return *value_; }
  const T& value() const& { CheckOk(); return *value_; }
  T&& value() && { CheckOk(); return std::move(*value_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  void CheckOk() const {
    if (!status_.ok()) CheckFailed(__FILE__, __LINE__, "ok()", status_.ToString());
  }
  Status status_;
  std::optional<T> value_;
};

}  // namespace tandem

#define TANDEM_CONCAT_INNER(a, b) a##b
#define TANDEM_CONCAT(a, b) TANDEM_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function if `expr` is not OK.
#define RETURN_IF_ERROR(expr)                         \
  do {                                                \
    ::tandem::Status _st = (expr);                    \
    if (!_st.ok()) return _st;                        \
  } while (0)

// `lhs = value of rexpr`, or return its Status.
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  ASSIGN_OR_RETURN_IMPL(TANDEM_CONCAT(_result_, __LINE__), lhs, rexpr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                          \
  if (!tmp.ok()) return tmp.status();          \
  lhs = std::move(tmp).value()

// Broken invariants (bugs, not user errors) abort with a message.
#define TANDEM_CHECK(cond)                                                        \
  do {                                                                            \
    if (!(cond)) ::tandem::CheckFailed(__FILE__, __LINE__, #cond, std::string()); \
  } while (0)
#define TANDEM_CHECK_MSG(cond, ...)                                                       \
  do {                                                                                    \
    if (!(cond)) ::tandem::CheckFailed(__FILE__, __LINE__, #cond, fmt::format(__VA_ARGS__)); \
  } while (0)
#define TANDEM_CHECK_OK(expr)                                                            \
  do {                                                                                   \
    ::tandem::Status _st = (expr);                                                       \
    if (!_st.ok()) ::tandem::CheckFailed(__FILE__, __LINE__, #expr, _st.ToString());     \
  } while (0)

/// @file status.hpp
/// @brief Status: the result of every host entry point of hipgrad (never an exception).
#pragma once

#include <string>
#include <utility>

// nvcc's front end also reports `status = f();` as discarding a [[nodiscard]] type (the result
// of the assignment operator), so the class attribute is kept for the other compilers only;
// they still flag every ignored Status in code that any backend builds.
#if defined(__NVCC__)
#define HIPGRAD_NODISCARD_CLASS
#else
#define HIPGRAD_NODISCARD_CLASS [[nodiscard]]
#endif

namespace hipgrad {

enum class StatusCode {
  kOk,
  kInvalidArgument,    ///< the problem or the arguments are wrong (sizes, pointers, strides)
  kNotSupported,       ///< valid, but this kernel configuration cannot run it
  kWorkspaceTooSmall,  ///< the caller's workspace is smaller than workspace_size()
  kRuntimeError,       ///< the GPU runtime reported an error
};

inline const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotSupported: return "not supported";
    case StatusCode::kWorkspaceTooSmall: return "workspace too small";
    case StatusCode::kRuntimeError: return "runtime error";
  }
  return "unknown";
}

/// A code and a human-readable reason. Default-constructed means success.
class HIPGRAD_NODISCARD_CLASS Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  static Status invalid_argument(std::string why) { return {StatusCode::kInvalidArgument, std::move(why)}; }
  static Status not_supported(std::string why) { return {StatusCode::kNotSupported, std::move(why)}; }
  static Status workspace_too_small(std::string why) { return {StatusCode::kWorkspaceTooSmall, std::move(why)}; }
  static Status runtime_error(std::string why) { return {StatusCode::kRuntimeError, std::move(why)}; }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  /// "ok" or "<code name>: <message>".
  std::string to_string() const {
    return is_ok() ? std::string("ok") : std::string(status_code_name(code_)) + ": " + message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

}  // namespace hipgrad

/// Returns the Status of `expr` from the enclosing function when it is not ok.
#define HIPGRAD_RETURN_IF_ERROR(expr)                     \
  do {                                                    \
    ::hipgrad::Status hipgrad_status_ = (expr);           \
    if (!hipgrad_status_.is_ok()) return hipgrad_status_; \
  } while (0)

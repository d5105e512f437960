/// @file workspace.hpp
/// @brief Carving an op's buffers out of the caller's workspace, and the size check every op
///        makes before it launches.
#pragma once

#include <cstddef>
#include <string>

#include "hipgrad/core/status.hpp"

namespace hipgrad {

/// Bump allocation inside the caller's workspace, every buffer 256-byte aligned. With a null
/// base it only counts: workspace_size() carves the same buffers as run() and reads used().
class WorkspaceCarver {
 public:
  WorkspaceCarver(void* base, std::size_t bytes) : base_(static_cast<unsigned char*>(base)), bytes_(bytes) {}
  /// Room for `count` elements of T, or null when counting or when the workspace is too small
  /// (check_workspace then refuses the call before anything is launched).
  template <typename T>
  T* take(std::size_t count) {
    const std::size_t start = (used_ + 255) / 256 * 256;
    used_ = start + count * sizeof(T);
    return base_ == nullptr || used_ > bytes_ ? nullptr : reinterpret_cast<T*>(base_ + start);
  }
  std::size_t used() const { return used_; }
  /// workspace_too_small unless the caller's workspace holds everything taken.
  Status check() const;

 private:
  unsigned char* base_;
  std::size_t bytes_;
  std::size_t used_ = 0;
};

/// workspace_too_small when `needed` bytes do not fit the caller's `bytes` at `workspace`.
inline Status check_workspace(std::size_t needed, const void* workspace, std::size_t bytes) {
  if (needed > 0 && (workspace == nullptr || bytes < needed)) {
    return Status::workspace_too_small("needs " + std::to_string(needed) + " bytes, got " + std::to_string(bytes) +
                                       (workspace == nullptr ? " (null)" : ""));
  }
  return Status::ok();
}

inline Status WorkspaceCarver::check() const { return check_workspace(used_, base_, bytes_); }

}  // namespace hipgrad

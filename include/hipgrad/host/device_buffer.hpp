/// @file device_buffer.hpp
/// @brief DeviceBuffer<T>: RAII device memory for examples and tests, with copies to and from host
///        tensors. Every operation returns a Status; nothing throws.
#pragma once

#include <cstddef>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/host/tensor.hpp"

namespace hipgrad::host {

/// `count` elements of T in device memory, freed with the buffer. Move-only. An empty buffer
/// (never allocated, or allocated with count 0) is valid: its data() is null and copies of zero
/// elements succeed.
template <typename T>
class DeviceBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "DeviceBuffer holds trivially copyable elements only");

 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  /// Frees what the buffer held, then allocates `count` elements (uninitialised). On failure the
  /// buffer is left empty.
  Status allocate(std::size_t count) {
    reset();
    if (count == 0) return Status::ok();
    if (count > std::numeric_limits<std::size_t>::max() / sizeof(T)) {
      return Status::invalid_argument("DeviceBuffer::allocate: " + std::to_string(count) +
                                      " elements overflow the byte count");
    }
    T* p = nullptr;
    HIPGRAD_RETURN_IF_ERROR(
        checked(hipMalloc(&p, count * sizeof(T)), "hipMalloc of " + std::to_string(count * sizeof(T)) + " bytes"));
    data_ = p;
    size_ = count;
    return Status::ok();
  }

  /// Frees the memory; the buffer becomes empty.
  void reset() {
    // A free that fails (the context is already gone at exit) has nobody to report to.
    if (data_ != nullptr && hipFree(data_) != hipSuccess) (void)hipGetLastError();
    data_ = nullptr;
    size_ = 0;
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return size_ * sizeof(T); }
  bool empty() const { return size_ == 0; }

  /// Copies `count` elements from host memory to the start of the buffer.
  Status copy_from_host(const T* source, std::size_t count) {
    HIPGRAD_RETURN_IF_ERROR(check_copy("copy_from_host", source, count));
    if (count == 0) return Status::ok();
    return checked(hipMemcpy(data_, source, count * sizeof(T), hipMemcpyHostToDevice), "hipMemcpy host to device");
  }

  /// Copies the first `count` elements of the buffer to host memory.
  Status copy_to_host(T* destination, std::size_t count) const {
    HIPGRAD_RETURN_IF_ERROR(check_copy("copy_to_host", destination, count));
    if (count == 0) return Status::ok();
    return checked(hipMemcpy(destination, data_, count * sizeof(T), hipMemcpyDeviceToHost), "hipMemcpy device to host");
  }

  /// Copies the tensor's whole storage (gaps between strided elements included), which must have
  /// exactly size() elements: a different count is almost always a wrong allocation.
  Status copy_from(const Tensor<T>& tensor) {
    HIPGRAD_RETURN_IF_ERROR(check_same_size("copy_from", tensor.storage().size()));
    return copy_from_host(tensor.data(), tensor.storage().size());
  }

  /// Copies the buffer into the tensor's whole storage, which must have exactly size() elements.
  Status copy_to(Tensor<T>& tensor) const {
    HIPGRAD_RETURN_IF_ERROR(check_same_size("copy_to", tensor.storage().size()));
    return copy_to_host(tensor.data(), tensor.storage().size());
  }

  /// Sets every byte to `value`. Used to poison outputs before a kernel runs: 0xFF makes every
  /// float, half and bfloat16 a NaN, so an element the kernel forgot to write fails the check.
  Status fill_bytes(unsigned char value) {
    if (empty()) return Status::ok();
    return checked(hipMemset(data_, value, bytes()), "hipMemset");
  }

 private:
  /// A failed runtime call also stays behind as the runtime's last error; clear it so that a
  /// later launch check does not report it as its own failure.
  static Status checked(hipError_t error, const std::string& call) {
    if (error == hipSuccess) return Status::ok();
    (void)hipGetLastError();
    return status_from_hip(error, call.c_str(), __FILE__, __LINE__);
  }

  Status check_copy(const char* what, const void* host, std::size_t count) const {
    if (count > size_) {
      return Status::invalid_argument(std::string("DeviceBuffer::") + what + ": " + std::to_string(count) +
                                      " elements requested, the buffer holds " + std::to_string(size_));
    }
    if (count > 0 && host == nullptr) {
      return Status::invalid_argument(std::string("DeviceBuffer::") + what + ": host pointer is null");
    }
    return Status::ok();
  }

  Status check_same_size(const char* what, std::size_t tensor_elements) const {
    if (tensor_elements == size_) return Status::ok();
    return Status::invalid_argument(std::string("DeviceBuffer::") + what + ": the tensor's storage has " +
                                    std::to_string(tensor_elements) + " elements, the buffer " + std::to_string(size_));
  }

  T* data_ = nullptr;
  std::size_t size_ = 0;
};

/// Allocates `copies` times the tensor's storage in `buffer` and copies the storage into each:
/// inputs rotated between timed runs, so that no run finds them in the L2.
template <typename T>
Status upload_copies(const Tensor<T>& tensor, int copies, DeviceBuffer<T>* buffer) {
  const std::size_t count = tensor.storage().size();
  HIPGRAD_RETURN_IF_ERROR(buffer->allocate(count * static_cast<std::size_t>(copies)));
  for (int i = 0; i < copies; ++i) {
    HIPGRAD_RETURN_IF_HIP_ERROR(
        hipMemcpy(buffer->data() + i * count, tensor.data(), count * sizeof(T), hipMemcpyHostToDevice));
  }
  return Status::ok();
}

}  // namespace hipgrad::host

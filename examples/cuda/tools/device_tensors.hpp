// Host ↔ device copies of attention tensors held on the host as floats of the element type.
#pragma once

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "flash/launch.hpp"
#include "flash/problem.hpp"
#include "flash/reference.hpp"
#include "fusekit/graph/dtype.hpp"

namespace flash::tools {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

class device_tensor {
 public:
  device_tensor(element type, std::size_t count) : type_(type), count_(count) {
    check(cudaMalloc(&data_, std::max<std::size_t>(1, count * element_bytes(type))), "cudaMalloc");
  }
  device_tensor(element type, const std::vector<float>& host) : device_tensor(type, host.size()) {
    upload(host);
  }
  device_tensor(const device_tensor&) = delete;
  device_tensor& operator=(const device_tensor&) = delete;
  ~device_tensor() { cudaFree(data_); }

  void* data() const { return data_; }

  void upload(const std::vector<float>& host) {
    std::vector<unsigned char> bytes(count_ * element_bytes(type_));
    for (std::size_t i = 0; i < count_; ++i) {
      if (type_ == element::f32) {
        std::memcpy(&bytes[i * 4], &host[i], 4);
        continue;
      }
      const std::uint16_t bits = type_ == element::f16 ? fusekit::float_to_half(host[i])
                                                       : fusekit::float_to_bfloat16(host[i]);
      std::memcpy(&bytes[i * 2], &bits, 2);
    }
    check(cudaMemcpy(data_, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), "upload");
  }

  std::vector<float> download() const {
    std::vector<unsigned char> bytes(count_ * element_bytes(type_));
    check(cudaMemcpy(bytes.data(), data_, bytes.size(), cudaMemcpyDeviceToHost), "download");
    std::vector<float> host(count_);
    for (std::size_t i = 0; i < count_; ++i) {
      if (type_ == element::f32) {
        std::memcpy(&host[i], &bytes[i * 4], 4);
        continue;
      }
      std::uint16_t bits;
      std::memcpy(&bits, &bytes[i * 2], 2);
      host[i] =
          type_ == element::f16 ? fusekit::half_to_float(bits) : fusekit::bfloat16_to_float(bits);
    }
    return host;
  }

 private:
  element type_;
  std::size_t count_;
  void* data_ = nullptr;
};

// O of problem p with kernel `choice`, for q, k and v given as host floats of p's element type.
// O starts as NaN, so that a row the kernel never writes shows.
inline std::vector<float> forward(const problem& p, const std::vector<float>& q,
                                  const std::vector<float>& k, const std::vector<float>& v,
                                  const kernel_choice& choice) {
  device_tensor dq(p.type, q), dk(p.type, k), dv(p.type, v);
  device_tensor o(p.type, std::vector<float>(std::size_t(o_extent(p)), NAN));
  check(attention_forward(p, {dq.data(), dk.data(), dv.data(), o.data()}, choice, nullptr),
        "launch");
  check(cudaDeviceSynchronize(), "kernel");
  return o.download();
}

}  // namespace flash::tools

// Random f32 tensors for the oneDNN kernel tests (uniform in [-scale, scale]).
#pragma once

#include <random>
#include <vector>

#include "core/tensor.h"

namespace opfuse::onednn_test {

inline Tensor random_f32(const std::vector<int64_t>& dims, std::mt19937& gen, float scale = 1.0f) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  Tensor t = Tensor::zeros(DType::kF32, dims).value();
  for (float& v : t.values<float>()) v = dist(gen);
  return t;
}

}  // namespace opfuse::onednn_test

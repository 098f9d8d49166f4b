// Flush denormal weights to zero: a float32 weight of a product (Conv, ConvTranspose, MatMul,
// Gemm, LSTM/GRU/RNN) whose magnitude is below FLT_MIN (1.18e-38) but not zero becomes zero.
//
// Why: trained models carry them (weights decayed towards zero: fr_feature 8,938 of 1.2 M,
// fr_gender 30% of its weights), and on Intel cores every multiply-add that meets a denormal
// operand or makes a denormal partial sum takes a microcode assist. On a Xeon (AMX host, 2
// threads) fr_feature's 1x1 convs ran 5x slower on oneDNN's jit_1x1 kernel: O3 37.3 ms with
// them, 7.4 ms without; ONNX Runtime, which keeps them, took 41.7 ms.
//
// What it changes: each flushed weight w contributed w * x to a sum, so an output moves by at
// most (number of flushed weights it reads) * FLT_MIN * max |x|, i.e. nothing at float32
// precision unless the output itself is of denormal size. NaN and Inf weights are not denormal
// and stay. Activations are left alone here: the CPU's flush-to-zero modes, which change every
// op, are the run-time option SessionOptions::flush_denormals (runtime/flush_denormals.h).
// A weight shared with another reader is copied, so only the products see the flushed values.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>

#include "passes/pass_util.h"
#include "passes/passes.h"

namespace opfuse {
namespace {

constexpr std::string_view kPass = "flush_denormal_weights";

// The inputs of `node` that are multiplied (weights), by op type.
std::vector<size_t> weight_inputs(const Node& node) {
  if (!node.domain().empty()) return {};
  const std::string& op = node.op_type();
  if (op == "Conv" || op == "ConvTranspose") return {1};
  if (op == "MatMul" || op == "Gemm") return {0, 1};
  if (op == "LSTM" || op == "GRU" || op == "RNN") return {1, 2};
  return {};
}

bool is_denormal(float v) { return v != 0.0f && std::fabs(v) < std::numeric_limits<float>::min(); }

// The flushed copy of a constant, or nullopt when it holds no denormal.
std::optional<Tensor> flushed(const Tensor& t, int64_t& count) {
  if (t.dtype() != DType::kF32) return std::nullopt;
  const float* src = t.data<float>();
  // Every compile scans every weight: counted on the bits (exponent zero, mantissa not), a loop
  // the compiler vectorizes.
  count = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, src + i, sizeof(bits));
    count += (bits & 0x7f800000u) == 0 && (bits & 0x007fffffu) != 0;
  }
  if (count == 0) return std::nullopt;
  Tensor out = t.clone();
  float* dst = out.data<float>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    if (is_denormal(dst[i])) dst[i] = 0.0f;
  }
  return out;
}

}  // namespace

Result<bool> run_flush_denormal_weights_pass(Graph& graph, PassContext& context) {
  if (!context.fusion.rule_enabled(kPass)) return false;
  std::map<const Value*, Value*> replacements;  // shared weights share one flushed copy
  bool changed = false;
  for (Node* node : graph.nodes()) {
    for (size_t i : weight_inputs(*node)) {
      if (!node->has_input(i)) continue;
      Value* w = node->input(i);
      const Tensor* data = constant_data(w);
      if (data == nullptr) continue;
      auto known = replacements.find(w);
      if (known == replacements.end()) {
        int64_t count = 0;
        std::optional<Tensor> zeroed = flushed(*data, count);
        if (!zeroed) continue;
        Value* copy = graph.add_constant(w->name() + "_flushed", std::move(*zeroed));
        known = replacements.emplace(w, copy).first;
        PassDecision d;
        d.pass = d.rule = std::string(kPass);
        d.what = str_cat(node_label(*node), ": ", count, " of ", data->numel(), " weights in '", w->name(),
                         "' are denormal (below 1.2e-38) and are now zero");
        d.applied = true;
        d.members = {node->name()};
        d.result = node->name();
        context.decide(std::move(d));
      }
      graph.set_input(node, i, known->second);
      changed = true;
    }
  }
  if (changed) graph.remove_dead_values();
  return changed;
}

}  // namespace opfuse

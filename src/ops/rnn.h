// The recurrent ops LSTM, GRU and RNN (ops/rnn.cc): how a node's attributes and inputs are read,
// shared by the reference kernel and the fast kernel (kernels/cpu/rnn_kernel.cc) so the two cannot
// read a node differently.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "ops/op_def.h"

namespace opfuse {

enum class RnnCell : uint8_t { kRnn, kGru, kLstm };

// The activation functions the recurrent ops name in `activations` (case-insensitive there).
enum class RnnActivationKind : uint8_t {
  kRelu, kTanh, kSigmoid, kAffine, kLeakyRelu, kThresholdedRelu, kScaledTanh, kHardSigmoid, kElu,
  kSoftsign, kSoftplus
};

struct RnnActivation {
  RnnActivationKind kind = RnnActivationKind::kTanh;
  float alpha = 0;  // read only by the kinds that take it
  float beta = 0;
  // The function in double, as the reference kernel evaluates it; NaN stays NaN.
  double apply(double x) const;
};

// Input positions (LSTM's initial_c and P do not exist on GRU and RNN).
inline constexpr size_t kRnnX = 0, kRnnW = 1, kRnnR = 2, kRnnB = 3, kRnnSequenceLens = 4,
                        kRnnInitialH = 5, kRnnInitialC = 6, kRnnP = 7;

struct RnnAttrs {
  RnnCell cell = RnnCell::kRnn;
  int64_t num_directions = 1;
  bool reverse = false;          // direction "reverse"; "bidirectional" runs direction 1 reversed
  int64_t hidden_size = -1;      // -1: the attribute is absent, R's last dim says it
  bool batch_major = false;      // layout 1: X [batch, seq, input], Y [batch, seq, dirs, hidden]
  std::optional<float> clip;     // bounds every gate's pre-activation to [-clip, clip]
  bool input_forget = false;     // LSTM: f = 1 - i
  bool linear_before_reset = false;  // GRU: r multiplies (H R_h^T + Rb_h) instead of H
  // activations_per_direction() entries per direction, direction 0's first (LSTM f, g, h;
  // GRU f, g; RNN f), with their alpha and beta resolved.
  std::vector<RnnActivation> activations;

  bool runs_reversed(int64_t direction) const { return reverse || direction == 1; }
  const RnnActivation& activation(int64_t direction, int64_t i) const;
  // Whether every activation is the op's default (LSTM Sigmoid, Tanh, Tanh; GRU Sigmoid, Tanh;
  // RNN Tanh): the case the fast kernel covers.
  bool default_activations() const;
};

RnnCell rnn_cell_of(const Node& node);
int64_t rnn_gate_count(RnnCell cell);              // blocks of W's rows per direction: 1, 3, 4
int64_t rnn_activations_per_direction(RnnCell cell);  // 1, 2, 3

// The node's attributes resolved; a user error naming the node for an unknown direction,
// activation or layout, or an activation list of the wrong length.
Result<RnnAttrs> read_rnn_attrs(const Node& node);

struct RnnDims {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, directions = 1;
};

// Checks concrete inputs (nullptr for omitted ones) against each other and the attributes:
// ranks, dims, dtypes, sequence_lens values in [0, seq]. Errors name the node and the input.
Result<RnnDims> check_rnn_tensors(const Node& node, const RnnAttrs& attrs,
                                  std::span<const Tensor* const> inputs);

}  // namespace opfuse

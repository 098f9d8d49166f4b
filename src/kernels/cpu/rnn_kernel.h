// "cpu.rnn" (kernels/cpu/rnn_kernel.cc): LSTM, GRU and RNN in f32 with constant W, R (and B, P)
// and Sigmoid / Tanh / Relu activations: every step's input projection as one GEMM, R packed at
// creation for the per-step product, vector gate math. Other nodes run the reference kernel.
#pragma once

#include "kernels/kernel.h"

namespace opfuse {

KernelImpl rnn_lstm_kernel();
KernelImpl rnn_gru_kernel();
KernelImpl rnn_simple_kernel();

}  // namespace opfuse

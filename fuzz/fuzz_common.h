// What every fuzz target shares: small caps, so that a hostile input that claims a huge tensor
// ends in an error (what we test) rather than in the fuzzer's own out-of-memory kill, and the
// classification of outcomes. An internal error is an opfuse bug: the target aborts on it so
// libFuzzer records the input as a crash. User errors are the expected answer to bad input.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/status.h"

namespace opfuse::fuzz {

// Per-allocation cap while fuzzing (the library's default is 16 GiB).
constexpr size_t kMaxAllocationBytes = size_t{64} << 20;
// Cap on all weights of one model while fuzzing.
constexpr uint64_t kMaxWeightBytes = uint64_t{32} << 20;

// Sets the caps above and quiets OpenMP; call once from LLVMFuzzerInitialize.
void init_limits();

// Aborts (a crash libFuzzer keeps) when `status` is an internal error; returns is_ok().
bool check(const Status& status, const char* stage);

}  // namespace opfuse::fuzz

// Makes the kernels obey the active Target (core/target.h): oneDNN's dispatch is capped with
// dnnl::set_max_cpu_isa and Highway's with hwy::DisableTargets, so `--target avx2` on an
// AVX-512 machine runs the kernels an AVX2 machine would run.
#pragma once

#include <string_view>

#include "core/target.h"

namespace opfuse {

// Makes `name` ("native", "avx2", ...) the process's target and caps both libraries to it.
// oneDNN accepts a cap only before it generates its first kernel, so the target is chosen once
// per process: asking again for the same tier is fine, for another one a user error.
Result<Target> select_target(std::string_view name);

// Caps the libraries to the active target unless that happened already (idempotent and
// thread-safe). Every kernel creation calls it first.
void apply_target_caps();

// The name of the Highway target the vector kernels dispatch to now ("AVX2", "AVX3").
std::string_view highway_dispatch_target();

}  // namespace opfuse

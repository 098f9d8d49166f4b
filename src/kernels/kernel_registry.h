// Kernels registered at run time: optimised kernels of custom ops (from C++ or a plugin).
// The built-in table (kernel_list.cc) is static and serves the default and "opfuse" domains;
// these entries are consulted first and match on domain as well as op type, so a custom
// "com.example::Relu" never picks up the built-in Relu kernel.
#pragma once

#include <string>

#include "kernels/kernel.h"

namespace opfuse {

// Adds an implementation for nodes of `domain` and `impl.op_type` (strings are copied).
// Fails when the op is not registered or the same implementation name is already registered
// for it. Later registrations of other names are tried after earlier ones.
Status register_kernel(const std::string& domain, const KernelImpl& impl);

// The first runtime-registered implementation that supports the node, or null.
const KernelImpl* find_registered_kernel(const KernelCompileContext& ctx);

}  // namespace opfuse

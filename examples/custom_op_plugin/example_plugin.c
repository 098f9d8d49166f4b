/* An opfuse custom-op plugin (C, built as a shared library): two ops in domain "com.example".
 *
 *   SquaredDifference(a, b) = (a - b)^2   elementwise with broadcasting, declared by its scalar
 *                                         expression: opfuse vectorises it and fuses it with
 *                                         its neighbours like a built-in op.
 *   CumulativeSum(x; reverse = 0)         a running sum along the last axis: opaque (a fusion
 *                                         barrier), computed by this library.
 *
 * Load it with `opfuse run model.onnx --custom-op-lib libopfuse_example_plugin.so`; ONNX nodes
 * with domain "com.example" (imported by the model) then run these ops.
 */
#include <stdio.h>

#include "plugin/opfuse_plugin.h"

#ifndef EXAMPLE_ABI_VERSION /* the tests rebuild this file with a wrong version */
#define EXAMPLE_ABI_VERSION OPFUSE_PLUGIN_ABI_VERSION
#endif
#ifndef EXAMPLE_DOMAIN
#define EXAMPLE_DOMAIN "com.example"
#endif

static int cumsum_infer(const OpfuseTensor* in, int32_t n_in, OpfuseTensor* out, int32_t n_out,
                        const OpfuseAttrs* attrs, char* error, size_t error_size) {
  (void)n_in; (void)n_out; (void)attrs;
  if (in[0].dtype != OPFUSE_DTYPE_F32) {
    snprintf(error, error_size, "CumulativeSum takes f32 input, got dtype code %d", (int)in[0].dtype);
    return 1;
  }
  if (in[0].rank == 0) {
    snprintf(error, error_size, "CumulativeSum needs an input of rank 1 or more");
    return 1;
  }
  out[0] = in[0]; /* same dtype and shape */
  return 0;
}

static int cumsum_compute(const OpfuseTensor* in, int32_t n_in, OpfuseTensor* out, int32_t n_out,
                          const OpfuseAttrs* attrs, char* error, size_t error_size) {
  (void)n_in; (void)n_out; (void)error; (void)error_size;
  const int reverse = attrs->get_int(attrs, "reverse") != 0;
  const int64_t inner = in[0].dims[in[0].rank - 1];
  int64_t rows = 1;
  for (int32_t d = 0; d + 1 < in[0].rank; ++d) rows *= in[0].dims[d];
  const float* x = (const float*)in[0].data;
  float* y = (float*)out[0].data;
  for (int64_t r = 0; r < rows; ++r) {
    float acc = 0.0f;
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t j = reverse ? inner - 1 - i : i;
      acc += x[r * inner + j];
      y[r * inner + j] = acc;
    }
  }
  return 0;
}

static const OpfuseAttrSpec cumsum_attrs[] = {{"reverse", OPFUSE_ATTR_INT, 0, 0.0f}};

static const OpfuseCustomOp ops[] = {
    {"SquaredDifference", 2, 2, 1, OPFUSE_KIND_BROADCAST, NULL, 0, NULL, NULL,
     "mul(sub(%0, %1), sub(%0, %1))", "(a - b)^2 with broadcasting"},
    {"CumulativeSum", 1, 1, 1, OPFUSE_KIND_OPAQUE, cumsum_attrs, 1, cumsum_infer, cumsum_compute,
     NULL, "running sum along the last axis"},
};

static const OpfusePluginInfo info = {OPFUSE_PLUGIN_ABI_VERSION, EXAMPLE_DOMAIN, 2, ops};

uint32_t opfuse_plugin_abi_version(void) { return EXAMPLE_ABI_VERSION; }

#ifndef EXAMPLE_NO_INFO /* the tests rebuild this file without its info entry point */
const OpfusePluginInfo* opfuse_plugin_info(void) { return &info; }
#endif

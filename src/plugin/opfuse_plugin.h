/* The opfuse custom-operator plugin ABI (C, so a plugin may be built by any compiler).
 *
 * A plugin is a shared library exporting two functions:
 *
 *   uint32_t opfuse_plugin_abi_version(void);          // must return OPFUSE_PLUGIN_ABI_VERSION
 *   const OpfusePluginInfo* opfuse_plugin_info(void);   // the plugin's ops (static storage)
 *
 * opfuse reads the version first and rejects a mismatch before touching the info struct (whose
 * layout belongs to that version). Each op is registered in the plugin's domain; ONNX nodes
 * whose domain is that domain (and whose model imports it) run the plugin's op.
 *
 * An op gives its arity, attributes (ints and floats, with defaults), a shape/dtype inference
 * callback (optional: default is "output 0 has input 0's type") and a compute callback. An
 * elementwise op may instead (or also) give `scalar_expr`, a per-element expression over its
 * inputs in opfuse's scalar-expression text form, e.g. "mul(sub(%0, %1), %0)": then opfuse
 * evaluates it with broadcasting, vectorises it, and — with fusion_kind ELEMENTWISE or
 * BROADCAST — fuses it with its neighbours like a built-in op. An OPAQUE op is a fusion barrier
 * run through its compute callback.
 *
 * Callbacks return 0 on success; on failure they write a message into `error` (at most
 * `error_size` bytes, NUL-terminated) and return non-zero. They must be thread-safe.
 */
#ifndef OPFUSE_PLUGIN_H_
#define OPFUSE_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OPFUSE_PLUGIN_ABI_VERSION 1u
#define OPFUSE_PLUGIN_MAX_RANK 8

/* Element types (a subset of opfuse's; the numbers are part of the ABI). */
typedef enum {
  OPFUSE_DTYPE_UNDEFINED = 0,
  OPFUSE_DTYPE_F32 = 1,
  OPFUSE_DTYPE_F64 = 2,
  OPFUSE_DTYPE_I64 = 3,
  OPFUSE_DTYPE_I32 = 4,
  OPFUSE_DTYPE_BOOL = 5,
} OpfuseDType;

/* Where the op sits in opfuse's fusion lattice. */
typedef enum {
  OPFUSE_KIND_ELEMENTWISE = 0, /* same-shape inputs; needs scalar_expr */
  OPFUSE_KIND_BROADCAST = 1,   /* numpy broadcasting; needs scalar_expr */
  OPFUSE_KIND_OPAQUE = 5,      /* a barrier: runs `compute` */
} OpfuseFusionKind;

typedef enum { OPFUSE_ATTR_INT = 0, OPFUSE_ATTR_FLOAT = 1 } OpfuseAttrType;

typedef struct {
  const char* name;
  int32_t type; /* OpfuseAttrType */
  int64_t default_int;
  float default_float;
} OpfuseAttrSpec;

/* A dense row-major tensor. Inputs are read-only; outputs are allocated by opfuse with the
 * dims inference gave. A rank of -1 in inference means "unknown". */
typedef struct {
  int32_t dtype; /* OpfuseDType */
  int32_t rank;
  int64_t dims[OPFUSE_PLUGIN_MAX_RANK];
  void* data; /* NULL during inference */
} OpfuseTensor;

/* The node's attributes (with the op's defaults filled in), by name. */
typedef struct OpfuseAttrs {
  const void* impl;
  int64_t (*get_int)(const struct OpfuseAttrs* attrs, const char* name);
  float (*get_float)(const struct OpfuseAttrs* attrs, const char* name);
} OpfuseAttrs;

typedef int (*OpfuseInferFn)(const OpfuseTensor* inputs, int32_t num_inputs, OpfuseTensor* outputs,
                             int32_t num_outputs, const OpfuseAttrs* attrs, char* error,
                             size_t error_size);
typedef int (*OpfuseComputeFn)(const OpfuseTensor* inputs, int32_t num_inputs, OpfuseTensor* outputs,
                               int32_t num_outputs, const OpfuseAttrs* attrs, char* error,
                               size_t error_size);

typedef struct {
  const char* name; /* op type as ONNX nodes spell it */
  int32_t min_inputs;
  int32_t max_inputs;
  int32_t num_outputs;
  int32_t fusion_kind; /* OpfuseFusionKind */
  const OpfuseAttrSpec* attrs;
  int32_t num_attrs;
  OpfuseInferFn infer;     /* NULL: output 0 = input 0's type (or broadcast, with scalar_expr) */
  OpfuseComputeFn compute; /* NULL only when scalar_expr is given */
  const char* scalar_expr; /* NULL for ops that are not elementwise */
  const char* summary;     /* one line for docs and error messages; may be NULL */
} OpfuseCustomOp;

typedef struct {
  uint32_t abi_version; /* OPFUSE_PLUGIN_ABI_VERSION again, as a layout check */
  const char* domain;   /* e.g. "com.example"; not "" or "ai.onnx" or "opfuse" */
  int32_t num_ops;
  const OpfuseCustomOp* ops;
} OpfusePluginInfo;

#ifdef __cplusplus
}
#endif

#endif /* OPFUSE_PLUGIN_H_ */

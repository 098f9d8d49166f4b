#include "ops/nn_common.h"

#include <algorithm>

namespace opfuse {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

Result<std::vector<int64_t>> read_per_axis(const AttrReader& attrs, const std::string& name,
                                           size_t count, int64_t fallback, int64_t min_value,
                                           const std::string& who) {
  if (!attrs.has(name)) return std::vector<int64_t>(count, fallback);
  std::vector<int64_t> v = attrs.get_ints(name);
  if (v.size() != count) {
    return Status::user_error(str_cat(who, ": attribute ", name, " has ", v.size(),
                                      " values but the op has ", count / (name == "pads" ? 2 : 1),
                                      " spatial dims (expected ", count, ")"));
  }
  for (int64_t x : v) {
    if (x < min_value) {
      return Status::user_error(str_cat(who, ": attribute ", name, " = ", dims_to_string(v),
                                        " has a value below ", min_value));
    }
  }
  return v;
}

}  // namespace

Result<WindowAttrs> read_window_attrs(const AttrReader& attrs, size_t spatial_rank,
                                      const std::optional<std::vector<int64_t>>& weight_kernel,
                                      bool has_dilations, const std::string& who) {
  WindowAttrs w;
  const std::string auto_pad = attrs.get_string("auto_pad");
  if (auto_pad.empty() || auto_pad == "NOTSET") {
    w.auto_pad = AutoPad::kNotSet;
  } else if (auto_pad == "SAME_UPPER") {
    w.auto_pad = AutoPad::kSameUpper;
  } else if (auto_pad == "SAME_LOWER") {
    w.auto_pad = AutoPad::kSameLower;
  } else if (auto_pad == "VALID") {
    w.auto_pad = AutoPad::kValid;
  } else {
    return Status::user_error(str_cat(who, ": unknown auto_pad '", auto_pad,
                                      "' (expected NOTSET, SAME_UPPER, SAME_LOWER or VALID)"));
  }

  if (attrs.has("kernel_shape")) {
    OPFUSE_ASSIGN_OR_RETURN(w.kernel, read_per_axis(attrs, "kernel_shape", spatial_rank, 1, 1, who));
    if (weight_kernel) {
      for (size_t i = 0; i < spatial_rank; ++i) {
        const int64_t from_weight = (*weight_kernel)[i];
        if (from_weight >= 0 && from_weight != w.kernel[i]) {
          return Status::user_error(str_cat(who, ": kernel_shape ", dims_to_string(w.kernel),
                                            " disagrees with the weight's spatial dims ",
                                            dims_to_string(*weight_kernel)));
        }
      }
    }
  } else if (weight_kernel) {
    w.kernel = *weight_kernel;  // ONNX: inferred from the weights when not given
    for (int64_t k : w.kernel) {
      if (k == 0) {
        return Status::user_error(str_cat(who, ": the weight has an empty spatial dim ",
                                          dims_to_string(w.kernel)));
      }
    }
  } else {
    return Status::user_error(str_cat(who, ": attribute kernel_shape is required"));
  }
  OPFUSE_ASSIGN_OR_RETURN(w.strides, read_per_axis(attrs, "strides", spatial_rank, 1, 1, who));
  if (has_dilations) {
    OPFUSE_ASSIGN_OR_RETURN(w.dilations,
                            read_per_axis(attrs, "dilations", spatial_rank, 1, 1, who));
  } else {
    w.dilations.assign(spatial_rank, 1);
  }
  OPFUSE_ASSIGN_OR_RETURN(w.pads, read_per_axis(attrs, "pads", 2 * spatial_rank, 0, 0, who));
  return w;
}

Result<WindowDim> window_dim(const WindowAttrs& w, size_t axis, int64_t in, bool ceil_mode,
                             const std::string& who) {
  const size_t rank = w.kernel.size();
  const int64_t k = w.kernel[axis], s = w.strides[axis], d = w.dilations[axis];
  WindowDim r;
  if (w.auto_pad == AutoPad::kNotSet) {
    r.pad_begin = w.pads[axis];
    r.pad_end = w.pads[axis + rank];
  }
  if (in < 0 || k < 0) return r;  // unknown size; explicit pads are still known
  const int64_t extent = (k - 1) * d + 1;
  switch (w.auto_pad) {
    case AutoPad::kSameUpper:
    case AutoPad::kSameLower: {
      r.out = ceil_div(in, s);
      const int64_t total = std::max<int64_t>(0, (r.out - 1) * s + extent - in);
      // SAME_UPPER puts the odd padding element at the end, SAME_LOWER at the beginning.
      r.pad_begin = w.auto_pad == AutoPad::kSameUpper ? total / 2 : total - total / 2;
      r.pad_end = total - r.pad_begin;
      return r;
    }
    case AutoPad::kValid:
    case AutoPad::kNotSet: {
      const int64_t padded = in + r.pad_begin + r.pad_end;
      if (extent > padded) {
        return Status::user_error(str_cat(who, ": kernel extent ", extent, " (kernel ", k,
                                          ", dilation ", d, ") is larger than the padded input (",
                                          padded, ") along spatial axis ", axis));
      }
      r.out = ceil_mode ? ceil_div(padded - extent, s) + 1 : (padded - extent) / s + 1;
      // With ceil_mode the last window must still start inside the input or its begin padding
      // (PyTorch and onnxruntime agree on this).
      if (ceil_mode && (r.out - 1) * s >= in + r.pad_begin) --r.out;
      return r;
    }
  }
  return r;
}

Result<WindowDim> conv_transpose_dim(const WindowAttrs& w, size_t axis, int64_t in,
                                     const std::vector<int64_t>& output_padding,
                                     const std::vector<int64_t>& output_shape,
                                     const std::string& who) {
  const size_t rank = w.kernel.size();
  const int64_t k = w.kernel[axis], s = w.strides[axis], d = w.dilations[axis];
  const int64_t adj = output_padding.empty() ? 0 : output_padding[axis];
  WindowDim r;
  if (w.auto_pad == AutoPad::kNotSet && output_shape.empty()) {
    r.pad_begin = w.pads[axis];
    r.pad_end = w.pads[axis + rank];
  }
  if (!output_shape.empty()) r.out = output_shape[axis];
  if (in < 0 || k < 0) return r;
  const int64_t full = s * (in - 1) + adj + (k - 1) * d + 1;  // output size with no padding
  const bool same = w.auto_pad == AutoPad::kSameUpper || w.auto_pad == AutoPad::kSameLower;
  if (!output_shape.empty() || same) {
    if (output_shape.empty()) r.out = in * s;
    // A requested size larger than the full output leaves the extra elements at the end (as
    // onnxruntime does); a smaller one is cropped by padding split per the ONNX spec.
    const int64_t total = std::max<int64_t>(0, full - r.out);
    r.pad_begin = w.auto_pad == AutoPad::kSameUpper ? total / 2 : total - total / 2;
    r.pad_end = total - r.pad_begin;
    return r;
  }
  if (w.auto_pad == AutoPad::kValid) {
    r.pad_begin = r.pad_end = 0;
  }
  r.out = full - r.pad_begin - r.pad_end;
  if (r.out <= 0) {
    return Status::user_error(str_cat(who, ": pads ", r.pad_begin, "+", r.pad_end,
                                      " leave no output along spatial axis ", axis,
                                      " (unpadded size ", full, ")"));
  }
  return r;
}

bool Geometry3::is_pointwise() const {
  for (int i = 0; i < 3; ++i) {
    if (kernel[i] != 1 || stride[i] != 1 || pad_begin[i] != 0 || in[i] != out[i]) return false;
  }
  return true;
}

void set_geometry_axis(Geometry3& g, size_t spatial, size_t axis, int64_t in, const WindowAttrs& w,
                       const WindowDim& d) {
  const size_t slot = 3 - spatial + axis;
  g.in[slot] = in;
  g.out[slot] = d.out;
  g.kernel[slot] = w.kernel[axis];
  g.stride[slot] = w.strides[axis];
  g.dilation[slot] = w.dilations[axis];
  g.pad_begin[slot] = d.pad_begin;
}

std::vector<int64_t> dims_or_unknown(const Shape& shape) {
  std::vector<int64_t> dims;
  for (const Dim& d : shape) dims.push_back(d.is_known() ? d.value() : -1);
  return dims;
}

std::optional<std::vector<int64_t>> static_value_dims(const Value* value) {
  if (value == nullptr || !value->shape) return std::nullopt;
  return static_dims(*value->shape);
}

Result<DType> check_float_inputs(const InferContext& ctx, const std::vector<size_t>& indices) {
  const DType t = ctx.input_dtype(indices.front());
  for (size_t i : indices) {
    if (!ctx.has_input(i)) continue;
    const DType di = ctx.input_dtype(i);
    if (di == DType::kUndefined) continue;  // not yet known: nothing to check
    if (!is_float(di)) {
      return ctx.error(str_cat("input ", i, " has dtype ", dtype_name(di),
                               "; this op takes f16, f32 or f64"));
    }
    if (di != t && t != DType::kUndefined) {
      return ctx.error(str_cat("input ", i, " has dtype ", dtype_name(di), " but input ",
                               indices.front(), " has ", dtype_name(t)));
    }
  }
  return t;
}

Status run_float_kernel(KernelContext& ctx, const FloatKernelFn& f32, const FloatKernelFn& f64) {
  const DType t = ctx.input(0).dtype();
  if (!is_float(t)) {
    return ctx.error(str_cat("input 0 has dtype ", dtype_name(t), "; expected f16, f32 or f64"));
  }
  const DType compute = t == DType::kF64 ? DType::kF64 : DType::kF32;
  // Inputs of another float type (f16, or mixed types BatchNormalization-15 allows) are
  // converted to the compute type; the kernels then read one C++ type throughout.
  std::vector<Tensor> converted(ctx.num_inputs());
  std::vector<const Tensor*> inputs(ctx.num_inputs(), nullptr);
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor* in = ctx.input_or_null(i);
    if (in == nullptr) continue;
    if (in->dtype() == compute) {
      inputs[i] = in;
      continue;
    }
    if (!is_float(in->dtype())) {
      return ctx.error(str_cat("input ", i, " has dtype ", dtype_name(in->dtype()),
                               "; expected a float type like input 0 (", dtype_name(t), ")"));
    }
    OPFUSE_ASSIGN_OR_RETURN(converted[i], in->cast(compute));
    inputs[i] = &converted[i];
  }
  OPFUSE_ASSIGN_OR_RETURN(std::vector<Tensor> outputs,
                          compute == DType::kF64 ? f64(inputs) : f32(inputs));
  for (size_t i = 0; i < outputs.size() && i < ctx.num_outputs(); ++i) {
    if (t == DType::kF16 && outputs[i].dtype() == DType::kF32) {
      OPFUSE_ASSIGN_OR_RETURN(outputs[i], outputs[i].cast(DType::kF16));
    }
    ctx.set_output(i, std::move(outputs[i]));
  }
  return Status::ok();
}

}  // namespace opfuse

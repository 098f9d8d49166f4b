// Linear algebra beyond MatMul/Gemm: Det (determinants of a batch of square matrices, by LU
// decomposition with partial pivoting in double) and Einsum (any Einstein-summation equation,
// ellipsis and implicit output included, by a direct loop over every label's range: a reference
// kernel for correctness, not speed; models with heavy Einsums want them rewritten to MatMul).
#include <algorithm>
#include <cmath>
#include <map>
#include <type_traits>

#include "ops/op_list.h"
#include "ops/tensor_helpers.h"

namespace opfuse {
namespace {

// ---- Det -----------------------------------------------------------------------------------------

Status infer_det(InferContext& ctx) {
  const DType dtype = ctx.input_dtype(0);
  if (dtype != DType::kUndefined && !is_float(dtype)) {
    return ctx.error(str_cat("X has dtype ", dtype_name(dtype), "; it must be a float dtype"));
  }
  const auto& x = ctx.input_shape(0);
  std::optional<Shape> out;
  if (x) {
    const size_t r = x->size();
    if (r < 2 || ((*x)[r - 1].is_known() && (*x)[r - 2].is_known() && (*x)[r - 1] != (*x)[r - 2])) {
      return ctx.error(str_cat("X ", shape_to_string(*x), " must be a (batch of) square matrices [..., M, M]"));
    }
    out = Shape(x->begin(), x->end() - 2);
  }
  ctx.set_output(0, dtype, out);
  return Status::ok();
}

double determinant(std::vector<double>& a, int64_t m) {
  double det = 1;
  for (int64_t col = 0; col < m; ++col) {
    int64_t pivot = col;
    for (int64_t r = col + 1; r < m; ++r) {
      if (std::fabs(a[r * m + col]) > std::fabs(a[pivot * m + col])) pivot = r;
    }
    if (a[pivot * m + col] == 0) return 0;  // singular (a NaN pivot falls through and propagates)
    if (pivot != col) {
      for (int64_t k = 0; k < m; ++k) std::swap(a[col * m + k], a[pivot * m + k]);
      det = -det;
    }
    const double p = a[col * m + col];
    det *= p;
    for (int64_t r = col + 1; r < m; ++r) {
      const double f = a[r * m + col] / p;
      for (int64_t k = col; k < m; ++k) a[r * m + k] -= f * a[col * m + k];
    }
  }
  return det;
}

Status run_det(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (!is_float(x.dtype()) || x.rank() < 2 || x.dim(-1) != x.dim(-2)) {
    return ctx.error(str_cat("X ", x.type_string(), " must be a float (batch of) square matrices [..., M, M]"));
  }
  const int64_t m = x.dim(-1);
  std::vector<int64_t> out_dims(x.dims().begin(), x.dims().end() - 2);
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out_dims));
  std::vector<double> a(static_cast<size_t>(m * m));
  for (int64_t b = 0; b < y->numel(); ++b) {
    for (int64_t i = 0; i < m * m; ++i) a[i] = x.get_double(b * m * m + i);
    y->set_double(b, determinant(a, m));
  }
  return Status::ok();
}

// ---- Einsum ------------------------------------------------------------------------------------

// The equation with every operand's labels spelled out, one per dim: an ellipsis becomes the
// labels '0', '1', ... of the dims it covers (not letters, so they cannot clash with the
// equation's own labels). sizes: each label's extent.
struct EinsumPlan {
  std::vector<std::string> inputs;  // labels per operand, one per dim
  std::string output;
  std::map<char, int64_t> sizes;
};

bool is_label(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

Result<EinsumPlan> plan_einsum(const Node& node, const std::string& equation,
                               const std::vector<std::vector<int64_t>>& dims) {
  const std::string what = node.describe();
  auto error = [&](const std::string& m) {
    return Status::user_error(str_cat(what, ": equation '", equation, "' ", m));
  };
  std::string eq;
  for (char c : equation) {
    if (c != ' ') eq += c;
  }
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != dims.size()) {
    return error(str_cat("has ", terms.size(), " operands but the node has ", dims.size(), " inputs"));
  }
  EinsumPlan plan;
  int64_t ellipsis_rank = -1;
  auto expand = [&](const std::string& term, int64_t rank, std::string& labels) -> Status {
    const size_t dots = term.find("...");
    const std::string head = term.substr(0, dots);
    const std::string tail = dots == std::string::npos ? "" : term.substr(dots + 3);
    for (char c : head + tail) {
      if (!is_label(c)) return error(str_cat("has '", std::string(1, c), "', not a letter"));
    }
    if (dots == std::string::npos) {
      if (static_cast<int64_t>(term.size()) != rank) {
        return error(str_cat("gives '", term, "' ", term.size(), " labels for an input of rank ", rank));
      }
      labels = term;
      return Status::ok();
    }
    const int64_t e = rank - static_cast<int64_t>(head.size() + tail.size());
    if (e < 0) return error(str_cat("gives '", term, "' more labels than its input's rank ", rank));
    if (ellipsis_rank >= 0 && ellipsis_rank != e) {
      return error("has ellipses of different ranks, which opfuse does not broadcast");
    }
    ellipsis_rank = e;
    labels = head;
    for (int64_t k = 0; k < e; ++k) labels += static_cast<char>('0' + k);
    labels += tail;
    return Status::ok();
  };
  for (size_t i = 0; i < terms.size(); ++i) {
    std::string labels;
    OPFUSE_TRY(expand(terms[i], static_cast<int64_t>(dims[i].size()), labels));
    for (size_t d = 0; d < labels.size(); ++d) {
      auto [it, fresh] = plan.sizes.emplace(labels[d], dims[i][d]);
      if (!fresh && it->second != dims[i][d]) {
        return error(str_cat("gives ", is_label(labels[d]) ? str_cat("label '", std::string(1, labels[d]), "'")
                                                           : std::string("an ellipsis dim"),
                             " sizes ", it->second, " and ", dims[i][d]));
      }
    }
    plan.inputs.push_back(std::move(labels));
  }
  if (arrow != std::string::npos) {
    // The output term: letters that must appear in some input, and the ellipsis if any.
    const std::string rhs = eq.substr(arrow + 2);
    const size_t dots = rhs.find("...");
    for (size_t p = 0; p < rhs.size(); ++p) {
      if (dots != std::string::npos && p == dots) {
        for (int64_t k = 0; k < std::max<int64_t>(ellipsis_rank, 0); ++k) plan.output += static_cast<char>('0' + k);
        p += 2;
        continue;
      }
      const char c = rhs[p];
      if (!is_label(c) || !plan.sizes.count(c) || plan.output.find(c) != std::string::npos) {
        return error(str_cat("has output label '", std::string(1, c), "' that is not a letter of the inputs or repeats"));
      }
      plan.output += c;
    }
  } else {
    // Implicit output: the ellipsis dims, then the letters used exactly once, alphabetically.
    for (int64_t k = 0; k < std::max<int64_t>(ellipsis_rank, 0); ++k) plan.output += static_cast<char>('0' + k);
    std::map<char, int> counts;
    for (const std::string& labels : plan.inputs) {
      for (char c : labels) ++counts[c];
    }
    for (const auto& [c, n] : counts) {
      if (is_label(c) && n == 1) plan.output += c;
    }
  }
  return plan;
}

Result<EinsumPlan> plan_from_types(const InferContext& ctx, std::vector<std::vector<int64_t>> dims) {
  return plan_einsum(ctx.node(), ctx.attrs().get_string("equation"), dims);
}

Status infer_einsum(InferContext& ctx) {
  DType dtype = DType::kUndefined;
  std::vector<std::vector<int64_t>> dims;
  bool all_static = true;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const DType t = ctx.input_dtype(i);
    if (t == DType::kBool) return ctx.error(str_cat("input ", i, " has dtype bool; Einsum takes numeric dtypes"));
    if (t != DType::kUndefined && dtype != DType::kUndefined && t != dtype) {
      return ctx.error(str_cat("inputs have dtypes ", dtype_name(dtype), " and ", dtype_name(t), "; they must match"));
    }
    if (t != DType::kUndefined) dtype = t;
    const auto& s = ctx.input_shape(i);
    const auto d = s ? static_dims(*s) : std::nullopt;
    if (!d) {
      all_static = false;
    } else {
      dims.push_back(*d);
    }
  }
  std::optional<Shape> out;
  if (all_static) {
    OPFUSE_ASSIGN_OR_RETURN(EinsumPlan plan, plan_from_types(ctx, dims));
    out = Shape{};
    for (char c : plan.output) out->push_back(Dim(plan.sizes.at(c)));
  }
  ctx.set_output(0, dtype, out);
  return Status::ok();
}

Status run_einsum(KernelContext& ctx) {
  std::vector<std::vector<int64_t>> dims;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) dims.push_back(ctx.input(i).dims());
  const DType dtype = ctx.input(0).dtype();
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.input(i).dtype() != dtype || dtype == DType::kBool) {
      return ctx.error(str_cat("inputs must share one numeric dtype; input ", i, " is ", ctx.input(i).type_string()));
    }
  }
  OPFUSE_ASSIGN_OR_RETURN(EinsumPlan plan, plan_einsum(ctx.node(), ctx.attrs().get_string("equation"), dims));
  std::vector<int64_t> out_dims;
  for (char c : plan.output) out_dims.push_back(plan.sizes.at(c));
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, dtype, out_dims));
  // Every label in one loop nest: output labels first (row-major), then the summed ones.
  std::string loop = plan.output;
  for (const auto& [c, size] : plan.sizes) {
    if (loop.find(c) == std::string::npos) loop += c;
  }
  std::vector<int64_t> extent;
  for (char c : loop) extent.push_back(plan.sizes.at(c));
  // Per operand: the element stride of each loop label (summed over repeated labels: a diagonal).
  std::vector<std::vector<int64_t>> strides(plan.inputs.size(), std::vector<int64_t>(loop.size(), 0));
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    const std::vector<int64_t> own = row_strides(dims[i]);
    for (size_t d = 0; d < plan.inputs[i].size(); ++d) strides[i][loop.find(plan.inputs[i][d])] += own[d];
  }
  int64_t total = 1;
  for (int64_t e : extent) total *= e;
  if (total == 0) return Status::ok();
  const int64_t summed = [&] {
    int64_t s = 1;
    for (size_t k = plan.output.size(); k < loop.size(); ++k) s *= extent[k];
    return s;
  }();
  // Integers accumulate exactly in int64, floats in double.
  const bool integral = is_integer(dtype);
  std::vector<int64_t> pos(loop.size(), 0), offset(plan.inputs.size(), 0);
  double acc = 0;
  int64_t iacc = 0;
  for (int64_t step = 0; step < total; ++step) {
    if (integral) {
      int64_t p = 1;
      for (size_t i = 0; i < plan.inputs.size(); ++i) p *= ctx.input(i).get_int(offset[i]);
      iacc += p;
    } else {
      double p = 1;
      for (size_t i = 0; i < plan.inputs.size(); ++i) p *= ctx.input(i).get_double(offset[i]);
      acc += p;
    }
    if ((step + 1) % summed == 0) {
      const int64_t o = step / summed;
      if (integral) {
        visit_dtype(dtype, [&](auto tag) {
          using T = decltype(tag);
          if constexpr (std::is_integral_v<T>) y->data<T>()[o] = static_cast<T>(iacc);
        });
      } else {
        y->set_double(o, acc);
      }
      acc = 0;
      iacc = 0;
    }
    for (int64_t d = static_cast<int64_t>(loop.size()) - 1; d >= 0; --d) {
      for (size_t i = 0; i < offset.size(); ++i) offset[i] += strides[i][d];
      if (++pos[d] < extent[d]) break;
      for (size_t i = 0; i < offset.size(); ++i) offset[i] -= strides[i][d] * extent[d];
      pos[d] = 0;
    }
  }
  return Status::ok();
}

}  // namespace

std::vector<OpDef> linalg_ops() {
  std::vector<OpDef> ops;
  OpDef det = op_record("Det", 1, 1, FusionKind::kOpaque, infer_det, run_det,
                        "determinant of each square matrix in the last two dims");
  ops.push_back(std::move(det));
  OpDef einsum = op_record("Einsum", 1, 16, FusionKind::kOpaque, infer_einsum, run_einsum,
                           "Einstein summation over the inputs by `equation` (ellipsis, implicit output)");
  einsum.min_opset = 12;
  einsum.attrs = {{"equation", AttrType::kString, std::nullopt, true}};
  ops.push_back(std::move(einsum));
  return ops;
}

}  // namespace opfuse

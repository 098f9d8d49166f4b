// The loss family: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opset 12/13 semantics).
// Both pick, for every sample n and spatial position d, the score of the target class
// t = target[n, d]:   loss[n, d] = -weight[t] * input[n, t, d]   (weight 1 without a weight input;
// 0 where t == ignore_index), then reduce: "none" keeps [N, d1..dk], "sum" adds everything and
// "mean" divides that sum by the sum of the weights applied (so ignored positions do not count).
// SoftmaxCrossEntropyLoss does the same on log_softmax(scores) over the class axis 1 and can
// return those log-probabilities as a second output. Reference kernels accumulate in double.
#include <cmath>
#include <limits>
#include <optional>

#include "ops/op_list.h"

namespace opfuse {
namespace {

enum class LossReduction { kNone, kSum, kMean };

Result<LossReduction> loss_reduction(const Node& node, const AttrReader& attrs) {
  const std::string r = attrs.get_string("reduction");
  if (r == "none") return LossReduction::kNone;
  if (r == "sum") return LossReduction::kSum;
  if (r == "mean") return LossReduction::kMean;
  return Status::user_error(str_cat(node.describe(), ": reduction '", r,
                                    "' is not one of 'none', 'sum', 'mean'"));
}

// ignore_index has no default: its absence means every target is a class index.
std::optional<int64_t> ignore_index(const AttrReader& attrs) {
  if (!attrs.has("ignore_index")) return std::nullopt;
  return attrs.get_int("ignore_index");
}

bool dims_conflict(const Dim& a, const Dim& b) { return a.is_known() && b.is_known() && a != b; }

// Input 0 is [N, C, d1..dk] (k >= 0), input 1 the integer target [N, d1..dk], input 2 the
// optional per-class weight [C]. Output 0 is the loss ([N, d1..dk] or a scalar); SCE's optional
// output 1 is the log-probabilities, shaped like the scores.
Status infer_loss(InferContext& ctx) {
  const char* const scores_name = ctx.node().op_type() == "SoftmaxCrossEntropyLoss" ? "scores" : "input";
  const DType dtype = ctx.input_dtype(0);
  if (dtype != DType::kUndefined && !is_float(dtype)) {
    return ctx.error(str_cat(scores_name, " has dtype ", dtype_name(dtype), "; it must be a float dtype"));
  }
  const DType target_dtype = ctx.input_dtype(1);
  if (target_dtype != DType::kUndefined && target_dtype != DType::kI32 && target_dtype != DType::kI64) {
    return ctx.error(str_cat("target has dtype ", dtype_name(target_dtype), "; it must be int32 or int64"));
  }
  if (ctx.has_input(2) && ctx.input_dtype(2) != DType::kUndefined && dtype != DType::kUndefined &&
      ctx.input_dtype(2) != dtype) {
    return ctx.error(str_cat("weight has dtype ", dtype_name(ctx.input_dtype(2)), " but ", scores_name,
                             " has ", dtype_name(dtype), "; they must match"));
  }
  OPFUSE_ASSIGN_OR_RETURN(LossReduction reduction, loss_reduction(ctx.node(), ctx.attrs()));
  const std::optional<Shape>& scores = ctx.input_shape(0);
  const std::optional<Shape>& target = ctx.input_shape(1);
  if (scores && scores->size() < 2) {
    return ctx.error(str_cat(scores_name, " ", shape_to_string(*scores),
                             " must have rank >= 2 ([N, C, d1..dk])"));
  }
  if (scores && target) {
    bool ok = target->size() + 1 == scores->size();
    for (size_t i = 0; ok && i < target->size(); ++i) {
      ok = !dims_conflict((*target)[i], (*scores)[i == 0 ? 0 : i + 1]);
    }
    if (!ok) {
      return ctx.error(str_cat("target ", shape_to_string(*target), " must be ", scores_name, " ",
                               shape_to_string(*scores), " without its class dim 1"));
    }
  }
  if (ctx.has_input(2) && ctx.input_shape(2)) {
    const Shape& weight = *ctx.input_shape(2);
    if (weight.size() != 1 || (scores && dims_conflict(weight[0], (*scores)[1]))) {
      return ctx.error(str_cat("weight ", shape_to_string(weight), " must be 1-D with one entry per class",
                               scores ? str_cat(" (", shape_to_string(*scores), " has ", (*scores)[1].to_string(),
                                                " classes)")
                                      : std::string()));
    }
  }
  std::optional<Shape> loss_shape;
  if (reduction != LossReduction::kNone) {
    loss_shape = Shape{};
  } else if (target) {
    loss_shape = target;
  } else if (scores) {
    loss_shape = Shape(scores->begin(), scores->end());
    loss_shape->erase(loss_shape->begin() + 1);
  }
  ctx.set_output(0, dtype, loss_shape);
  if (ctx.num_outputs() > 1) ctx.set_output(1, dtype, scores);
  return Status::ok();
}

// Checks the runtime shapes (the graph may have had unknown dims) and returns the layout:
// scores viewed as [N, C, D] with D the product of the spatial dims.
struct LossLayout {
  int64_t n = 0, c = 0, d = 1;
};

Result<LossLayout> loss_layout(const KernelContext& ctx) {
  const Tensor& scores = ctx.input(0);
  const Tensor& target = ctx.input(1);
  if (!is_float(scores.dtype())) {
    return ctx.error(str_cat("input ", scores.type_string(), " must have a float dtype"));
  }
  if (target.dtype() != DType::kI32 && target.dtype() != DType::kI64) {
    return ctx.error(str_cat("target ", target.type_string(), " must be int32 or int64"));
  }
  bool ok = scores.rank() >= 2 && target.rank() + 1 == scores.rank();
  for (int64_t i = 0; ok && i < target.rank(); ++i) ok = target.dim(i) == scores.dim(i == 0 ? 0 : i + 1);
  if (!ok) {
    return ctx.error(str_cat("target ", target.type_string(), " must be input ", scores.type_string(),
                             " without its class dim 1 (input rank >= 2)"));
  }
  LossLayout layout{scores.dim(0), scores.dim(1), 1};
  for (int64_t i = 2; i < scores.rank(); ++i) layout.d *= scores.dim(i);
  if (const Tensor* weight = ctx.input_or_null(2)) {
    if (weight->rank() != 1 || weight->dim(0) != layout.c || weight->dtype() != scores.dtype()) {
      return ctx.error(str_cat("weight ", weight->type_string(), " must be 1-D with one ",
                               dtype_name(scores.dtype()), " per class (", layout.c, " classes)"));
    }
  }
  return layout;
}

// log_softmax over the class axis of scores viewed as [N, C, D], in double (max-shifted).
std::vector<double> log_softmax_classes(const Tensor& scores, const LossLayout& l) {
  std::vector<double> out(static_cast<size_t>(scores.numel()));
  for (int64_t n = 0; n < l.n; ++n) {
    for (int64_t d = 0; d < l.d; ++d) {
      const int64_t base = n * l.c * l.d + d;
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t c = 0; c < l.c; ++c) m = std::max(m, scores.get_double(base + c * l.d));
      double sum = 0;
      for (int64_t c = 0; c < l.c; ++c) sum += std::exp(scores.get_double(base + c * l.d) - m);
      const double shift = m + std::log(sum);
      for (int64_t c = 0; c < l.c; ++c) out[base + c * l.d] = scores.get_double(base + c * l.d) - shift;
    }
  }
  return out;
}

// The shared tail of both losses: `log_prob(k)` reads the (log-)probability at flat index k of
// the [N, C, D] view.
template <typename LogProbAt>
Status weighted_nll(KernelContext& ctx, const LossLayout& l, LogProbAt log_prob) {
  OPFUSE_ASSIGN_OR_RETURN(LossReduction reduction, loss_reduction(ctx.node(), ctx.attrs()));
  const std::optional<int64_t> ignored = ignore_index(ctx.attrs());
  const Tensor& target = ctx.input(1);
  const Tensor* weight = ctx.input_or_null(2);
  const int64_t positions = l.n * l.d;
  std::vector<double> loss(static_cast<size_t>(positions));
  double loss_sum = 0, weight_sum = 0;
  for (int64_t p = 0; p < positions; ++p) {
    const int64_t t = target.get_int(p);
    if (ignored && t == *ignored) continue;  // loss 0, weight 0
    if (t < 0 || t >= l.c) {
      return ctx.error(str_cat("target value ", t, " at flat index ", p, " is not a class index in [0, ",
                               l.c, ")", ignored ? str_cat(" nor ignore_index ", *ignored) : std::string()));
    }
    const double w = weight ? weight->get_double(t) : 1.0;
    const int64_t n = p / l.d, d = p % l.d;
    loss[p] = -w * log_prob((n * l.c + t) * l.d + d);
    loss_sum += loss[p];
    weight_sum += w;
  }
  const DType dtype = ctx.input(0).dtype();
  if (reduction == LossReduction::kNone) {
    OPFUSE_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, dtype, target.dims()));
    for (int64_t p = 0; p < positions; ++p) out->set_double(p, loss[p]);
  } else {
    OPFUSE_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, dtype, {}));
    // Mean divides by the applied weights (the position count when unweighted and nothing is
    // ignored); 0/0 when everything is ignored is NaN, as in the ONNX reference.
    out->set_double(0, reduction == LossReduction::kSum ? loss_sum : loss_sum / weight_sum);
  }
  return Status::ok();
}

Status nll_loss_kernel(KernelContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(LossLayout layout, loss_layout(ctx));
  const Tensor& input = ctx.input(0);
  return weighted_nll(ctx, layout, [&](int64_t k) { return input.get_double(k); });
}

Status softmax_cross_entropy_kernel(KernelContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(LossLayout layout, loss_layout(ctx));
  const Tensor& scores = ctx.input(0);
  const std::vector<double> log_prob = log_softmax_classes(scores, layout);
  OPFUSE_TRY(weighted_nll(ctx, layout, [&](int64_t k) { return log_prob[k]; }));
  if (ctx.num_outputs() > 1) {
    OPFUSE_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(1, scores.dtype(), scores.dims()));
    for (int64_t k = 0; k < scores.numel(); ++k) out->set_double(k, log_prob[k]);
  }
  return Status::ok();
}

int64_t loss_flops(const Node& node) {
  const Value* in = node.input(0);
  if (in == nullptr || !in->shape) return -1;
  const auto dims = static_dims(*in->shape);
  if (!dims) return -1;
  // NLL touches one score per position; SCE's log-softmax about 5 operations per score.
  const int64_t classes = dims->size() >= 2 ? (*dims)[1] : 1;
  const int64_t positions = classes > 0 ? numel_of(*dims) / classes : 0;
  return node.op_type() == "SoftmaxCrossEntropyLoss" ? 5 * numel_of(*dims) + 2 * positions : 2 * positions;
}

OpDef loss_def(const char* name, int max_outputs, KernelFn kernel, const char* summary) {
  OpDef def;
  def.name = name;
  def.min_opset = 12;
  def.min_inputs = 2;
  def.max_inputs = 3;
  def.max_outputs = max_outputs;
  def.attrs = {AttrSpec{"reduction", AttrType::kString, AttrValue(std::string("mean"))},
               AttrSpec{"ignore_index", AttrType::kInt, std::nullopt}};
  def.kind = FusionKind::kOpaque;
  def.infer = infer_loss;
  def.reference = kernel;
  def.flops = loss_flops;
  def.summary = summary;
  return def;
}

}  // namespace

std::vector<OpDef> loss_ops() {
  std::vector<OpDef> ops;
  ops.push_back(loss_def("NegativeLogLikelihoodLoss", 1, nll_loss_kernel,
                         "-weight[t] * input[n, t, d] for target class t, reduced by `reduction`"));
  ops.push_back(loss_def("SoftmaxCrossEntropyLoss", 2, softmax_cross_entropy_kernel,
                         "NegativeLogLikelihoodLoss of log_softmax(scores) over the class axis"));
  return ops;
}

}  // namespace opfuse

#include "plugin/plugin_loader.h"

#include <dlfcn.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>

#include "ops/custom_op.h"
#include "ops/registry.h"
#include "ops/scalar_expr_text.h"
#include "plugin/opfuse_plugin.h"

namespace opfuse {
namespace {

constexpr int kPluginMaxOpset = 1 << 20;
constexpr size_t kErrorSize = 512;

// What the trampolines need to call into the plugin, by (domain, op type). The library is
// never unloaded, so the op record's pointers stay valid.
struct PluginOp {
  const OpfuseCustomOp* op;
  ScalarExpr scalar;
};

struct State {
  std::mutex mutex;
  std::map<std::pair<std::string, std::string>, PluginOp> ops;
  std::map<std::string, LoadedPlugin> loaded;  // by canonical path
};
State& state() {
  static State s;
  return s;
}

const PluginOp* find_op(const Node& node) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.ops.find({node.domain(), node.op_type()});
  return it == s.ops.end() ? nullptr : &it->second;
}

OpfuseDType to_abi(DType t) {
  switch (t) {
    case DType::kF32: return OPFUSE_DTYPE_F32;
    case DType::kF64: return OPFUSE_DTYPE_F64;
    case DType::kI64: return OPFUSE_DTYPE_I64;
    case DType::kI32: return OPFUSE_DTYPE_I32;
    case DType::kBool: return OPFUSE_DTYPE_BOOL;
    default: return OPFUSE_DTYPE_UNDEFINED;
  }
}
DType from_abi(int32_t t) {
  switch (t) {
    case OPFUSE_DTYPE_F32: return DType::kF32;
    case OPFUSE_DTYPE_F64: return DType::kF64;
    case OPFUSE_DTYPE_I64: return DType::kI64;
    case OPFUSE_DTYPE_I32: return DType::kI32;
    case OPFUSE_DTYPE_BOOL: return DType::kBool;
    default: return DType::kUndefined;
  }
}

int64_t attr_get_int(const OpfuseAttrs* attrs, const char* name) {
  return static_cast<const AttrReader*>(attrs->impl)->get_int(name);
}
float attr_get_float(const OpfuseAttrs* attrs, const char* name) {
  return static_cast<const AttrReader*>(attrs->impl)->get_float(name);
}

// Calls the plugin's infer callback (or the default rule) on abstract types.
Status call_infer(const Node& node, const PluginOp& p, const AttrReader& reader,
                  const std::vector<OpfuseTensor>& in, std::vector<OpfuseTensor>& out) {
  for (OpfuseTensor& t : out) {
    std::memset(&t, 0, sizeof t);
    t.rank = -1;
  }
  if (p.op->infer == nullptr) {
    out[0] = in[0];
    return Status::ok();
  }
  OpfuseAttrs attrs{&reader, attr_get_int, attr_get_float};
  char error[kErrorSize] = {0};
  if (p.op->infer(in.data(), static_cast<int32_t>(in.size()), out.data(),
                  static_cast<int32_t>(out.size()), &attrs, error, sizeof error) != 0) {
    error[kErrorSize - 1] = '\0';
    return Status::user_error(str_cat(node.describe(), ": custom op inference failed: ", error));
  }
  for (const OpfuseTensor& t : out) {
    if (t.rank > OPFUSE_PLUGIN_MAX_RANK || t.rank < -1) {
      return Status::user_error(str_cat(node.describe(), ": custom op inference gave rank ", t.rank));
    }
  }
  return Status::ok();
}

// Tensor descriptors for the ABI: zeroed, rank -1 (unknown or omitted) until filled in.
std::vector<OpfuseTensor> blank_tensors(size_t count) {
  OpfuseTensor blank;
  std::memset(&blank, 0, sizeof blank);
  blank.rank = -1;
  return std::vector<OpfuseTensor>(count, blank);
}

Status plugin_infer(InferContext& ctx) {
  const PluginOp* p = find_op(ctx.node());
  if (p == nullptr) return Status::internal_error(ctx.node().describe() + ": plugin op not found");
  std::vector<OpfuseTensor> in = blank_tensors(ctx.num_inputs());
  for (size_t i = 0; i < in.size(); ++i) {
    if (!ctx.has_input(i)) continue;
    in[i].dtype = to_abi(ctx.input_dtype(i));
    const auto& shape = ctx.input_shape(i);
    if (shape && shape->size() <= OPFUSE_PLUGIN_MAX_RANK) {
      in[i].rank = static_cast<int32_t>(shape->size());
      for (size_t d = 0; d < shape->size(); ++d) in[i].dims[d] = (*shape)[d].is_known() ? (*shape)[d].value() : -1;
    }
  }
  std::vector<OpfuseTensor> out(ctx.num_outputs());
  OPFUSE_TRY(call_infer(ctx.node(), *p, ctx.attrs(), in, out));
  // Without an infer callback an elementwise op broadcasts; keep symbolic dims then.
  if (p->op->infer == nullptr) return p->scalar.empty() ? infer_same_as_input0(ctx) : infer_broadcast(ctx);
  for (size_t i = 0; i < out.size(); ++i) {
    std::optional<Shape> shape;
    if (out[i].rank >= 0) {
      Shape s;
      for (int32_t d = 0; d < out[i].rank; ++d) s.push_back(out[i].dims[d] >= 0 ? Dim(out[i].dims[d]) : Dim::unknown());
      shape = std::move(s);
    }
    ctx.set_output(i, from_abi(out[i].dtype), std::move(shape));
  }
  return Status::ok();
}

Status plugin_reference(KernelContext& ctx) {
  const PluginOp* p = find_op(ctx.node());
  if (p == nullptr) return Status::internal_error(ctx.node().describe() + ": plugin op not found");
  std::vector<OpfuseTensor> in = blank_tensors(ctx.num_inputs());
  for (size_t i = 0; i < in.size(); ++i) {
    if (!ctx.has_input(i)) continue;
    const Tensor& t = ctx.input(i);
    in[i].dtype = to_abi(t.dtype());
    if (in[i].dtype == OPFUSE_DTYPE_UNDEFINED || t.rank() > OPFUSE_PLUGIN_MAX_RANK) {
      return ctx.error(str_cat("input ", i, " is ", t.type_string(),
                               ", which the plugin ABI cannot pass (f32, f64, i64, i32, bool; rank <= 8)"));
    }
    in[i].rank = static_cast<int32_t>(t.rank());
    for (int64_t d = 0; d < t.rank(); ++d) in[i].dims[d] = t.dims()[d];
    in[i].data = const_cast<void*>(t.raw_data());
  }
  std::vector<OpfuseTensor> out(ctx.num_outputs());
  OPFUSE_TRY(call_infer(ctx.node(), *p, ctx.attrs(), in, out));
  for (size_t i = 0; i < out.size(); ++i) {
    const DType dtype = from_abi(out[i].dtype);
    if (dtype == DType::kUndefined || out[i].rank < 0) {
      return ctx.error(str_cat("custom op inference gave no concrete type for output ", i));
    }
    OPFUSE_ASSIGN_OR_RETURN(Tensor * t, ctx.allocate_output(i, dtype, std::vector<int64_t>(out[i].dims, out[i].dims + out[i].rank)));
    out[i].data = t->raw_data();
  }
  OpfuseAttrs attrs{&ctx.attrs(), attr_get_int, attr_get_float};
  char error[kErrorSize] = {0};
  if (p->op->compute(in.data(), static_cast<int32_t>(in.size()), out.data(),
                     static_cast<int32_t>(out.size()), &attrs, error, sizeof error) != 0) {
    error[kErrorSize - 1] = '\0';
    return ctx.error(str_cat("custom op kernel failed: ", error));
  }
  return Status::ok();
}

ScalarExpr plugin_scalar(const ScalarExprContext& ctx) {
  const PluginOp* p = find_op(ctx.node);
  return p ? p->scalar : ScalarExpr{};
}

// Checks one op record and turns it into an OpDef.
Result<OpDef> make_def(const std::string& lib, const std::string& domain, const OpfuseCustomOp& op,
                       int index, ScalarExpr& scalar) {
  const std::string who = op.name && *op.name
                              ? str_cat("custom-op library '", lib, "': op ", op.name)
                              : str_cat("custom-op library '", lib, "': op #", index);
  if (op.name == nullptr || *op.name == '\0') return Status::user_error(who + " has no name");
  if (op.min_inputs < 0 || op.min_inputs > op.max_inputs || op.num_outputs < 1) {
    return Status::user_error(str_cat(who, ": bad arity (inputs ", op.min_inputs, "-",
                                      op.max_inputs, ", outputs ", op.num_outputs, ")"));
  }
  if (op.num_attrs < 0 || (op.num_attrs > 0 && op.attrs == nullptr)) {
    return Status::user_error(who + ": attrs is null but num_attrs is not 0");
  }
  OpDef def;
  def.name = op.name;
  def.domain = domain;
  def.min_opset = 1;
  def.max_opset = kPluginMaxOpset;
  def.min_inputs = op.min_inputs;
  def.max_inputs = op.max_inputs;
  def.min_outputs = def.max_outputs = op.num_outputs;
  def.summary = op.summary ? op.summary : str_cat("custom op from ", lib);
  for (int32_t a = 0; a < op.num_attrs; ++a) {
    const OpfuseAttrSpec& spec = op.attrs[a];
    if (spec.name == nullptr || *spec.name == '\0') return Status::user_error(str_cat(who, ": attribute #", a, " has no name"));
    if (spec.type == OPFUSE_ATTR_INT) {
      def.attrs.push_back(AttrSpec{spec.name, AttrType::kInt, AttrValue(spec.default_int)});
    } else if (spec.type == OPFUSE_ATTR_FLOAT) {
      def.attrs.push_back(AttrSpec{spec.name, AttrType::kFloat, AttrValue(spec.default_float)});
    } else {
      return Status::user_error(str_cat(who, ": attribute '", spec.name, "' has unknown type ", spec.type));
    }
  }
  switch (op.fusion_kind) {
    case OPFUSE_KIND_ELEMENTWISE: def.kind = FusionKind::kElementwise; break;
    case OPFUSE_KIND_BROADCAST: def.kind = FusionKind::kBroadcast; break;
    case OPFUSE_KIND_OPAQUE: def.kind = FusionKind::kOpaque; break;
    default:
      return Status::user_error(str_cat(who, ": fusion_kind ", op.fusion_kind,
                                        " is not one of ELEMENTWISE (0), BROADCAST (1), OPAQUE (5)"));
  }
  if (op.scalar_expr != nullptr) {
    Result<ScalarExpr> parsed = parse_scalar_expr(op.scalar_expr);
    if (!parsed.is_ok()) return parsed.status().with_context(who);
    if (parsed->num_args() > op.max_inputs) {
      return Status::user_error(str_cat(who, ": scalar_expr reads input %", parsed->num_args() - 1,
                                        " but the op takes at most ", op.max_inputs, " inputs"));
    }
    scalar = std::move(*parsed);
    def.scalar = plugin_scalar;
  } else if (op.compute == nullptr) {
    return Status::user_error(who + ": needs a compute function or a scalar_expr");
  }
  // The scalar expression is the op's meaning when present (the fuser composes it, so the
  // unfused kernel must agree with it): it becomes the reference; compute serves opaque ops.
  if (op.scalar_expr == nullptr) def.reference = plugin_reference;
  def.infer = plugin_infer;
  return def;
}

}  // namespace

Result<LoadedPlugin> load_custom_op_library(const std::string& path) {
  const std::string lib = path;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return Status::user_error(str_cat("custom-op library '", lib, "' does not exist"));
  }
  const std::string canonical = std::filesystem::canonical(path, ec).string();
  {
    State& s = state();
    std::lock_guard lock(s.mutex);
    auto it = s.loaded.find(canonical);
    if (it != s.loaded.end()) return it->second;
  }
  // A path with a slash, so dlopen does not search the library path for a bare name.
  const std::string open_path = canonical.empty() ? path : canonical;
  void* handle = dlopen(open_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Status::user_error(str_cat("custom-op library '", lib, "': dlopen failed: ", why ? why : "unknown reason"));
  }
  auto symbol = [&](const char* name) -> Result<void*> {
    dlerror();
    void* sym = dlsym(handle, name);
    if (sym == nullptr) {
      return Status::user_error(str_cat("custom-op library '", lib, "' does not export ", name,
                                        "() (is it an opfuse plugin? see plugin/opfuse_plugin.h)"));
    }
    return sym;
  };
  // The library stays loaded on failure too: unloading code that static initialisers may have
  // touched is not worth the risk for an error path.
  OPFUSE_ASSIGN_OR_RETURN(void* version_sym, symbol("opfuse_plugin_abi_version"));
  const uint32_t version = reinterpret_cast<uint32_t (*)()>(version_sym)();
  if (version != OPFUSE_PLUGIN_ABI_VERSION) {
    return Status::user_error(str_cat("custom-op library '", lib, "' was built for plugin ABI version ",
                                      version, ", but this opfuse implements version ",
                                      OPFUSE_PLUGIN_ABI_VERSION, " (rebuild it against opfuse_plugin.h)"));
  }
  OPFUSE_ASSIGN_OR_RETURN(void* info_sym, symbol("opfuse_plugin_info"));
  const OpfusePluginInfo* info = reinterpret_cast<const OpfusePluginInfo* (*)()>(info_sym)();
  if (info == nullptr) return Status::user_error(str_cat("custom-op library '", lib, "': opfuse_plugin_info() returned null"));
  if (info->abi_version != OPFUSE_PLUGIN_ABI_VERSION) {
    return Status::user_error(str_cat("custom-op library '", lib, "': its info record says ABI version ",
                                      info->abi_version, ", expected ", OPFUSE_PLUGIN_ABI_VERSION));
  }
  const std::string domain = info->domain ? info->domain : "";
  if (domain.empty() || domain == "ai.onnx" || domain == "opfuse") {
    return Status::user_error(str_cat("custom-op library '", lib, "': domain '", domain,
                                      "' is not allowed (give the plugin its own domain, e.g. com.example)"));
  }
  if (info->num_ops <= 0 || info->ops == nullptr) {
    return Status::user_error(str_cat("custom-op library '", lib, "' declares no ops"));
  }
  // Validate everything before registering anything: a bad plugin leaves no half-registered ops.
  std::vector<OpDef> defs;
  std::vector<ScalarExpr> scalars(static_cast<size_t>(info->num_ops));
  std::set<std::string> names;
  for (int32_t i = 0; i < info->num_ops; ++i) {
    OPFUSE_ASSIGN_OR_RETURN(OpDef def, make_def(lib, domain, info->ops[i], i, scalars[i]));
    if (!names.insert(def.name).second || OpRegistry::global().find(domain, def.name) != nullptr) {
      return Status::user_error(str_cat("custom-op library '", lib, "': op ", def.name, " (domain ",
                                        domain, ") is already registered"));
    }
    defs.push_back(std::move(def));
  }
  LoadedPlugin loaded{path, domain, {}};
  {
    State& s = state();
    std::lock_guard lock(s.mutex);
    for (size_t i = 0; i < defs.size(); ++i) {
      s.ops[{domain, defs[i].name}] = PluginOp{&info->ops[i], std::move(scalars[i])};
    }
  }
  for (OpDef& def : defs) {
    loaded.ops.push_back(def.name);
    OPFUSE_TRY(register_custom_op(std::move(def)).with_context(str_cat("custom-op library '", lib, "'")));
  }
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.loaded[canonical] = loaded;
  return loaded;
}

}  // namespace opfuse

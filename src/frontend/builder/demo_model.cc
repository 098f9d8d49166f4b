#include "frontend/builder/demo_model.h"

#include <cmath>

#include "core/random.h"
#include "ops/infer_shapes.h"

namespace opfuse {
namespace {

// Adds layers to a graph with deterministic weights; each helper returns the layer's output.
class DemoBuilder {
 public:
  DemoBuilder(Graph& g, uint64_t seed) : g_(g), rng_(seed) {}

  Value* weight(const std::string& name, std::vector<int64_t> dims, double scale) {
    Tensor t = Tensor::zeros(DType::kF32, std::move(dims)).value();
    fill_uniform(t, rng_, -scale, scale);
    return g_.add_constant(name, std::move(t));
  }

  Result<Value*> op(const std::string& type, std::vector<Value*> inputs, const std::string& name,
                    Attributes attrs = {}) {
    OPFUSE_ASSIGN_OR_RETURN(Node* n, g_.add_node(type, std::move(inputs), {name}, std::move(attrs), name));
    return n->output(0);
  }

  // Conv (He-style uniform init) followed by inference BatchNormalization.
  Result<Value*> conv_bn(Value* x, const std::string& name, int64_t in_ch, int64_t out_ch,
                         int64_t kernel, int64_t stride, int64_t group = 1) {
    const double fan_in = static_cast<double>(in_ch / group * kernel * kernel);
    Value* w = weight(name + ".weight", {out_ch, in_ch / group, kernel, kernel}, std::sqrt(6.0 / fan_in));
    const int64_t pad = kernel / 2;
    OPFUSE_ASSIGN_OR_RETURN(
        Value* y, op("Conv", {x, w}, name + ".conv",
                     {{"strides", std::vector<int64_t>{stride, stride}},
                      {"pads", std::vector<int64_t>{pad, pad, pad, pad}},
                      {"group", group}}));
    Value* gamma = weight(name + ".bn.gamma", {out_ch}, 0.5);
    Value* beta = weight(name + ".bn.beta", {out_ch}, 0.1);
    Value* mean = weight(name + ".bn.mean", {out_ch}, 0.1);
    Tensor var_data = Tensor::zeros(DType::kF32, {out_ch}).value();
    fill_uniform(var_data, rng_, 0.5, 1.5);
    Value* var = g_.add_constant(name + ".bn.var", std::move(var_data));
    return op("BatchNormalization", {y, gamma, beta, mean, var}, name + ".bn",
              {{"epsilon", 1e-5f}});
  }

 private:
  Graph& g_;
  Random rng_;
};

}  // namespace

Result<Graph> build_demo_cnn(int64_t image_size, uint64_t seed) {
  Graph g;
  g.name = "demo_cnn";
  g.opset_imports[""] = 17;
  DemoBuilder b(g, seed);
  Value* x = g.add_input("image", DType::kF32, make_shape({1, 3, image_size, image_size}));

  OPFUSE_ASSIGN_OR_RETURN(Value* h, b.conv_bn(x, "stem", 3, 16, 3, 2));
  OPFUSE_ASSIGN_OR_RETURN(h, b.op("Relu", {h}, "stem.relu"));
  OPFUSE_ASSIGN_OR_RETURN(h, b.op("MaxPool", {h}, "stem.pool",
                                  {{"kernel_shape", std::vector<int64_t>{3, 3}},
                                   {"strides", std::vector<int64_t>{2, 2}},
                                   {"pads", std::vector<int64_t>{1, 1, 1, 1}}}));

  // Residual block: relu(bn(conv(relu(bn(conv(h))))) + h).
  OPFUSE_ASSIGN_OR_RETURN(Value* r, b.conv_bn(h, "block1.a", 16, 16, 3, 1));
  OPFUSE_ASSIGN_OR_RETURN(r, b.op("Relu", {r}, "block1.a.relu"));
  OPFUSE_ASSIGN_OR_RETURN(r, b.conv_bn(r, "block1.b", 16, 16, 3, 1));
  OPFUSE_ASSIGN_OR_RETURN(r, b.op("Add", {r, h}, "block1.add"));
  OPFUSE_ASSIGN_OR_RETURN(h, b.op("Relu", {r}, "block1.relu"));

  // Downsample with ReLU6, then a depthwise conv with HardSwish (MobileNet-style).
  OPFUSE_ASSIGN_OR_RETURN(h, b.conv_bn(h, "down", 16, 32, 3, 2));
  Value* lo = g.add_constant("relu6.min", Tensor::scalar(0.0f));
  Value* hi = g.add_constant("relu6.max", Tensor::scalar(6.0f));
  OPFUSE_ASSIGN_OR_RETURN(h, b.op("Clip", {h, lo, hi}, "down.relu6"));
  OPFUSE_ASSIGN_OR_RETURN(h, b.conv_bn(h, "dw", 32, 32, 3, 1, /*group=*/32));
  OPFUSE_ASSIGN_OR_RETURN(h, b.op("HardSwish", {h}, "dw.hardswish"));

  // Classifier head.
  OPFUSE_ASSIGN_OR_RETURN(h, b.op("GlobalAveragePool", {h}, "head.pool"));
  OPFUSE_ASSIGN_OR_RETURN(h, b.op("Flatten", {h}, "head.flatten", {{"axis", int64_t{1}}}));
  Value* fc_w = b.weight("head.fc.weight", {10, 32}, 0.3);
  Value* fc_b = b.weight("head.fc.bias", {10}, 0.1);
  OPFUSE_ASSIGN_OR_RETURN(h, b.op("Gemm", {h, fc_w, fc_b}, "head.fc", {{"transB", int64_t{1}}}));
  OPFUSE_ASSIGN_OR_RETURN(h, b.op("Softmax", {h}, "probabilities", {{"axis", int64_t{-1}}}));
  g.add_output(h);
  OPFUSE_TRY(infer_shapes(g));
  return g;
}

}  // namespace opfuse

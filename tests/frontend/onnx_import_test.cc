// The ONNX importer, on tiny models built here with the protobuf API. Ops come from a test-only
// domain registered below, so these tests do not depend on which built-in ops exist.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "frontend/onnx/graph_builder.h"
#include "frontend/onnx/importer.h"
#include "frontend/onnx/tensor_proto.h"
#include "ops/registry.h"
#include "ops/eager.h"
#include "testing/onnx_builders.h"

namespace opfuse {
namespace {

namespace fs = std::filesystem;
constexpr const char* kTestDomain = "test.opfuse.import";

// ---- test-only ops -------------------------------------------------------------------------

Status identity_infer(InferContext& ctx) {
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
  return Status::ok();
}
Status identity_kernel(KernelContext& ctx) {
  ctx.set_output(0, ctx.input(0));
  return Status::ok();
}

// Squeeze-13 semantics (axes as an optional i64 input), for the canonicalisation test when the
// built-in Squeeze is not registered.
Status squeeze_infer(InferContext& ctx) {
  const auto& shape = ctx.input_shape(0);
  const Tensor* axes = ctx.input_constant(1);
  if (!shape || !axes) {
    ctx.set_output(0, ctx.input_dtype(0), std::nullopt);
    return Status::ok();
  }
  std::vector<int64_t> drop = axes->to_int_vector();
  Shape out;
  for (int64_t i = 0; i < static_cast<int64_t>(shape->size()); ++i) {
    bool dropped = false;
    for (int64_t a : drop) dropped |= (a < 0 ? a + static_cast<int64_t>(shape->size()) : a) == i;
    if (!dropped) out.push_back((*shape)[i]);
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
  return Status::ok();
}
Status squeeze_kernel(KernelContext& ctx) { return ctx.error("not used in these tests"); }

void register_test_ops() {
  static const bool once = [] {
    OpDef id;
    id.name = "TestIdentity";
    id.domain = kTestDomain;
    id.min_opset = 1;
    id.max_opset = 1;
    id.min_outputs = 1;
    id.attrs = {AttrSpec{"alpha", AttrType::kFloat, AttrValue(1.0f)}};
    id.infer = identity_infer;
    id.reference = identity_kernel;
    EXPECT_TRUE(OpRegistry::global().add(id).is_ok());
    if (OpRegistry::global().find("", "Squeeze") == nullptr) {
      OpDef sq;
      sq.name = "Squeeze";
      sq.min_inputs = 1;
      sq.max_inputs = 2;
      sq.infer = squeeze_infer;
      sq.reference = squeeze_kernel;
      EXPECT_TRUE(OpRegistry::global().add(sq).is_ok());
    }
    return true;
  }();
  (void)once;
}

// ---- model construction ----------------------------------------------------------------------

onnx::ModelProto base_model(int64_t opset = 13) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  auto* test = m.add_opset_import();
  test->set_domain(kTestDomain);
  test->set_version(1);
  m.mutable_graph()->set_name("g");
  return m;
}

void add_input(onnx::ModelProto& m, const std::string& name, const std::vector<int64_t>& dims,
               int elem_type = onnx::TensorProto::FLOAT) {
  testing_onnx::add_value_info(m.mutable_graph()->mutable_input(), name, dims, elem_type);
}
void add_output(onnx::ModelProto& m, const std::string& name) {
  m.mutable_graph()->add_output()->set_name(name);
}
// Nodes default to the test domain here.
onnx::NodeProto* add_node(onnx::ModelProto& m, const std::string& op, std::vector<std::string> in,
                          std::vector<std::string> out, const std::string& name = "",
                          const std::string& domain = kTestDomain) {
  return testing_onnx::add_node(m, op, std::move(in), std::move(out), name, domain);
}
using testing_onnx::add_float_initializer;
using testing_onnx::add_raw_initializer;

// x -> TestIdentity -> y, with a weight initializer.
onnx::ModelProto identity_model() {
  onnx::ModelProto m = base_model();
  add_input(m, "x", {2, 3});
  std::vector<float> w(64, 0.5f);
  add_float_initializer(m, "w", {64}, w);
  add_node(m, "TestIdentity", {"x"}, {"y"}, "id");
  add_output(m, "y");
  return m;
}

Result<Graph> load(const onnx::ModelProto& m, const std::string& base_dir = "") {
  register_test_ops();
  std::string bytes;
  EXPECT_TRUE(m.SerializeToString(&bytes));
  return load_onnx_bytes(bytes, base_dir, {}, "test.onnx");
}

class OnnxImportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_test_ops();
    dir_ = fs::temp_directory_path() /
           str_cat("opfuse_onnx_import_", getpid(), "_",
                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write_file(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  std::string write_model(const onnx::ModelProto& m, const std::string& name = "model.onnx") {
    std::string bytes;
    EXPECT_TRUE(m.SerializeToString(&bytes));
    return write_file(name, bytes);
  }

  fs::path dir_;
};

// Asserts a user error whose message contains every one of `parts`.
void expect_user_error(const Status& s, const std::vector<std::string>& parts) {
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.kind(), ErrorKind::kUser) << s.message();
  for (const std::string& p : parts) {
    EXPECT_NE(s.message().find(p), std::string::npos) << "'" << p << "' not in: " << s.message();
  }
}

// ---- file-level errors -----------------------------------------------------------------------

// Initializers of 64 KiB and more are read from the mapped file straight into tensors, the rest
// of the model parsed without their bytes (importer.cc, kCutRawDataBytes).
TEST_F(OnnxImportTest, LargeInitializersAreReadFromTheFileAsWritten) {
  onnx::ModelProto m = base_model();
  add_input(m, "x", {1, 40000});
  std::string big(40000 * sizeof(float), '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 131 + 7) % 251);
  add_raw_initializer(m, "big", onnx::TensorProto::FLOAT, {1, 40000}, big);
  add_raw_initializer(m, "flags", onnx::TensorProto::BOOL, {70000}, std::string(70000, '\x02'));
  add_float_initializer(m, "small", {2}, {1, 2});
  add_node(m, "TestIdentity", {"x"}, {"y"});
  add_output(m, "y");
  auto g = load_onnx_file(write_model(m));
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const Tensor& loaded = *g->find_value("big")->constant();
  ASSERT_EQ(loaded.dims(), (std::vector<int64_t>{1, 40000}));
  EXPECT_EQ(std::memcmp(loaded.raw_data(), big.data(), big.size()), 0);
  const Tensor& flags = *g->find_value("flags")->constant();
  EXPECT_EQ(flags.data<bool>()[69999], true);
  EXPECT_EQ(*reinterpret_cast<const uint8_t*>(flags.raw_data()), 1) << "bools normalised to 0/1";
  EXPECT_EQ(g->find_value("small")->constant()->data<float>()[1], 2.0f);
  auto from_bytes = load(m);  // load_onnx_bytes: the same cut, without a file
  ASSERT_TRUE(from_bytes.is_ok()) << from_bytes.status().message();
  EXPECT_EQ(std::memcmp(from_bytes->find_value("big")->constant()->raw_data(), big.data(), big.size()), 0);

  // A size the bytes do not match is named as before.
  m.mutable_graph()->mutable_initializer(0)->set_dims(1, 40001);
  expect_user_error(load_onnx_file(write_model(m, "short.onnx")).status(),
                    {"initializer 'big'", "raw_data holds 160000"});
}

TEST_F(OnnxImportTest, TruncatedFileIsNotAValidModel) {
  std::string bytes;
  ASSERT_TRUE(identity_model().SerializeToString(&bytes));
  // The graph (with a 256-byte weight) is most of the file; cutting at half lands inside it.
  const std::string path = write_file("truncated.onnx", bytes.substr(0, bytes.size() / 2));
  expect_user_error(load_onnx_file(path).status(),
                    {path, "is not a valid ONNX model (protobuf parse failed"});
}

TEST_F(OnnxImportTest, RandomBytesAreNotAValidModel) {
  std::mt19937 rng(1234);
  std::string bytes(4096, '\0');
  for (char& c : bytes) c = static_cast<char>(rng() & 0xff);
  const std::string path = write_file("random.onnx", bytes);
  expect_user_error(load_onnx_file(path).status(),
                    {path, "is not a valid ONNX model (protobuf parse failed"});
}

TEST_F(OnnxImportTest, EmptyFileIsNotAValidModel) {
  const std::string path = write_file("empty.onnx", "");
  expect_user_error(load_onnx_file(path).status(),
                    {path, "is not a valid ONNX model (protobuf parse failed", "empty"});
}

TEST_F(OnnxImportTest, MissingFileNamesThePath) {
  const std::string path = (dir_ / "nope.onnx").string();
  expect_user_error(load_onnx_file(path).status(), {path, "does not exist"});
}

TEST_F(OnnxImportTest, ValidFileLoads) {
  const std::string path = write_model(identity_model());
  Result<Graph> g = load_onnx_file(path);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  ASSERT_EQ(g->inputs().size(), 1u);
  ASSERT_EQ(g->outputs().size(), 1u);
  EXPECT_EQ(g->outputs()[0]->name(), "y");
  EXPECT_EQ(g->outputs()[0]->type_string(), "f32[2,3]");
  EXPECT_EQ(g->name, "g");
  EXPECT_EQ(g->opset_imports.at(""), 13);
  EXPECT_EQ(g->opset_imports.at(kTestDomain), 1);
  ASSERT_NE(g->find_value("w"), nullptr);
  EXPECT_TRUE(g->find_value("w")->is_constant());
}

// The importer holds a model's weights once: each initializer's raw bytes leave the parsed model
// as they become the graph's constant (load_onnx_file also frees the file's bytes after parsing;
// bert_base's peak RSS at load went 1041 -> 720 MB).
TEST_F(OnnxImportTest, InitializerBytesLeaveTheParsedModelOnceTheyAreConstants) {
  onnx::ModelProto m = identity_model();
  const float values[3] = {1.5f, -2.0f, 1e-40f};
  add_raw_initializer(m, "raw", onnx::TensorProto::FLOAT, {3},
                      std::string(reinterpret_cast<const char*>(values), sizeof(values)));
  Result<Graph> g = onnx_import::build_graph(m, "", {});
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_FALSE(m.graph().initializer(1).has_raw_data());
  EXPECT_EQ(m.graph().initializer(1).name(), "raw");
  const Tensor* c = g->find_value("raw")->constant();
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->numel(), 3);
  EXPECT_EQ(std::memcmp(c->data<float>(), values, sizeof(values)), 0);
}

// ---- ops, opsets, attributes -----------------------------------------------------------------

TEST_F(OnnxImportTest, UnsupportedOpNamesOpDomainOpsetAndNode) {
  onnx::ModelProto m = identity_model();
  add_node(m, "NoSuchOp", {"y"}, {"z"}, "mynode", "");
  const std::string path = write_model(m);
  expect_user_error(load_onnx_file(path).status(),
                    {path, "node 'mynode' (index 1)", "op NoSuchOp (domain ai.onnx, opset 13)",
                     "is not supported"});
}

TEST_F(OnnxImportTest, UnnamedNodeGetsGeneratedName) {
  onnx::ModelProto m = identity_model();
  add_node(m, "NoSuchOp", {"y"}, {"z"}, "", "");
  expect_user_error(load(m).status(), {"node 'NoSuchOp_1' (index 1)"});

  onnx::ModelProto ok = base_model();
  add_input(ok, "x", {2});
  add_node(ok, "TestIdentity", {"x"}, {"y"});
  add_output(ok, "y");
  Result<Graph> g = load(ok);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  ASSERT_EQ(g->num_nodes(), 1u);
  EXPECT_EQ(g->nodes()[0]->name(), "TestIdentity_0");
}

TEST_F(OnnxImportTest, OpOutsideItsOpsetRangeIsUnsupported) {
  onnx::ModelProto m = identity_model();
  m.mutable_opset_import(1)->set_version(2);  // TestIdentity covers opset 1 only
  expect_user_error(load(m).status(), {"node 'id' (index 0)", "op TestIdentity", kTestDomain,
                                       "opset 2", "not supported"});
}

TEST_F(OnnxImportTest, UnsupportedDefaultOpsetIsNamed) {
  onnx::ModelProto m = identity_model();
  m.mutable_opset_import(0)->set_version(22);
  expect_user_error(load(m).status(), {"opset 22", "ai.onnx", "not supported"});
}

TEST_F(OnnxImportTest, DomainNotImportedIsAnError) {
  onnx::ModelProto m = identity_model();
  m.mutable_opset_import()->RemoveLast();
  expect_user_error(load(m).status(), {"node 'id'", kTestDomain, "does not import"});
}

TEST_F(OnnxImportTest, AttributesConvertAndUnknownOnesAreRejected) {
  onnx::ModelProto m = identity_model();
  auto* a = m.mutable_graph()->mutable_node(0)->add_attribute();
  a->set_name("alpha");
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(2.5f);
  Result<Graph> g = load(m);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(std::get<float>(g->find_node("id")->attrs.at("alpha")), 2.5f);

  auto* bad = m.mutable_graph()->mutable_node(0)->add_attribute();
  bad->set_name("beta");
  bad->set_type(onnx::AttributeProto::INT);
  bad->set_i(1);
  expect_user_error(load(m).status(), {"node 'id'", "attribute 'beta'", "not supported"});
}

TEST_F(OnnxImportTest, AttributeOfTheWrongTypeIsRejected) {
  onnx::ModelProto m = identity_model();
  auto* a = m.mutable_graph()->mutable_node(0)->add_attribute();
  a->set_name("alpha");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(2);
  expect_user_error(load(m).status(), {"node 'id'", "attribute 'alpha'", "int", "float"});
}

// Subgraphs are read for If, Loop and Scan; on any other op a graph attribute is refused like
// any attribute the op does not take.
TEST_F(OnnxImportTest, AGraphAttributeOfAnOpWithoutBodiesIsNamed) {
  onnx::ModelProto m = identity_model();
  auto* a = m.mutable_graph()->mutable_node(0)->add_attribute();
  a->set_name("body");
  a->set_type(onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name("sub");
  expect_user_error(load(m).status(), {"node 'id'", "attribute 'body'", "not supported"});
}

// ---- tensors -----------------------------------------------------------------------------

TEST_F(OnnxImportTest, TensorClaimingMoreElementsThanItsBytesIsAnError) {
  onnx::ModelProto m = identity_model();
  add_raw_initializer(m, "short_raw", onnx::TensorProto::FLOAT, {10}, std::string(8, '\0'));  // 2 floats, not 10
  expect_user_error(load(m).status(), {"initializer 'short_raw'", "40 bytes", "holds 8"});

  onnx::ModelProto m2 = identity_model();
  add_float_initializer(m2, "short_typed", {3}, {1.0f, 2.0f});
  expect_user_error(load(m2).status(), {"initializer 'short_typed'", "float_data", "holds 2"});
}

TEST_F(OnnxImportTest, TrillionElementClaimFailsBeforeAllocating) {
  onnx::ModelProto m = identity_model();
  add_float_initializer(m, "huge", {1000000, 1000000}, {1.0f});
  Status s = load(m).status();
  expect_user_error(s, {"initializer 'huge'", "1000000000000 elements", "holds 1"});
  // Had the importer tried to allocate first, the allocation cap would have been the complaint.
  EXPECT_EQ(s.message().find("allocation cap"), std::string::npos) << s.message();

  onnx::ModelProto raw = identity_model();
  add_raw_initializer(raw, "huge_raw", onnx::TensorProto::INT64, {1000000, 1000000}, std::string(16, '\0'));
  s = load(raw).status();
  expect_user_error(s, {"initializer 'huge_raw'", "8000000000000 bytes", "holds 16"});
  EXPECT_EQ(s.message().find("allocation cap"), std::string::npos) << s.message();
}

TEST_F(OnnxImportTest, DimsOverflowIsAnError) {
  onnx::ModelProto m = identity_model();
  add_float_initializer(m, "overflow", {int64_t{1} << 40, int64_t{1} << 40}, {1.0f});
  expect_user_error(load(m).status(), {"initializer 'overflow'", "overflows"});

  onnx::ModelProto neg = identity_model();
  add_float_initializer(neg, "negative", {-3}, {});
  expect_user_error(load(neg).status(), {"initializer 'negative'", "negative"});
}

TEST_F(OnnxImportTest, StringTensorsAreUnsupported) {
  onnx::ModelProto m = identity_model();
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name("words");
  t->set_data_type(onnx::TensorProto::STRING);
  t->add_dims(1);
  t->add_string_data("hello");
  expect_user_error(load(m).status(), {"initializer 'words'", "string", "not supported"});
}

TEST_F(OnnxImportTest, TypedFieldsOfEveryDtypeConvert) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::INT8);
  t.add_dims(3);
  for (int v : {-128, 5, 127}) t.add_int32_data(v);
  Result<Tensor> i8 = onnx_import::tensor_from_proto(t, "", "t");
  ASSERT_TRUE(i8.is_ok()) << i8.status().message();
  EXPECT_EQ(i8->dtype(), DType::kI8);
  EXPECT_EQ(i8->to_int_vector(), (std::vector<int64_t>{-128, 5, 127}));

  t.set_data_type(onnx::TensorProto::FLOAT16);
  t.clear_int32_data();
  for (int bits : {0x3c00, 0xc000, 0x3800}) t.add_int32_data(bits);  // 1.0, -2.0, 0.5
  Result<Tensor> f16 = onnx_import::tensor_from_proto(t, "", "t");
  ASSERT_TRUE(f16.is_ok()) << f16.status().message();
  EXPECT_EQ(f16->to_float_vector(), (std::vector<float>{1.0f, -2.0f, 0.5f}));

  t.set_data_type(onnx::TensorProto::BOOL);
  t.clear_int32_data();
  for (int v : {0, 1, 7}) t.add_int32_data(v);
  Result<Tensor> b = onnx_import::tensor_from_proto(t, "", "t");
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  EXPECT_EQ(b->to_int_vector(), (std::vector<int64_t>{0, 1, 1}));

  onnx::TensorProto u;
  u.set_data_type(onnx::TensorProto::UINT32);
  u.add_dims(2);
  u.add_uint64_data(4000000000u);
  u.add_uint64_data(7);
  Result<Tensor> u32 = onnx_import::tensor_from_proto(u, "", "u");
  ASSERT_TRUE(u32.is_ok()) << u32.status().message();
  EXPECT_EQ(u32->dtype(), DType::kU32);
  EXPECT_EQ(u32->data<uint32_t>()[0], 4000000000u);

  onnx::TensorProto d;
  d.set_data_type(onnx::TensorProto::DOUBLE);
  d.add_dims(2);
  double raw[2] = {1.5, -0.25};
  d.set_raw_data(std::string(reinterpret_cast<const char*>(raw), sizeof raw));
  Result<Tensor> f64 = onnx_import::tensor_from_proto(d, "", "d");
  ASSERT_TRUE(f64.is_ok()) << f64.status().message();
  EXPECT_EQ(f64->get_double(1), -0.25);

  onnx::TensorProto bf;
  bf.set_data_type(onnx::TensorProto::BFLOAT16);
  bf.add_dims(1);
  bf.add_int32_data(0);
  expect_user_error(onnx_import::tensor_from_proto(bf, "", "tensor 'bf'").status(),
                    {"tensor 'bf'", "BFLOAT16", "not supported"});
}

// ---- external data ---------------------------------------------------------------------------

onnx::TensorProto* add_external_initializer(onnx::ModelProto& m, const std::string& name,
                                            const std::string& location, int64_t count,
                                            int64_t offset) {
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(count);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* loc = t->add_external_data();
  loc->set_key("location");
  loc->set_value(location);
  auto* off = t->add_external_data();
  off->set_key("offset");
  off->set_value(std::to_string(offset));
  auto* len = t->add_external_data();
  len->set_key("length");
  len->set_value(std::to_string(count * 4));
  return t;
}

TEST_F(OnnxImportTest, ExternalDataLoads) {
  const float values[3] = {1.5f, -2.0f, 3.25f};
  std::string data(8, 'x');  // 8 junk bytes before the tensor
  data.append(reinterpret_cast<const char*>(values), sizeof values);
  fs::create_directories(dir_ / "weights");
  write_file("weights/w.bin", data);
  onnx::ModelProto m = identity_model();
  add_external_initializer(m, "ext", "weights/w.bin", 3, 8);
  add_output(m, "ext");
  Result<Graph> g = load_onnx_file(write_model(m));
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const Value* ext = g->find_value("ext");
  ASSERT_NE(ext, nullptr);
  ASSERT_TRUE(ext->is_constant());
  EXPECT_EQ(ext->constant()->to_float_vector(), (std::vector<float>{1.5f, -2.0f, 3.25f}));
  EXPECT_TRUE(ext->is_graph_output());  // an initializer may be a graph output
}

TEST_F(OnnxImportTest, MissingExternalDataFileIsNamed) {
  onnx::ModelProto m = identity_model();
  add_external_initializer(m, "ext", "missing_weights.bin", 3, 0);
  expect_user_error(load_onnx_file(write_model(m)).status(),
                    {"initializer 'ext'", "missing_weights.bin", "does not exist"});
}

TEST_F(OnnxImportTest, ExternalDataRangeBeyondTheFileIsAnError) {
  write_file("small.bin", std::string(12, '\0'));
  onnx::ModelProto m = identity_model();
  add_external_initializer(m, "ext", "small.bin", 3, 4);  // needs bytes [4, 16) of 12
  expect_user_error(load_onnx_file(write_model(m)).status(),
                    {"initializer 'ext'", "small.bin", "beyond the end"});
}

TEST_F(OnnxImportTest, ExternalDataEscapingTheModelDirectoryIsRejected) {
  write_file("w.bin", std::string(12, '\0'));
  for (const std::string location : {"../w.bin", "sub/../../w.bin", "..\\w.bin"}) {
    onnx::ModelProto m = identity_model();
    add_external_initializer(m, "ext", location, 3, 0);
    expect_user_error(load_onnx_file(write_model(m)).status(),
                      {"initializer 'ext'", location, ".."});
  }
  onnx::ModelProto m = identity_model();
  const std::string absolute = (dir_ / "w.bin").string();
  add_external_initializer(m, "ext", absolute, 3, 0);
  expect_user_error(load_onnx_file(write_model(m)).status(),
                    {"initializer 'ext'", absolute, "absolute"});
}

// ---- graph structure -------------------------------------------------------------------------

TEST_F(OnnxImportTest, SymbolicInputDimsStaySymbolic) {
  onnx::ModelProto m = base_model();
  testing_onnx::add_symbolic_value_info(m.mutable_graph()->mutable_input(), "x", {"batch", int64_t{3}, ""},
                                        onnx::TensorProto::INT64);
  add_node(m, "TestIdentity", {"x"}, {"y"}, "id");
  add_output(m, "y");
  Result<Graph> g = load(m);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const Value* x = g->inputs().at(0);
  EXPECT_EQ(x->dtype, DType::kI64);
  ASSERT_TRUE(x->shape.has_value());
  ASSERT_EQ(x->shape->size(), 3u);
  EXPECT_TRUE((*x->shape)[0].is_symbolic());
  EXPECT_EQ((*x->shape)[0].symbol_name(), "batch");
  EXPECT_EQ((*x->shape)[1], Dim(3));
  EXPECT_FALSE((*x->shape)[2].is_known());
  EXPECT_FALSE((*x->shape)[2].is_symbolic());
  // Shape inference carries the symbol through.
  EXPECT_EQ(g->outputs()[0]->type_string(), "i64[batch,3,?]");
}

TEST_F(OnnxImportTest, InputWithoutShapeHasUnknownRank) {
  onnx::ModelProto m = base_model();
  auto* in = m.mutable_graph()->add_input();
  in->set_name("x");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  add_node(m, "TestIdentity", {"x"}, {"y"}, "id");
  add_output(m, "y");
  Result<Graph> g = load(m);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_FALSE(g->inputs().at(0)->shape.has_value());
}

TEST_F(OnnxImportTest, InitializerThatIsAlsoAGraphInputIsAConstant) {
  onnx::ModelProto m = base_model();
  add_input(m, "x", {2});
  add_input(m, "w", {2});
  add_float_initializer(m, "w", {2}, {4.0f, 5.0f});
  add_node(m, "TestIdentity", {"w"}, {"y"}, "id");
  add_output(m, "y");
  add_output(m, "x");  // a graph input may be a graph output
  Result<Graph> g = load(m);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  ASSERT_EQ(g->inputs().size(), 1u);
  EXPECT_EQ(g->inputs()[0]->name(), "x");
  const Value* w = g->find_value("w");
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->is_constant());
  EXPECT_FALSE(w->is_graph_input());
  EXPECT_EQ(w->constant()->to_float_vector(), (std::vector<float>{4.0f, 5.0f}));
  EXPECT_EQ(g->outputs()[1], g->inputs()[0]);
}

TEST_F(OnnxImportTest, ConstantNodesBecomeConstantValues) {
  onnx::ModelProto m = base_model();
  auto* c = add_node(m, "Constant", {}, {"k"}, "c", "");
  auto* a = c->add_attribute();
  a->set_name("value_ints");
  a->set_type(onnx::AttributeProto::INTS);
  a->add_ints(7);
  a->add_ints(-1);
  add_node(m, "TestIdentity", {"k"}, {"y"}, "id");
  add_output(m, "y");
  Result<Graph> g = load(m);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(g->num_nodes(), 1u);
  const Value* k = g->find_value("k");
  ASSERT_TRUE(k && k->is_constant());
  EXPECT_EQ(k->type_string(), "i64[2]");
  EXPECT_EQ(k->constant()->to_int_vector(), (std::vector<int64_t>{7, -1}));
}

TEST_F(OnnxImportTest, NodesOutOfOrderAreSortedAndCyclesRejected) {
  onnx::ModelProto m = base_model();
  add_input(m, "x", {2});
  add_node(m, "TestIdentity", {"a"}, {"b"}, "second");
  add_node(m, "TestIdentity", {"x"}, {"a"}, "first");
  add_output(m, "b");
  Result<Graph> g = load(m);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  ASSERT_EQ(g->num_nodes(), 2u);
  EXPECT_EQ(g->nodes()[0]->name(), "first");
  EXPECT_EQ(g->nodes()[1]->name(), "second");

  onnx::ModelProto cyc = base_model();
  add_input(cyc, "x", {2});
  add_node(cyc, "TestIdentity", {"b"}, {"a"}, "p");
  add_node(cyc, "TestIdentity", {"a"}, {"b"}, "q");
  add_output(cyc, "b");
  expect_user_error(load(cyc).status(), {"cycle", "node 'p'"});
}

TEST_F(OnnxImportTest, UndefinedNodeInputOrGraphOutputIsNamed) {
  onnx::ModelProto m = base_model();
  add_input(m, "x", {2});
  add_node(m, "TestIdentity", {"ghost"}, {"y"}, "id");
  add_output(m, "y");
  expect_user_error(load(m).status(), {"node 'id'", "input 'ghost'"});

  onnx::ModelProto out = identity_model();
  add_output(out, "nowhere");
  expect_user_error(load(out).status(), {"graph output 'nowhere'", "not produced"});
}

TEST_F(OnnxImportTest, SequenceInputsAreUnsupported) {
  onnx::ModelProto m = base_model();
  auto* in = m.mutable_graph()->add_input();
  in->set_name("seq");
  in->mutable_type()
      ->mutable_sequence_type()
      ->mutable_elem_type()
      ->mutable_tensor_type()
      ->set_elem_type(onnx::TensorProto::FLOAT);
  add_output(m, "seq");
  expect_user_error(load(m).status(), {"graph input 'seq'", "sequence", "not supported"});
}

// ---- canonicalisation ------------------------------------------------------------------------

TEST_F(OnnxImportTest, OldOpsetSqueezeAxesAttributeBecomesAnInput) {
  onnx::ModelProto m = base_model(11);
  add_input(m, "x", {1, 3, 1});
  auto* sq = add_node(m, "Squeeze", {"x"}, {"y"}, "sq", "");
  auto* axes = sq->add_attribute();
  axes->set_name("axes");
  axes->set_type(onnx::AttributeProto::INTS);
  axes->add_ints(0);
  axes->add_ints(-1);
  add_output(m, "y");
  Result<Graph> g = load(m);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  ASSERT_EQ(g->num_nodes(), 1u);
  const Node* node = g->nodes()[0];
  EXPECT_EQ(node->op_type(), "Squeeze");
  EXPECT_TRUE(node->attrs.empty());
  ASSERT_EQ(node->inputs().size(), 2u);
  const Value* axes_value = node->input(1);
  ASSERT_TRUE(axes_value->is_constant());
  EXPECT_EQ(axes_value->constant()->type_string(), "i64[2]");
  EXPECT_EQ(axes_value->constant()->to_int_vector(), (std::vector<int64_t>{0, -1}));
  EXPECT_EQ(g->outputs()[0]->type_string(), "f32[3]");

  // At opset 13 an axes attribute is not Squeeze's and is rejected.
  m.mutable_opset_import(0)->set_version(13);
  expect_user_error(load(m).status(), {"node 'sq'", "attribute 'axes'", "not supported"});
}

bool ops_registered(std::initializer_list<const char*> ops) {
  for (const char* op : ops) {
    if (OpRegistry::global().find("", op) == nullptr) return false;
  }
  return true;
}

onnx::ModelProto softmax11_model(int64_t axis) {
  onnx::ModelProto m = base_model(11);
  add_input(m, "x", {2, 3, 4});
  auto* sm = add_node(m, "Softmax", {"x"}, {"y"}, "sm", "");
  auto* a = sm->add_attribute();
  a->set_name("axis");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(axis);
  add_output(m, "y");
  return m;
}

// Softmax-11 with axis 1 on [2,3,4] is a softmax over each flattened row of 12; expected values
// from numpy: e = exp(x - max); e / sum(e) over x = arange(12) / 10 (both rows are equal since
// they differ by a constant).
TEST_F(OnnxImportTest, OldOpsetSoftmaxCoercesToTwoDimensions) {
  if (!ops_registered({"Softmax", "Flatten", "Shape", "Reshape"})) {
    GTEST_SKIP() << "Softmax, Flatten, Shape or Reshape is not registered";
  }
  // With a symbolic batch dim the shape to restore comes from a Shape node.
  onnx::ModelProto symbolic = softmax11_model(1);
  symbolic.mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_param("batch");
  Result<Graph> gs = load(symbolic);
  ASSERT_TRUE(gs.is_ok()) << gs.status().message();
  std::vector<std::string> ops;
  for (const Node* n : gs->nodes()) ops.push_back(n->op_type());
  std::sort(ops.begin(), ops.end());
  EXPECT_EQ(ops, (std::vector<std::string>{"Flatten", "Reshape", "Shape", "Softmax"}));
  EXPECT_EQ(gs->outputs()[0]->name(), "y");

  // With a static shape it is a constant, and the output shape is inferred.
  Result<Graph> g = load(softmax11_model(1));
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  ops.clear();
  for (const Node* n : g->nodes()) ops.push_back(n->op_type());
  std::sort(ops.begin(), ops.end());
  EXPECT_EQ(ops, (std::vector<std::string>{"Flatten", "Reshape", "Softmax"}));
  EXPECT_EQ(g->outputs()[0]->name(), "y");
  EXPECT_EQ(g->outputs()[0]->type_string(), "f32[2,3,4]");

  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i) x[i] = static_cast<float>(i) / 10;
  const std::vector<float> row = {4.5330003e-02f, 5.0097402e-02f, 5.5366196e-02f, 6.1189104e-02f,
                                  6.7624420e-02f, 7.4736543e-02f, 8.2596660e-02f, 9.1283426e-02f,
                                  1.0088378e-01f, 1.1149383e-01f, 1.2321974e-01f, 1.3617887e-01f};
  for (const Graph* graph : {&*g, &*gs}) {
    Result<TensorMap> out = run_eager(*graph, {{"x", Tensor::from_vector<float>({2, 3, 4}, x)}});
    ASSERT_TRUE(out.is_ok()) << out.status().message();
    EXPECT_EQ(out->at("y").type_string(), "f32[2,3,4]");
    const std::vector<float> y = out->at("y").to_float_vector();
    ASSERT_EQ(y.size(), 24u);
    for (int i = 0; i < 24; ++i) EXPECT_NEAR(y[i], row[i % 12], 1e-6) << i;
  }
}

// When the axis is the last dim the two opsets agree: one Softmax node, axis explicit.
TEST_F(OnnxImportTest, OldOpsetSoftmaxOnTheLastAxisStaysOneNode) {
  if (!ops_registered({"Softmax"})) GTEST_SKIP() << "Softmax is not registered";
  Result<Graph> g = load(softmax11_model(2));
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  ASSERT_EQ(g->num_nodes(), 1u);
  EXPECT_EQ(std::get<int64_t>(g->nodes()[0]->attrs.at("axis")), 2);
  Result<TensorMap> out = run_eager(
      *g,
      {{"x", Tensor::from_vector<float>({2, 3, 4}, std::vector<float>{0.0f, 0.1f, 0.2f, 0.3f})}});
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  // numpy: softmax([0, .1, .2, .3])
  const std::vector<float> expected = {2.1383822e-01f, 2.3632778e-01f, 2.6118261e-01f,
                                       2.8865141e-01f};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(out->at("y").to_float_vector()[i], expected[i], 1e-6);
}

TEST_F(OnnxImportTest, OldOpsetDropoutRatioAttributeBecomesAnInput) {
  if (!ops_registered({"Dropout"})) GTEST_SKIP() << "Dropout is not registered";
  onnx::ModelProto m = base_model(11);
  add_input(m, "x", {3});
  auto* d = add_node(m, "Dropout", {"x"}, {"y"}, "drop", "");
  auto* a = d->add_attribute();
  a->set_name("ratio");
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(0.25f);
  add_output(m, "y");
  Result<Graph> g = load(m);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const Node* node = g->nodes().at(0);
  EXPECT_TRUE(node->attrs.empty());
  ASSERT_EQ(node->inputs().size(), 2u);
  ASSERT_TRUE(node->input(1)->is_constant());
  EXPECT_EQ(node->input(1)->constant()->type_string(), "f32[]");
  EXPECT_EQ(node->input(1)->constant()->get_double(0), 0.25);
}

}  // namespace
}  // namespace opfuse

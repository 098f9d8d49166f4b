// Crafted hostile ONNX models, shared by the loader tests and the CLI exit-code tests: each case
// writes a model file (and any side files it needs) into a directory and says which words the
// error must contain. Built-in ops only (Relu, Add), so the CLI can load them too.
#pragma once

#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "testing/onnx_builders.h"

namespace opfuse::hostile {

namespace fs = std::filesystem;

inline onnx::ModelProto base_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(13);
  m.mutable_graph()->set_name("g");
  return m;
}

using testing_onnx::add_float_initializer;
using testing_onnx::add_raw_initializer;
using testing_onnx::add_node;
using testing_onnx::add_value_info;

// An f32 initializer whose bytes live in `location` (count floats at offset).
inline onnx::TensorProto* add_external(onnx::ModelProto& m, const std::string& name,
                                       const std::string& location, int64_t count,
                                       int64_t offset = 0) {
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(count);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  for (auto [key, value] : {std::pair<std::string, std::string>{"location", location},
                            {"offset", std::to_string(offset)},
                            {"length", std::to_string(count * 4)}}) {
    auto* e = t->add_external_data();
    e->set_key(key);
    e->set_value(value);
  }
  return t;
}

// y = Relu(x) + w with x: f32[4], w: f32[4] (a valid model the cases below break).
inline onnx::ModelProto add_model() {
  onnx::ModelProto m = base_model();
  add_value_info(m.mutable_graph()->mutable_input(), "x", {4});
  add_float_initializer(m, "w", {4}, {1, 2, 3, 4});
  add_node(m, "Relu", {"x"}, {"r"}, "relu");
  add_node(m, "Add", {"r", "w"}, {"y"}, "add");
  add_value_info(m.mutable_graph()->mutable_output(), "y", {4});
  return m;
}

inline std::string serialize(const onnx::ModelProto& m) {
  std::string bytes;
  m.SerializeToString(&bytes);
  return bytes;
}

inline void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

struct Case {
  std::string name;
  // Writes the model (and side files) under `dir` and returns the model's path.
  std::function<fs::path(const fs::path& dir)> write;
  std::vector<std::string> expect;  // words the error message must contain
};

// Writes `m` as dir/model/model.onnx (model files sit in their own directory so that "outside
// the model directory" has somewhere to point).
inline fs::path write_model(const fs::path& dir, const onnx::ModelProto& m) {
  fs::create_directories(dir / "model");
  write_bytes(dir / "model" / "model.onnx", serialize(m));
  return dir / "model" / "model.onnx";
}

// A model whose weight `w` is external data at `location` (relative to the model directory).
inline onnx::ModelProto external_model(const std::string& location) {
  onnx::ModelProto m = add_model();
  m.mutable_graph()->clear_initializer();
  add_external(m, "w", location, 4);
  return m;
}

inline std::vector<Case> cases() {
  const std::string sixteen(16, '\x01');  // four floats' worth of bytes
  return {
      {"truncated",
       [](const fs::path& dir) {
         std::string bytes = serialize(add_model());
         fs::create_directories(dir / "model");
         write_bytes(dir / "model" / "model.onnx", bytes.substr(0, bytes.size() / 2));
         return dir / "model" / "model.onnx";
       },
       {"not a valid ONNX model"}},
      {"cyclic_graph",
       [](const fs::path& dir) {
         onnx::ModelProto m = base_model();
         add_value_info(m.mutable_graph()->mutable_input(), "x", {4});
         add_node(m, "Add", {"x", "b"}, {"a"}, "p");
         add_node(m, "Relu", {"a"}, {"b"}, "q");
         add_value_info(m.mutable_graph()->mutable_output(), "b", {4});
         return write_model(dir, m);
       },
       {"cycle", "node 'p'"}},
      {"dangling_input",
       [](const fs::path& dir) {
         onnx::ModelProto m = add_model();
         m.mutable_graph()->mutable_node(1)->set_input(1, "ghost");
         return write_model(dir, m);
       },
       {"node 'add'", "input 'ghost'"}},
      {"duplicate_node_name",
       [](const fs::path& dir) {
         onnx::ModelProto m = add_model();
         m.mutable_graph()->mutable_node(1)->set_name("relu");
         return write_model(dir, m);
       },
       {"node 'relu' (index 1)", "already used", "index 0"}},
      {"duplicate_value",
       [](const fs::path& dir) {
         onnx::ModelProto m = add_model();
         add_node(m, "Relu", {"x"}, {"r"}, "relu2");
         return write_model(dir, m);
       },
       {"node 'relu2'", "output 'r'", "already defined"}},
      {"duplicate_initializer",
       [](const fs::path& dir) {
         onnx::ModelProto m = add_model();
         add_float_initializer(m, "w", {4}, {5, 6, 7, 8});
         return write_model(dir, m);
       },
       {"value 'w'", "more than once"}},
      {"initializer_type_mismatch",
       [](const fs::path& dir) {
         onnx::ModelProto m = add_model();
         add_value_info(m.mutable_graph()->mutable_input(), "w", {4}, onnx::TensorProto::INT64);
         return write_model(dir, m);
       },
       {"graph input 'w'", "declared i64[4]", "initializer is f32[4]"}},
      {"operand_type_mismatch",
       [](const fs::path& dir) {
         onnx::ModelProto m = add_model();
         m.mutable_graph()->clear_initializer();
         auto* t = m.mutable_graph()->add_initializer();
         t->set_name("w");
         t->set_data_type(onnx::TensorProto::INT64);
         t->add_dims(4);
         for (int i = 0; i < 4; ++i) t->add_int64_data(i);
         return write_model(dir, m);
       },
       {"'add'", "f32", "i64"}},
      {"declared_output_type_mismatch",
       [](const fs::path& dir) {
         onnx::ModelProto m = add_model();
         m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
             onnx::TensorProto::INT32);
         return write_model(dir, m);
       },
       {"'add'", "output 'y'", "declared i32", "produces f32"}},
      {"external_dotdot",
       [sixteen](const fs::path& dir) {
         write_bytes(dir / "w.bin", sixteen);
         return write_model(dir, external_model("../w.bin"));
       },
       {"initializer 'w'", "'../w.bin'", ".."}},
      {"external_absolute",
       [sixteen](const fs::path& dir) {
         write_bytes(dir / "w.bin", sixteen);
         return write_model(dir, external_model((dir / "w.bin").string()));
       },
       {"initializer 'w'", "absolute"}},
      {"external_symlink_file_out",
       [sixteen](const fs::path& dir) {
         write_bytes(dir / "secret.bin", sixteen);
         fs::path model = write_model(dir, external_model("w.bin"));
         fs::create_symlink(dir / "secret.bin", dir / "model" / "w.bin");
         return model;
       },
       {"initializer 'w'", "'w.bin'", "outside the model directory", "symbolic link"}},
      {"external_symlink_dir_out",
       [sixteen](const fs::path& dir) {
         fs::create_directories(dir / "elsewhere");
         write_bytes(dir / "elsewhere" / "w.bin", sixteen);
         fs::path model = write_model(dir, external_model("data/w.bin"));
         fs::create_directory_symlink(dir / "elsewhere", dir / "model" / "data");
         return model;
       },
       {"initializer 'w'", "'data/w.bin'", "outside the model directory"}},
      {"external_larger_than_file",
       [](const fs::path& dir) {
         fs::path model = write_model(dir, external_model("w.bin"));
         write_bytes(dir / "model" / "w.bin", std::string(12, '\0'));  // 3 floats, not 4
         return model;
       },
       {"initializer 'w'", "w.bin", "beyond the end"}},
      {"external_huge_claim",
       [](const fs::path& dir) {
         onnx::ModelProto m = add_model();
         m.mutable_graph()->clear_initializer();
         add_external(m, "w", "w.bin", int64_t{1} << 40);  // 4 TiB claimed, 16 bytes present
         fs::path model = write_model(dir, m);
         write_bytes(dir / "model" / "w.bin", std::string(16, '\0'));
         return model;
       },
       {"initializer 'w'", "beyond the end"}},
      {"overflowing_dims",
       [](const fs::path& dir) {
         onnx::ModelProto m = add_model();
         add_float_initializer(m, "big", {int64_t{1} << 40, int64_t{1} << 40}, {1.0f});
         return write_model(dir, m);
       },
       {"initializer 'big'", "overflows"}},
      {"trillion_elements_typed",
       [](const fs::path& dir) {
         onnx::ModelProto m = add_model();
         add_float_initializer(m, "big", {1000000, 1000000}, {1.0f});
         return write_model(dir, m);
       },
       {"initializer 'big'", "1000000000000 elements", "holds 1"}},
      {"trillion_elements_raw",
       [](const fs::path& dir) {
         onnx::ModelProto m = add_model();
         add_raw_initializer(m, "big", onnx::TensorProto::FLOAT, {1000000, 1000000}, std::string(16, '\0'));
         return write_model(dir, m);
       },
       {"initializer 'big'", "4000000000000 bytes", "holds 16"}},
  };
}

// Loads fine (nothing is allocated for an input) but cannot run within the allocation cap:
// y = Relu(x) + x with x: f32[1000000, 1000000] (4 TB).
inline onnx::ModelProto trillion_element_input_model() {
  onnx::ModelProto m = base_model();
  add_value_info(m.mutable_graph()->mutable_input(), "x", {1000000, 1000000});
  add_node(m, "Relu", {"x"}, {"r"}, "relu");
  add_node(m, "Add", {"r", "x"}, {"y"}, "add");
  add_value_info(m.mutable_graph()->mutable_output(), "y", {1000000, 1000000});
  return m;
}

// y = Relu(x) + x with x: f32[batch, 1000]: a batch of 10^9 at run time needs 4 TB.
inline onnx::ModelProto symbolic_batch_model() {
  onnx::ModelProto m = base_model();
  add_value_info(m.mutable_graph()->mutable_input(), "x", {1, 1000});
  auto* dim = m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()
                  ->mutable_shape()->mutable_dim(0);
  dim->set_dim_param("batch");
  add_node(m, "Relu", {"x"}, {"r"}, "relu");
  add_node(m, "Add", {"r", "x"}, {"y"}, "add");
  m.mutable_graph()->add_output()->set_name("y");
  return m;
}

}  // namespace opfuse::hostile

#include <iostream>

#include "commands.h"
#include "frontend/onnx/importer.h"
#include "report/model_summary.h"

namespace opfuse::cli {

Action add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Print a model's inputs, outputs, op histogram, "
                                         "parameter count and FLOPs");
  auto model = std::make_shared<std::string>();
  cmd->add_option("MODEL", *model, "ONNX model file")->required();
  return [model]() -> Status {
    OPFUSE_ASSIGN_OR_RETURN(Graph graph, load_onnx_file(*model));
    std::cout << "model: " << *model << "\n" << format_summary(graph, summarize(graph));
    return Status::ok();
  };
}

}  // namespace opfuse::cli

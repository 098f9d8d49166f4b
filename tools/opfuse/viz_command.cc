// `opfuse viz MODEL --level L -o out.{svg,html,dot,png}`: the graph before and after the level,
// fused kernels as clusters, refused candidates marked (report/graph_render.h). SVG and PNG go
// through Graphviz; a model too large for one picture writes out.svg, out.p2.svg, ...
#include <cstdio>
#include <filesystem>

#include "cli_common.h"
#include "commands.h"
#include "report/graph_render.h"

namespace opfuse::cli {
namespace {

struct VizArgs {
  std::string model;
  SessionFlags session;
  std::vector<std::string> dims;
  std::vector<std::string> binds;
  std::string output;
  bool force = false;
  size_t collapse_above = 150;
  size_t page_nodes = 200;
};

// out.svg -> out.p2.svg for page 2.
std::string page_path(const std::string& path, size_t page) {
  if (page == 0) return path;
  const std::filesystem::path p(path);
  return (p.parent_path() / str_cat(p.stem().string(), ".p", page + 1, p.extension().string())).string();
}

Status viz(const VizArgs& args) {
  const std::string ext = std::filesystem::path(args.output).extension().string();
  if (ext != ".svg" && ext != ".html" && ext != ".dot" && ext != ".png") {
    return Status::user_error(str_cat("-o '", args.output, "': the extension picks the format: .svg, .html, .dot or .png"));
  }
  OPFUSE_TRY(check_can_write_output(args.output, args.force));
  OPFUSE_ASSIGN_OR_RETURN(FusionAnalysis analysis, analyze_model(args.model, args.session, args.dims, args.binds));
  const FusionReport report = make_fusion_report(analysis);
  RenderOptions options;
  options.collapse_above = args.collapse_above;
  options.page_nodes = args.page_nodes;
  const RenderedViews views = prepare_views(analysis, report, options);
  std::vector<std::string> written;
  if (ext == ".html") {
    OPFUSE_ASSIGN_OR_RETURN(std::string html,
                            render_html(views, report, std::filesystem::path(args.model).filename().string()));
    OPFUSE_TRY(write_output(args.output, html, args.force));
    written.push_back(args.output);
  } else if (ext == ".dot") {
    std::string dot;
    for (const std::string& page : side_by_side_pages(views)) dot += page;
    OPFUSE_TRY(write_output(args.output, dot, args.force));
    written.push_back(args.output);
  } else {
    const std::vector<std::string> pages = side_by_side_pages(views);
    for (size_t p = 1; p < pages.size(); ++p) OPFUSE_TRY(check_can_write_output(page_path(args.output, p), args.force));
    for (size_t p = 0; p < pages.size(); ++p) {
      OPFUSE_ASSIGN_OR_RETURN(std::string bytes, run_graphviz(pages[p], ext.substr(1)));
      OPFUSE_TRY(write_output(page_path(args.output, p), bytes, args.force));
      written.push_back(page_path(args.output, p));
    }
  }
  std::printf("before: %zu nodes, after: %zu nodes, %zu fused kernels, %zu refused candidates",
              analysis.before.num_nodes(), analysis.after.num_nodes(), report.kernels.size(), report.refused.size());
  if (views.hidden_before + views.hidden_after > 0) {
    std::printf(" (%zu + %zu nodes of repeated blocks collapsed)", views.hidden_before, views.hidden_after);
  }
  std::printf("\n");
  for (const std::string& w : written) std::printf("wrote %s\n", w.c_str());
  return Status::ok();
}

}  // namespace

Action add_viz_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("viz", "Draw the graph before and after a level: fused kernels as "
                                        "clusters, refused candidates marked (.svg .html .dot .png)");
  auto args = std::make_shared<VizArgs>();
  cmd->add_option("MODEL", args->model, "ONNX model file")->required();
  add_session_flags(cmd, args->session, "O2");
  cmd->add_option("--dim", args->dims, "SYMBOL=N: size of a symbolic dim (default 1)");
  add_bind_flag(cmd, args->binds);
  cmd->add_option("-o,--output", args->output, "out.svg, out.html, out.dot or out.png")->required();
  cmd->add_flag("--force", args->force, "overwrite existing files");
  cmd->add_option("--collapse-above", args->collapse_above,
                  "collapse repeated blocks of graphs with more nodes than this")->default_val(150);
  cmd->add_option("--page-nodes", args->page_nodes, "nodes per page for large graphs")->default_val(200);
  return [args] { return viz(*args); };
}

}  // namespace opfuse::cli

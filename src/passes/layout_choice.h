// Which layout each conv of the O3 layout pass runs in (passes/layout.cc), as a small labelling
// problem solved exactly: each node of the blocked subgraph takes label 0 (nChw16c) or 1
// (channels-last nhwc) at a per-node cost (a conv's measured time in each layout; 0 for ops whose
// speed we treat as layout-independent), and each group of nodes that share one tensor pays the
// group's cost once (a reorder of that tensor) when its members do not all have the same label.
#pragma once

#include <array>
#include <vector>

namespace opfuse {

struct LayoutProblem {
  struct Group {
    std::vector<int> members;  // node indices; a tensor's producer and readers
    double cost = 0;           // paid once when members disagree (one reorder)
  };
  std::vector<std::array<double, 2>> cost;  // per node: cost of label 0 and of label 1
  std::vector<Group> groups;
};

// Labels minimising total_cost; ties go to label 0.
std::vector<int> solve_layouts(const LayoutProblem& problem);

// The objective: every node's cost under its label, plus the cost of every mixed group.
double total_cost(const LayoutProblem& problem, const std::vector<int>& labels);

}  // namespace opfuse

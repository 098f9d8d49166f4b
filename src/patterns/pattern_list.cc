// Every pattern of opfuse, family by family. Order matters only among patterns with the same
// root op type and benefit (the earlier wins).
#include "patterns/families.h"

namespace opfuse::patterns {

const std::vector<Pattern>& all_patterns() {
  static const std::vector<Pattern> patterns = [] {
    std::vector<Pattern> all;
    for (auto family : {gelu_patterns, focus_patterns, anchor_affine_patterns, epilogue_patterns}) {
      for (Pattern& p : family()) all.push_back(std::move(p));
    }
    return all;
  }();
  return patterns;
}

}  // namespace opfuse::patterns

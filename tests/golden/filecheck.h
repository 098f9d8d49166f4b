// A small FileCheck for golden tests of passes: directives in `//` comments of a .ir file are
// matched in order against the printed result.
//   // RUN: passes=constant_fold,dce     (or level=O1; optional expect-error=<substring to end of line>
//                                        and elided=zeros|pattern for `const elided` inputs,
//                                        target=<ISA tier>, avx512_core unless given)
//   // CHECK: text        the next match at or after the previous match's end
//   // CHECK-NEXT: text   must match on the line right after the previous match
//   // CHECK-NOT: text    must not occur between the surrounding positive matches
//   // CHECK-DAG: text    consecutive DAG lines match in any order after the previous match
// A pattern is literal text; {{regex}} embeds an ECMAScript regex.
// Header-only because the tests target compiles only *_test.cc files.
#pragma once

#include <algorithm>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace opfuse::golden {

struct Directive {
  enum class Kind { kCheck, kNext, kNot, kDag };
  Kind kind;
  std::string pattern;
  int line;  // in the .ir file, for messages
};

struct RunSpec {
  std::optional<std::vector<std::string>> passes;
  std::string level;  // "O1"...; used when `passes` is not given
  std::optional<std::string> expect_error;
  std::string elided;  // "", "zeros", "pattern"
  std::string target = "avx512_core";  // the tier compiled for, whatever the host is
};

struct GoldenFile {
  RunSpec run;
  std::vector<Directive> directives;
};

inline std::string_view kind_name(Directive::Kind k) {
  switch (k) {
    case Directive::Kind::kCheck: return "CHECK";
    case Directive::Kind::kNext: return "CHECK-NEXT";
    case Directive::Kind::kNot: return "CHECK-NOT";
    case Directive::Kind::kDag: return "CHECK-DAG";
  }
  return "?";
}

inline std::string trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

inline std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) {
      if (start < text.size()) lines.emplace_back(text.substr(start));
      break;
    }
    lines.emplace_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

// Parses the RUN line and the CHECK directives; returns an error message or "".
inline std::string parse_golden(std::string_view text, GoldenFile& out) {
  const std::vector<std::string> lines = split_lines(text);
  bool have_run = false;
  static const std::pair<std::string_view, Directive::Kind> kPrefixes[] = {
      {"CHECK-NEXT:", Directive::Kind::kNext},
      {"CHECK-NOT:", Directive::Kind::kNot},
      {"CHECK-DAG:", Directive::Kind::kDag},
      {"CHECK:", Directive::Kind::kCheck},
  };
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string line = trim(lines[i]);
    if (line.rfind("//", 0) != 0) continue;
    const std::string body = trim(std::string_view(line).substr(2));
    const int line_no = static_cast<int>(i) + 1;
    if (body.rfind("RUN:", 0) == 0) {
      if (have_run) return "line " + std::to_string(line_no) + ": second RUN line";
      have_run = true;
      std::string rest = trim(std::string_view(body).substr(4));
      // expect-error= takes the rest of the line (messages contain spaces).
      if (size_t e = rest.find("expect-error="); e != std::string::npos) {
        out.run.expect_error = trim(std::string_view(rest).substr(e + 13));
        rest = rest.substr(0, e);
      }
      std::istringstream words(rest);
      std::string word;
      while (words >> word) {
        if (word.rfind("passes=", 0) == 0) {
          std::vector<std::string> passes;
          std::stringstream list(word.substr(7));
          std::string name;
          while (std::getline(list, name, ',')) {
            if (!name.empty()) passes.push_back(name);
          }
          out.run.passes = passes;
        } else if (word.rfind("level=", 0) == 0) {
          out.run.level = word.substr(6);
        } else if (word.rfind("elided=", 0) == 0) {
          out.run.elided = word.substr(7);
        } else if (word.rfind("target=", 0) == 0) {
          out.run.target = word.substr(7);
        } else {
          return "line " + std::to_string(line_no) + ": unknown RUN option '" + word + "'";
        }
      }
      if (!out.run.passes && out.run.level.empty()) {
        return "line " + std::to_string(line_no) + ": RUN needs passes=... or level=...";
      }
      continue;
    }
    for (const auto& [prefix, kind] : kPrefixes) {
      if (body.rfind(prefix, 0) == 0) {
        std::string pattern = trim(std::string_view(body).substr(prefix.size()));
        if (pattern.empty()) return "line " + std::to_string(line_no) + ": empty " + std::string(prefix);
        out.directives.push_back({kind, std::move(pattern), line_no});
        break;
      }
    }
  }
  if (!have_run) return "no `// RUN:` line";
  return "";
}

// A pattern as a regex: literal text escaped, {{...}} kept.
inline std::regex pattern_regex(const std::string& pattern) {
  std::string re;
  size_t i = 0;
  while (i < pattern.size()) {
    if (pattern.compare(i, 2, "{{") == 0) {
      const size_t end = pattern.find("}}", i + 2);
      if (end != std::string::npos) {
        re += "(?:" + pattern.substr(i + 2, end - i - 2) + ")";
        i = end + 2;
        continue;
      }
    }
    const char c = pattern[i++];
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) re += '\\';
    re += c;
  }
  return std::regex(re);
}

struct Pos {
  int line = 0;
  size_t col = 0;
  bool operator<(const Pos& o) const { return line != o.line ? line < o.line : col < o.col; }
  bool operator<=(const Pos& o) const { return !(o < *this); }
};

struct Match {
  Pos begin, end;
};

// The first match starting at or after `from` and ending at or before `to`.
inline std::optional<Match> find_match(const std::vector<std::string>& lines, const std::regex& re,
                                       Pos from, Pos to) {
  for (int l = from.line; l < static_cast<int>(lines.size()) && l <= to.line; ++l) {
    const size_t start = l == from.line ? from.col : 0;
    if (start > lines[l].size()) continue;
    std::smatch m;
    const std::string& s = lines[l];
    if (std::regex_search(s.begin() + static_cast<std::ptrdiff_t>(start), s.end(), m, re)) {
      Match match{{l, start + static_cast<size_t>(m.position(0))},
                  {l, start + static_cast<size_t>(m.position(0) + m.length(0))}};
      if (match.end <= to) return match;
    }
  }
  return std::nullopt;
}

// Checks the directives against `output`; returns "" or a message naming the failed directive.
inline std::string check_output(std::string_view output, const std::vector<Directive>& directives) {
  const std::vector<std::string> lines = split_lines(output);
  const Pos end_of_output{static_cast<int>(lines.size()), 0};
  Pos pos;
  int prev_line = -1;
  std::vector<const Directive*> nots;
  auto describe = [](const Directive& d) {
    return "line " + std::to_string(d.line) + " `" + std::string(kind_name(d.kind)) + ": " +
           d.pattern + "`";
  };
  // CHECK-NOTs pending since the last positive match must not occur in [pos, until).
  auto check_nots = [&](Pos until) -> std::string {
    for (const Directive* d : nots) {
      if (auto m = find_match(lines, pattern_regex(d->pattern), pos, until)) {
        return describe(*d) + " failed: found on output line " + std::to_string(m->begin.line + 1) +
               ": " + lines[m->begin.line];
      }
    }
    nots.clear();
    return "";
  };
  for (size_t i = 0; i < directives.size(); ++i) {
    const Directive& d = directives[i];
    switch (d.kind) {
      case Directive::Kind::kNot:
        nots.push_back(&d);
        break;
      case Directive::Kind::kCheck:
      case Directive::Kind::kNext: {
        std::optional<Match> m;
        if (d.kind == Directive::Kind::kNext) {
          if (prev_line < 0) return describe(d) + " has no previous match to follow";
          if (prev_line + 1 >= static_cast<int>(lines.size())) {
            return describe(d) + " failed: no line after output line " + std::to_string(prev_line + 1);
          }
          m = find_match(lines, pattern_regex(d.pattern), Pos{prev_line + 1, 0},
                         Pos{prev_line + 1, lines[prev_line + 1].size()});
          if (!m) {
            return describe(d) + " failed: output line " + std::to_string(prev_line + 2) +
                   " is: " + lines[prev_line + 1];
          }
        } else {
          m = find_match(lines, pattern_regex(d.pattern), pos, end_of_output);
          if (!m) {
            return describe(d) + " failed: not found after output line " +
                   std::to_string(pos.line + 1);
          }
        }
        if (std::string e = check_nots(m->begin); !e.empty()) return e;
        pos = m->end;
        prev_line = m->end.line;
        break;
      }
      case Directive::Kind::kDag: {
        // The group of consecutive DAG lines: each its own match, in any order, after `pos`.
        std::vector<Match> claimed;
        size_t j = i;
        for (; j < directives.size() && directives[j].kind == Directive::Kind::kDag; ++j) {
          const std::regex re = pattern_regex(directives[j].pattern);
          Pos from = pos;
          std::optional<Match> m;
          while ((m = find_match(lines, re, from, end_of_output))) {
            const bool overlaps = std::any_of(claimed.begin(), claimed.end(), [&](const Match& c) {
              return m->begin < c.end && c.begin < m->end;
            });
            if (!overlaps) break;
            from = Pos{m->begin.line, m->begin.col + 1};
          }
          if (!m) {
            return describe(directives[j]) + " failed: not found after output line " +
                   std::to_string(pos.line + 1);
          }
          claimed.push_back(*m);
        }
        Pos first = claimed[0].begin, last = claimed[0].end;
        for (const Match& c : claimed) {
          first = std::min(first, c.begin);
          last = std::max(last, c.end);
        }
        if (std::string e = check_nots(first); !e.empty()) return e;
        pos = last;
        prev_line = last.line;
        i = j - 1;
        break;
      }
    }
  }
  return check_nots(end_of_output);
}

}  // namespace opfuse::golden

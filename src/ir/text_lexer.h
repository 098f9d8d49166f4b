// Pieces shared by the text printer and parser: the token stream, and the spelling of names,
// strings and numbers (kept together so that what the printer writes is what the lexer reads).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace opfuse::text {

enum class TokenKind {
  kEnd,
  kIdent,      // [A-Za-z_][A-Za-z0-9_.]*: keywords, dtypes, op types, domains, dim symbols
  kNumber,     // -?[0-9]+(.[0-9]*)?([eE][+-]?[0-9]+)?
  kString,     // "..." with escapes; text holds the decoded bytes
  kValueName,  // %name or %"quoted"
  kGraphName,  // @name or @"quoted"
  kNodeName,   // #name or #"quoted"
  kPunct,      // ( ) [ ] { } < > , : = ? * - ::
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string text;
  int line = 1;
  int column = 1;
};

// Splits the whole text into tokens, ending with one kEnd token. `//` starts a comment.
// Errors name the line and column of the offending character.
Result<std::vector<Token>> lex(std::string_view text);

// How a token reads in an error message: "'('", "'%x'", "end of input".
std::string describe_token(const Token& token);

// True for names printed without quotes after a sigil: [A-Za-z0-9_.]+.
bool is_bare_name(std::string_view name);
// True for words printed without quotes where an identifier is expected (op types, domains,
// dim symbols, attribute names): [A-Za-z_][A-Za-z0-9_.]* and not a keyword of the syntax.
bool is_bare_ident(std::string_view word);

// "\"a\\\"b\"": escapes quote, backslash and non-printable bytes (\n, \t, \r, \xHH).
std::string quote(std::string_view s);
// `sigil` + name, quoting the name unless is_bare_name: %x, %"onnx::Conv_12".
std::string sigil_name(char sigil, std::string_view name);
// An identifier or, when it is not bare, a quoted string.
std::string ident_or_quoted(std::string_view word);

// Shortest text that parses back to the same bits ("0.1", "1e-05", "inf", "-inf", "nan").
// With `force_float`, finite values always contain '.' or 'e' so they do not read as integers.
std::string format_float(float v, bool force_float = false);
std::string format_double(double v);
std::string format_half(Half h);

}  // namespace opfuse::text

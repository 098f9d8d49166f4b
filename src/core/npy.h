// NumPy .npy files in and out (format versions 1.0-3.0, C order, little-endian numeric dtypes
// and bool): how `opfuse run` takes inputs and writes outputs.
#pragma once

#include <string>

#include "core/tensor.h"

namespace opfuse {

// Errors name the file and what is wrong with it (bad magic, unsupported dtype, Fortran order,
// truncated data ...).
Result<Tensor> read_npy(const std::string& path);
Result<Tensor> parse_npy(std::string_view bytes, const std::string& what);
// Writes atomically (core/file_io.h: a unique temporary file renamed into place); an existing
// file is replaced only with `overwrite`.
Status write_npy(const std::string& path, const Tensor& tensor, bool overwrite = true);
std::string encode_npy(const Tensor& tensor);

}  // namespace opfuse

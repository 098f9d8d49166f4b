// The Highway backend of FusedProgram (codegen/fused_program.h): a vectorised interpreter over
// cache-resident tiles, OpenMP over rows/tiles. How it runs a program: hwy_executor.cc.
#pragma once

#include "codegen/fused_program.h"

namespace opfuse::codegen {

const ProgramBackend& highway_backend();

}  // namespace opfuse::codegen

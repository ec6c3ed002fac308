// The build's floating type, the one name for it outside templated code (kernels and stages are
// templates over T): float, or double in a MINIPIPE_DOUBLE build.
#pragma once

namespace minipipe {

#ifdef MINIPIPE_DOUBLE
using Real = double;
#else
using Real = float;
#endif

}  // namespace minipipe

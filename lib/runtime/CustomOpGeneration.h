// A counter of changes to the custom-op registries, so that a caller can
// keep what a lookup returned and know when to look again.
// Library-internal.
#pragma once

#include <cstdint>

namespace mstep {

/// Changes (grows) whenever any CustomOpRegistry changes what its lookups
/// return: an op registered (a new name or version), a kernel added, an op
/// removed. Read it before a lookup: while it keeps that value, the lookup
/// would return the same op. Thread-safe.
uint64_t custom_op_registry_generation();

} // namespace mstep

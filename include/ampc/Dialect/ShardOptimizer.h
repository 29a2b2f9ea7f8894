//===- ShardOptimizer.h - ZeRO-1's marker in the IR --------------*- C++ -*-===//
//
// The one attribute --shard-optimizer (issue 41, item 3) leaves in the IR,
// apart from AMPCDialect.h so that adding it rebuilt only its readers.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_DIALECT_SHARDOPTIMIZER_H
#define AMPC_DIALECT_SHARDOPTIMIZER_H

#include "llvm/ADT/StringRef.h"

namespace ampc {

/// ZeRO-1 (--shard-optimizer), a unit attribute. On the module (the ampc
/// driver sets it): ampc-insert-all-reduce makes one bucket and moves the
/// optimizer updates together. On that bucket's ampc.all_reduce_start (the
/// pass sets it): the target reduce-scatters the bucket and shards the
/// optimizer over the ranks. Verified in AMPCDialect.cpp.
constexpr llvm::StringLiteral kShardOptimizerAttr = "ampc.shard_optimizer";

} // namespace ampc

#endif // AMPC_DIALECT_SHARDOPTIMIZER_H

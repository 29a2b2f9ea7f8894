//===- Indexing.cpp - the shape facts of the indexing ops -----------------===//

#include "ampc/Dialect/Indexing.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/Compose.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace mlir;

namespace ampc {

namespace {

/// Sets `error` to `message`; returns failure.
LogicalResult fail(std::string &error, const Twine &message) {
  error = message.str();
  return failure();
}

/// Indices of the gathers and scatters are int32 or int64 (ONNX's type
/// constraint).
LogicalResult checkIndexType(RankedTensorType indices, std::string &error) {
  Type t = indices.getElementType();
  if (t.isSignlessInteger(32) || t.isSignlessInteger(64))
    return success();
  std::string name;
  llvm::raw_string_ostream os(name);
  os << t;
  return fail(error, "indices must be int32 or int64, got " + name);
}

} // namespace

FailureOr<int64_t> readElementIndices(RankedTensorType data,
                                      RankedTensorType indices, int64_t axis,
                                      std::string &error) {
  if (failed(checkIndexType(indices, error)))
    return failure();
  if (data.getRank() == 0)
    return fail(error, "data must have rank >= 1");
  if (indices.getRank() != data.getRank())
    return fail(error, "indices " + formatDims(indices.getShape()) +
                           " must have the rank of data " +
                           formatDims(data.getShape()));
  std::optional<int64_t> normalized = normalizeAxis(axis, data.getRank());
  if (!normalized)
    return fail(error, "axis " + Twine(axis) + " is out of range for rank " +
                           Twine(data.getRank()));
  for (int64_t d = 0; d < data.getRank(); ++d)
    if (d != *normalized && indices.getDimSize(d) > data.getDimSize(d))
      return fail(error, "indices " + formatDims(indices.getShape()) +
                             " are longer than data " +
                             formatDims(data.getShape()) + " along dimension " +
                             Twine(d) + " (not the axis)");
  return *normalized;
}

LogicalResult checkElementUpdates(RankedTensorType indices,
                                  RankedTensorType updates,
                                  std::string &error) {
  if (updates.getShape() != indices.getShape())
    return fail(error, "updates " + formatDims(updates.getShape()) +
                           " must have the shape of indices " +
                           formatDims(indices.getShape()));
  return success();
}

FailureOr<int64_t> readTupleIndices(RankedTensorType data,
                                    RankedTensorType indices, int64_t batch,
                                    std::string &error) {
  if (failed(checkIndexType(indices, error)))
    return failure();
  int64_t r = data.getRank(), q = indices.getRank();
  if (r == 0 || q == 0)
    return fail(error, "data " + formatDims(data.getShape()) + " and indices " +
                           formatDims(indices.getShape()) +
                           " must have rank >= 1");
  if (batch < 0 || batch >= std::min(r, q))
    return fail(error, "batch_dims " + Twine(batch) +
                           " must be at least 0 and less than the ranks of "
                           "data (" +
                           Twine(r) + ") and indices (" + Twine(q) + ")");
  int64_t k = indices.getDimSize(q - 1);
  if (k < 1 || k > r - batch)
    return fail(error, "indices " + formatDims(indices.getShape()) +
                           " hold index tuples of " + Twine(k) +
                           " elements, but data " +
                           formatDims(data.getShape()) +
                           " takes tuples of 1 to " + Twine(r - batch));
  if (indices.getShape().take_front(batch) != data.getShape().take_front(batch))
    return fail(error, "indices " + formatDims(indices.getShape()) +
                           " and data " + formatDims(data.getShape()) +
                           " must agree on the first " + Twine(batch) +
                           " (batch) dimensions");
  return k;
}

SmallVector<int64_t> gatherNDShape(RankedTensorType data,
                                   RankedTensorType indices, int64_t batch,
                                   int64_t k) {
  SmallVector<int64_t> shape(indices.getShape().drop_back());
  llvm::append_range(shape, data.getShape().drop_front(batch + k));
  return shape;
}

LogicalResult checkTupleUpdates(RankedTensorType data, RankedTensorType indices,
                                RankedTensorType updates, int64_t k,
                                std::string &error) {
  SmallVector<int64_t> expected = gatherNDShape(data, indices, 0, k);
  if (updates.getShape() != ArrayRef<int64_t>(expected))
    return fail(error, "updates " + formatDims(updates.getShape()) +
                           " must have shape " + formatDims(expected) +
                           " (indices' but the last, then data's after the "
                           "first " +
                           Twine(k) + ")");
  return success();
}

LogicalResult checkReverseSequence(RankedTensorType input,
                                   RankedTensorType lens, int64_t timeAxis,
                                   int64_t batchAxis, std::string &error) {
  if (input.getRank() < 2)
    return fail(error, "input must have rank 2 or more");
  if (!((timeAxis == 0 && batchAxis == 1) || (timeAxis == 1 && batchAxis == 0)))
    return fail(error,
                "time_axis and batch_axis must be 0 and 1 in some order, "
                "got " +
                    Twine(timeAxis) + " and " + Twine(batchAxis));
  int64_t batch = input.getDimSize(batchAxis);
  if (lens.getRank() != 1 || lens.getDimSize(0) != batch ||
      !lens.getElementType().isInteger(64))
    return fail(error, "sequence_lens must be int64 [" + Twine(batch) +
                           "] (one length per batch entry), got " +
                           formatDims(lens.getShape()));
  return success();
}

FailureOr<int64_t> readOneHot(RankedTensorType indices, RankedTensorType values,
                              int64_t axis, std::string &error) {
  if (values.getRank() != 1 || values.getDimSize(0) != 2)
    return fail(error, "input 2 (values) must be [off_value, on_value], got " +
                           formatDims(values.getShape()));
  int64_t rank = indices.getRank() + 1;
  std::optional<int64_t> normalized = normalizeAxis(axis, rank);
  if (!normalized)
    return fail(error, "axis " + Twine(axis) + " is out of range for rank " +
                           Twine(rank));
  return *normalized;
}

FailureOr<int64_t> readTopK(RankedTensorType input, int64_t axis, int64_t k,
                            int64_t largest, std::string &error) {
  if (input.getRank() == 0)
    return fail(error, "input must have rank >= 1");
  std::optional<int64_t> normalized = normalizeAxis(axis, input.getRank());
  if (!normalized)
    return fail(error, "axis " + Twine(axis) + " is out of range for rank " +
                           Twine(input.getRank()));
  int64_t n = input.getDimSize(*normalized);
  if (k < 0 || k > n)
    return fail(error, "K " + Twine(k) + " must be between 0 and " + Twine(n) +
                           ", the size of axis " + Twine(*normalized));
  if (largest != 0 && largest != 1)
    return fail(error, "'largest' must be 0 or 1, got " + Twine(largest));
  return *normalized;
}

bool isScatterReduction(StringRef reduction) {
  return llvm::is_contained({"none", "add", "mul", "max", "min"}, reduction);
}

} // namespace ampc

//===- Artifact.h - a generated library before its compile ------*- C++ -*-===//
//
// What a target's emitter hands to the compile step (docs/design.md,
// "Driver"): the code as the pieces that compile apart, the data that
// compiles apart from the code, and the bytes of the files the data reads,
// each a field of its own. The compile cache keys each piece on its text
// (shared code and piece); nothing reads the structure back out of a text.
//
// The text form (`--emit=cpp|cuda`, ampc-translate, a source compiled by
// `ampc SOURCE.cpp`) writes the pieces after kPieceMarker lines and the data
// after one kDataMarker line; `parse` reads an edited or combined source back
// by the same lines.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_TARGET_ARTIFACT_H
#define AMPC_TARGET_ARTIFACT_H

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <vector>

namespace ampc {

namespace emit {
/// The line of a source's text form after which its data follows.
constexpr llvm::StringLiteral kDataMarker =
    "// ---- ampc: data below, compiled apart from the code above ----";
/// The line of a source's text form before each piece of its code (when
/// the code is cut); compiled as one translation unit, a comment.
constexpr llvm::StringLiteral kPieceMarker =
    "// ---- ampc: piece, compiled apart after the shared lines above ----";
} // namespace emit

/// A generated model library, not yet compiled.
struct Artifact {
  /// The code every piece's translation unit starts with (the preamble and
  /// the piece functions' declarations); empty when the code is not cut.
  std::string shared;
  /// The code: pieces that compile apart (each after `shared`) and at once
  /// (compileJobs), each kept in the compile cache on its own. At least one.
  std::vector<std::string> pieces;
  /// What varies with the data alone (the `.incbin`s of the files below,
  /// the hyperparameter text, the ONNX size), compiled apart from the code
  /// and never cached, as it follows kDataMarker. nullopt: the data is in
  /// the code (arrays; a source for standard output), and the source is
  /// compiled as one translation unit.
  std::optional<std::string> data;
  /// The parameters' initial values in their storage format, and the file
  /// the data's `.incbin` reads them from ("" when they are an array in
  /// the code, or there are none).
  std::string parameters, parameterFile;
  /// The serialized ONNX model a training library embeds for export, and
  /// its file ("" when none, or an array in the code).
  std::string onnx, onnxFile;

  /// The source's text form: `shared`, each piece after a kPieceMarker
  /// line (no marker when the code is one piece and nothing is shared),
  /// then kDataMarker and the data.
  std::string text() const;
  /// A source's text read back (an edited source, several models' sources
  /// combined): the code before its one kDataMarker line, the data after
  /// it; the code cut at kPieceMarker lines. A text with no kDataMarker
  /// line or several is code alone, one piece (one translation unit). The
  /// files the data reads are not read.
  static Artifact parse(llvm::StringRef text);
};

} // namespace ampc

#endif // AMPC_TARGET_ARTIFACT_H

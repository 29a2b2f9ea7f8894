//===- Artifact.cpp - a generated library's text form ---------------------===//
//
// The one place that writes and reads the marker lines of a source's text
// form (Artifact.h): the emitters and the compile pass the structure.
//
//===----------------------------------------------------------------------===//

#include "ampc/Target/Artifact.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"

using namespace llvm;
using ampc::emit::kDataMarker;
using ampc::emit::kPieceMarker;

std::string ampc::Artifact::text() const {
  std::string text = shared;
  bool marked = !shared.empty() || pieces.size() > 1;
  for (const std::string &piece : pieces) {
    if (marked)
      text += (kPieceMarker + "\n").str();
    text += piece;
  }
  if (data)
    text += (kDataMarker + *data).str();
  return text;
}

ampc::Artifact ampc::Artifact::parse(StringRef text) {
  Artifact artifact;
  StringRef code = text;
  size_t at = text.find(kDataMarker);
  if (at != StringRef::npos && (at == 0 || text[at - 1] == '\n') &&
      text.find(kDataMarker, at + 1) == StringRef::npos) {
    code = text.take_front(at);
    artifact.data = text.drop_front(at + kDataMarker.size()).str();
  }
  SmallVector<StringRef> cut;
  code.split(cut, (Twine(kPieceMarker) + "\n").str());
  if (cut.size() > 1)
    artifact.shared = cut.front().str();
  for (StringRef piece : ArrayRef<StringRef>(cut).drop_front(cut.size() > 1))
    artifact.pieces.push_back(piece.str());
  return artifact;
}

//===- Choices.h - "a, b or c" for messages ---------------------*- C++ -*-===//
//
// How every message of ampc lists what it expected: the words joined by
// ", " and the last by " or ".
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_SUPPORT_CHOICES_H
#define AMPC_SUPPORT_CHOICES_H

#include <iterator>
#include <string>

namespace ampc {

/// "a", "a or b", "a, b or c".
template <typename Range>
std::string joinChoices(const Range &words) {
  std::string text;
  size_t count = 0, total = std::size(words);
  for (const auto &word : words) {
    if (count > 0)
      text += count + 1 == total ? " or " : ", ";
    text += std::string(word);
    ++count;
  }
  return text;
}

} // namespace ampc

#endif // AMPC_SUPPORT_CHOICES_H

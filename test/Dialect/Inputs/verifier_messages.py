#!/usr/bin/env python3
"""Every verifier message of the dialect is checked by a negative test.

usage: verifier_messages.py SOURCE.cpp... -- TEST.mlir...

Collects the message text that starts each emitOpError/emitError call in
the sources (its first string literals) and looks for it in
the `expected-error ... {{...}}` lines of the tests. Prints one line per
message no test expects, then "N verifier messages, M unchecked" (exit
status 1 when M > 0).
"""
import re
import sys

# emitOpError("text") << ... and emitOpError() << "text" << ...
CALL = re.compile(
    r"emit(?:Op)?Error\((?:\)\s*<<)?\s*((?:\"(?:[^\"\\]|\\.)*\"\s*)+)")
LITERAL = re.compile(r"\"((?:[^\"\\]|\\.)*)\"")
EXPECTED = re.compile(r"expected-error[^{\n]*\{\{(.*?)\}\}")


def main():
    args = sys.argv[1:]
    split = args.index("--")
    sources, tests = args[:split], args[split + 1:]
    expected = []
    for path in tests:
        with open(path) as f:
            expected += EXPECTED.findall(f.read())
    total, unchecked = 0, 0
    for path in sources:
        with open(path) as f:
            text = f.read()
        for match in CALL.finditer(text):
            message = "".join(LITERAL.findall(match.group(1)))
            message = message.replace('\\"', '"').strip()
            total += 1
            if not any(message in e for e in expected):
                unchecked += 1
                line = text.count("\n", 0, match.start()) + 1
                print("%s:%d: no negative test expects %r" % (path, line,
                                                              message))
    print("%d verifier messages, %d unchecked" % (total, unchecked))
    return 1 if unchecked else 0


if __name__ == "__main__":
    sys.exit(main())

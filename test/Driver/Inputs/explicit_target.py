#!/usr/bin/env python3
"""Every RUN line that compiles a library with the `ampc` driver names its
target.

usage: explicit_target.py TEST_DIR

The default target is cuda on a machine with nvcc, cuBLASLt and a CUDA
driver, cpu elsewhere, so a test that compiles a library without --target
tests a different target on a GPU machine than on CI's. A RUN line counts as
compiling when a command of it runs `ampc` (the driver, not ampc-*; after
`not` and `env VAR=VALUE` if any) with `-o FILE.so` or --emit=so; naming
--target=, or --emit=cpp/cuda (which pick the target), or compiling a
generated SOURCE.cpp/.cu (whose kind is the target) is explicit. A test
about the default itself says ALLOW-DEFAULT-TARGET in a comment. Prints
each offending line as FILE:LINE: COMMAND and a count.
"""
import os
import re
import sys

# The program a command runs is `ampc`, after `not` and `env VAR=VALUE`.
DRIVER = re.compile(r"^\s*(not\s+)?(env\s+(\S+=\S*\s+)*)?ampc\s")
COMPILES = re.compile(r"-o\s+\S+\.so\b|--emit=so\b")
EXPLICIT = re.compile(r"--target=|--emit=(cpp|cuda)\b|\.(cpp|cu)\s")


def main():
    root = sys.argv[1]
    offenders = 0
    for folder, _, names in sorted(os.walk(root)):
        for name in sorted(names):
            path = os.path.join(folder, name)
            try:
                with open(path) as f:
                    lines = f.read().splitlines()
            except (UnicodeDecodeError, OSError):
                continue
            if any("ALLOW-DEFAULT-TARGET" in line for line in lines):
                continue
            for number, line in enumerate(lines, 1):
                if "RUN:" not in line:
                    continue
                command = line.split("RUN:", 1)[1]
                # Each command of a pipeline or list on its own.
                for part in re.split(r"\|\||&&|[|;]", command):
                    if (DRIVER.search(part) and COMPILES.search(part)
                            and not EXPLICIT.search(part)):
                        offenders += 1
                        print("%s:%d: %s" % (path, number, part.strip()))
    print("%d library compile(s) without --target" % offenders)
    return 1 if offenders else 0


if __name__ == "__main__":
    sys.exit(main())

"""ampc.__version__ and ampc.compiler_version() (version.test): what the
compiler the module uses says with --version, python/pyproject.toml's
version too, and no __version__ (an AttributeError saying why) without a
compiler.

usage: version.py SRC_ROOT
"""
import os
import re
import subprocess
import sys

import ampc

src = sys.argv[1]
line = subprocess.run([ampc.find_compiler(), "--version"], check=True,
                      capture_output=True, text=True).stdout.splitlines()[0]
print("ampc --version:", line)
print("__version__:", ampc.__version__)
with open(os.path.join(src, "python", "pyproject.toml")) as f:
    project = re.search(r'^version = "([^"]+)"', f.read(), re.M).group(1)
print("pyproject:", project)
print("revision:", ampc.compiler_version().revision)
os.environ["AMPC"] = "/nonexistent/ampc"
print("without a compiler: hasattr", hasattr(ampc, "__version__"))
try:
    print(ampc.__version__)
except AttributeError as e:
    print("AttributeError:", e)

"""The tests' and benchmarks' name for the Python module's runtime binding
(python/ampc/runtime.py), which is the one implementation."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))
from ampc.runtime import *  # noqa: E402,F401,F403
from ampc.runtime import _find_runtime, load_runtime  # noqa: E402,F401

"""The Python module's save paths follow the output rules of every ampc
output (docs/design.md, Output files): a path with a NUL byte is refused
before ctypes would cut it at the NUL, the library in use and a read-only
file are not replaced, a new file takes the umask. argv: a folder holding
mlp.so (examples/mlp.onnxtext compiled for training)."""

import os
import stat
import sys

import ampc
from ampc.runtime import Model

folder = sys.argv[1]
library = os.path.join(folder, "mlp.so")
model = Model(library)


def attempt(what, call):
    try:
        call()
        print("%s: written" % what)
    except (ValueError, ampc.AmpcError) as e:
        # The folder's name is the test's business, not the message's.
        print("%s: %s: %s" % (what, type(e).__name__,
                              str(e).replace(folder + "/", "")))


# "a\0b" would reach the runtime as "a" (ctypes stops at the NUL).
os.chdir(folder)
for call in ("save_checkpoint", "export_onnx", "load_checkpoint"):
    attempt(call + " NUL",
            lambda: getattr(model, call)(os.path.join(folder, "a\0b")))
print("file 'a' exists: %s" % os.path.exists(os.path.join(folder, "a")))

# The library this process runs is not replaced, whatever it is called.
before = open(library, "rb").read()
os.link(library, os.path.join(folder, "alias.so"))
for name in ("mlp.so", "alias.so"):
    attempt("save_checkpoint over the library as " + name,
            lambda: model.save_checkpoint(os.path.join(folder, name)))
print("library unchanged: %s" % (open(library, "rb").read() == before))

# A read-only file keeps its bytes and its mode.
frozen = os.path.join(folder, "frozen.ckpt")
with open(frozen, "w") as f:
    f.write("keep")
os.chmod(frozen, 0o444)
attempt("save_checkpoint over a 0444 file",
        lambda: model.save_checkpoint(frozen))
print("read-only file: %s, mode %o" % (open(frozen, "rb").read() == b"keep",
                                       stat.S_IMODE(os.stat(frozen).st_mode)))

# A link is neither written through nor replaced.
target = os.path.join(folder, "target")
with open(target, "w") as f:
    f.write("keep")
os.symlink(target, os.path.join(folder, "link.onnx"))
attempt("export_onnx over a link",
        lambda: model.export_onnx(os.path.join(folder, "link.onnx")))
print("link target: %s, still a link: %s" % (
    open(target, "rb").read() == b"keep", os.path.islink(os.path.join(folder, "link.onnx"))))

# New files get 0666 minus the umask.
saved = os.umask(0o077)
model.save_checkpoint(os.path.join(folder, "private.ckpt"))
model.export_onnx(os.path.join(folder, "private.onnx"))
os.umask(saved)
for name in ("private.ckpt", "private.onnx"):
    print("%s: mode %o" % (name, stat.S_IMODE(
        os.stat(os.path.join(folder, name)).st_mode)))
print("temporaries left: %d" % len([n for n in os.listdir(folder)
                                    if ".tmp-" in n]))

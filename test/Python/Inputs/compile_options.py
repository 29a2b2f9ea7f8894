"""compile()'s keywords (compile-options.test): ampc.compile is
ampc.compile_model; a keyword that is not an option of the ampc in use
(its --list-options=json, read once) raises TypeError naming it and the close
matches before anything runs; a known one reaches ampc.

usage: compile_options.py MODEL
"""
import sys

import ampc

model = sys.argv[1]
print("compile is compile_model:", ampc.compile is ampc.compile_model)


def attempt(**options):
    try:
        ampc.compile_model(model, target="cpu", **options)
        print("compiled")
    except TypeError as e:
        print("TypeError:", e)
    except ampc.CompileError as e:
        print("CompileError:", str(e).splitlines()[0])


attempt(optimiser="sgd")
attempt(lrr=0.1, keep_fp23=["op:Softmax"])
attempt(xyzzy=1)
# What compile() passes itself is not a keyword.
attempt(help=True)
# Known options reach ampc, which checks their values.
attempt(optimizer="sgdd")
attempt(optimizer="sgd", lr=0.1, loss="mse", keep_fp32=["op:Softmax"])
# The help is read once per executable.
print("help read once:",
      ampc.compiler_options() is ampc.compiler_options(),
      len(ampc.compiler_options()) > 40)
# The table is the compiler's one declaration of each pipeline option:
# its type, default and words, and the driver's other options by name.
table = {o["name"]: o for o in ampc.compiler_option_table()}
print("lr:", table["lr"]["pipeline"], table["lr"]["type"],
      table["lr"]["default"], table["lr"]["list"])
print("precision:", table["precision"]["default"],
      table["precision"]["choices"])
print("keep-fp32:", table["keep-fp32"]["list"], table["keep-fp32"]["default"])
print("weight-decay:", table["weight-decay"]["default"])
print("o:", table["o"]["pipeline"], "target" in table, "batch" in table)

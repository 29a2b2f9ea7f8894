// Bad rules files and bad options of ampc-assign-precision: each run fails
// with exit status 1 and one error that names the file and the offending
// key (or the option). The rules files are written into %t.dir here.
//
// RUN: rm -rf %t.dir && mkdir -p %t.dir
//
// Not JSON at all.
// RUN: echo '{"categories": {"Softmax": "follow"' > %t.dir/not-json.json
// RUN: (ampc-opt %s --ampc-assign-precision=rules=%t.dir/not-json.json 2>&1; echo "exit=$?") | FileCheck %s --check-prefix=NOT-JSON
// NOT-JSON: error: {{.*}}not-json.json: not valid JSON: {{.+}}
// NOT-JSON-NOT: module
// NOT-JSON: exit=1
//
// An empty file is not JSON either.
// RUN: touch %t.dir/empty.json
// RUN: (ampc-opt %s --ampc-assign-precision=rules=%t.dir/empty.json 2>&1; echo "exit=$?") | FileCheck %s --check-prefix=EMPTY
// EMPTY: error: {{.*}}empty.json: not valid JSON
// EMPTY: exit=1
//
// A top-level array instead of an object.
// RUN: echo '["op:Softmax"]' > %t.dir/array.json
// RUN: (ampc-opt %s --ampc-assign-precision=rules=%t.dir/array.json 2>&1; echo "exit=$?") | FileCheck %s --check-prefix=ARRAY
// ARRAY: error: {{.*}}array.json: expected a JSON object with keys categories, keep_fp32, force_lowp
// ARRAY: exit=1
//
// An unknown top-level key (a typo of keep_fp32).
// RUN: echo '{"keep_fp32": ["op:Softmax"], "keep_fp16": ["op:Exp"]}' > %t.dir/unknown-key.json
// RUN: (ampc-opt %s --ampc-assign-precision=rules=%t.dir/unknown-key.json 2>&1; echo "exit=$?") | FileCheck %s --check-prefix=UNKNOWN-KEY
// UNKNOWN-KEY: error: {{.*}}unknown-key.json: unknown key 'keep_fp16' (expected categories, keep_fp32, force_lowp)
// UNKNOWN-KEY: exit=1
//
// categories must be an object.
// RUN: echo '{"categories": ["Softmax", "follow"]}' > %t.dir/categories-array.json
// RUN: (ampc-opt %s --ampc-assign-precision=rules=%t.dir/categories-array.json 2>&1; echo "exit=$?") | FileCheck %s --check-prefix=CATEGORIES
// CATEGORIES: error: {{.*}}categories-array.json: key 'categories': expected an object mapping ONNX op types to categories
// CATEGORIES: exit=1
//
// An unknown category (a typo of allow; names are case-sensitive).
// RUN: echo '{"categories": {"Softmax": "alow"}}' > %t.dir/unknown-category.json
// RUN: (ampc-opt %s --ampc-assign-precision=rules=%t.dir/unknown-category.json 2>&1; echo "exit=$?") | FileCheck %s --check-prefix=UNKNOWN-CATEGORY
// UNKNOWN-CATEGORY: error: {{.*}}unknown-category.json: key 'categories.Softmax': unknown category 'alow' (expected allow, deny, fp32_output, promote, follow)
// UNKNOWN-CATEGORY: exit=1
// RUN: echo '{"categories": {"MatMul": "Allow"}}' > %t.dir/category-case.json
// RUN: (ampc-opt %s --ampc-assign-precision=rules=%t.dir/category-case.json 2>&1; echo "exit=$?") | FileCheck %s --check-prefix=CATEGORY-CASE
// CATEGORY-CASE: error: {{.*}}category-case.json: key 'categories.MatMul': unknown category 'Allow' (expected allow, deny, fp32_output, promote, follow)
// CATEGORY-CASE: exit=1
//
// A category that is not a string.
// RUN: echo '{"categories": {"Softmax": 3}}' > %t.dir/category-number.json
// RUN: (ampc-opt %s --ampc-assign-precision=rules=%t.dir/category-number.json 2>&1; echo "exit=$?") | FileCheck %s --check-prefix=CATEGORY-NUMBER
// CATEGORY-NUMBER: error: {{.*}}category-number.json: key 'categories.Softmax': expected a string (allow, deny, fp32_output, promote, follow)
// CATEGORY-NUMBER: exit=1
//
// keep_fp32 must be an array.
// RUN: echo '{"keep_fp32": "node:/head/MatMul"}' > %t.dir/keep-string.json
// RUN: (ampc-opt %s --ampc-assign-precision=rules=%t.dir/keep-string.json 2>&1; echo "exit=$?") | FileCheck %s --check-prefix=KEEP-STRING
// KEEP-STRING: error: {{.*}}keep-string.json: key 'keep_fp32': expected an array of "op:TYPE" / "node:NAME" strings
// KEEP-STRING: exit=1
// RUN: echo '{"force_lowp": {"op": "Exp"}}' > %t.dir/force-object.json
// RUN: (ampc-opt %s --ampc-assign-precision=rules=%t.dir/force-object.json 2>&1; echo "exit=$?") | FileCheck %s --check-prefix=FORCE-OBJECT
// FORCE-OBJECT: error: {{.*}}force-object.json: key 'force_lowp': expected an array of "op:TYPE" / "node:NAME" strings
// FORCE-OBJECT: exit=1
//
// Every keep_fp32 item must be a string; the message gives its index.
// RUN: echo '{"keep_fp32": ["op:Softmax", 7]}' > %t.dir/keep-item.json
// RUN: (ampc-opt %s --ampc-assign-precision=rules=%t.dir/keep-item.json 2>&1; echo "exit=$?") | FileCheck %s --check-prefix=KEEP-ITEM
// KEEP-ITEM: error: {{.*}}keep-item.json: key 'keep_fp32[1]': expected a string
// KEEP-ITEM: exit=1
//
// A rule without the op: or node: prefix, and one without a name.
// RUN: echo '{"force_lowp": ["op:Exp", "Softmax"]}' > %t.dir/no-prefix.json
// RUN: (ampc-opt %s --ampc-assign-precision=rules=%t.dir/no-prefix.json 2>&1; echo "exit=$?") | FileCheck %s --check-prefix=NO-PREFIX
// NO-PREFIX: error: {{.*}}no-prefix.json: key 'force_lowp[1]': 'Softmax' is not a rule (expected op:TYPE or node:NAME)
// NO-PREFIX: exit=1
// RUN: echo '{"keep_fp32": ["node:"]}' > %t.dir/no-name.json
// RUN: (ampc-opt %s --ampc-assign-precision=rules=%t.dir/no-name.json 2>&1; echo "exit=$?") | FileCheck %s --check-prefix=NO-NAME
// NO-NAME: error: {{.*}}no-name.json: key 'keep_fp32[0]': a rule needs a name after 'node:'
// NO-NAME: exit=1
//
// A rules file that does not exist.
// RUN: (ampc-opt %s --ampc-assign-precision=rules=%t.dir/missing.json 2>&1; echo "exit=$?") | FileCheck %s --check-prefix=MISSING
// MISSING: error: {{.*}}missing.json: cannot open: {{.+}}
// MISSING: exit=1
//
// A FIFO is refused without waiting for a writer.
// RUN: rm -f %t.dir/rules.fifo && mkfifo %t.dir/rules.fifo
// RUN: (timeout 60 ampc-opt %s --ampc-assign-precision=rules=%t.dir/rules.fifo 2>&1; echo "exit=$?") | FileCheck %s --check-prefix=FIFO
// FIFO: error: {{.*}}rules.fifo: cannot open: not a regular file (a FIFO)
// FIFO: exit=1
//
// Bad pass options.
// RUN: (ampc-opt %s --ampc-assign-precision=dtype=f8 2>&1; echo "exit=$?") | FileCheck %s --check-prefix=DTYPE --implicit-check-not="Cannot find option"
// DTYPE: error: ampc-assign-precision: dtype must be f16, bf16 or f32, got 'f8'
// DTYPE: exit=1
// RUN: (ampc-opt %s --ampc-assign-precision=dtype=fp16 2>&1; echo "exit=$?") | FileCheck %s --check-prefix=DTYPE-FP16
// DTYPE-FP16: error: ampc-assign-precision: dtype must be f16, bf16 or f32, got 'fp16'
// DTYPE-FP16: exit=1
// RUN: (ampc-opt %s --ampc-assign-precision=propagation=foo 2>&1; echo "exit=$?") | FileCheck %s --check-prefix=PROPAGATION --implicit-check-not="Cannot find option"
// PROPAGATION: error: ampc-assign-precision: propagation must be autocast or paint, got 'foo'
// PROPAGATION: exit=1
// RUN: (ampc-opt %s --ampc-assign-precision=keep-fp32=Softmax 2>&1; echo "exit=$?") | FileCheck %s --check-prefix=KEEP-OPTION
// KEEP-OPTION: error: --keep-fp32: 'Softmax' is not a rule (expected op:TYPE or node:NAME)
// KEEP-OPTION: exit=1
// RUN: (ampc-opt %s --ampc-assign-precision=force-lowp=op:Exp,node: 2>&1; echo "exit=$?") | FileCheck %s --check-prefix=FORCE-OPTION
// FORCE-OPTION: error: --force-lowp: a rule needs a name after 'node:'
// FORCE-OPTION: exit=1
//
// A good file next to these, to show the model itself is fine: exit 0.
// RUN: echo '{"categories": {"Softmax": "follow"}, "keep_fp32": [], "force_lowp": ["op:Exp"]}' > %t.dir/good.json
// RUN: ampc-opt %s --ampc-assign-precision=rules=%t.dir/good.json | FileCheck %s --check-prefix=GOOD
// GOOD: ampc.softmax %{{.+}} {ampc.precision = #ampc.precision<category = follow, compute = f16, rule = "{{.*}}good.json categories.Softmax: input is f16">} : tensor<4x4xf16>
// GOOD: ampc.exp %{{.+}} {ampc.precision = #ampc.precision<category = deny, compute = f16, rule = "override {{.*}}good.json force_lowp[0] op:Exp">} : tensor<4x4xf16>

func.func @model(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %m = ampc.matmul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %s = ampc.softmax %m : tensor<4x4xf32> loc("/sm"(fused<"Softmax">["m.onnx":0:0]))
  %e = ampc.exp %s : tensor<4x4xf32>
  return %e : tensor<4x4xf32>
}

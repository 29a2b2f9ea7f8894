// Overrides of ampc-assign-precision: keep-fp32 / force-lowp rules (op:TYPE
// or node:NAME), a rules file (categories, keep_fp32, force_lowp), their
// precedence (a node rule beats an op rule, an override beats a category),
// warnings for rules that name nothing, and conflicts.
//
// Node names come from NameLoc locations; the op type of an op is the ONNX
// op type in the fused location metadata the importer writes, or else the op
// name in CamelCase; op: rules compare case-insensitively, ignoring
// underscores.
//
// RUN: ampc-opt %s --split-input-file --ampc-assign-precision=keep-fp32=op:MatMul | FileCheck %s --check-prefix=KEEP-OP
// RUN: ampc-opt %s --split-input-file "--ampc-assign-precision=force-lowp=op:softmax,node:/exp,op:log_softmax" | FileCheck %s --check-prefix=FORCE
// RUN: ampc-opt %s --split-input-file "--ampc-assign-precision=keep-fp32=op:MatMul,node:/sm,node:/add2 force-lowp=node:/head/MatMul,op:Softmax,node:/tanh" | FileCheck %s --check-prefix=PREC
// RUN: ampc-opt %s --split-input-file --ampc-assign-precision=rules=%S/Inputs/rules.json | FileCheck %s --check-prefix=FILE
// RUN: ampc-opt %s --split-input-file "--ampc-assign-precision=rules=%S/Inputs/rules.json keep-fp32=node:/exp" | FileCheck %s --check-prefix=FILE-CLI
// RUN: ampc-opt %s --split-input-file "--ampc-assign-precision=propagation=paint force-lowp=op:Exp keep-fp32=node:/enc/MatMul" | FileCheck %s --check-prefix=PAINT
// RUN: ampc-opt %s --split-input-file "--ampc-assign-precision=dtype=bf16 force-lowp=op:Softmax" | FileCheck %s --check-prefix=BF16
//
// Rules that name no op or node give a warning each (and only those); the
// whole file is one module here, so a rule is used when any function uses it.
// RUN: ampc-opt %s "--ampc-assign-precision=keep-fp32=node:/enc/MatMul,node:foo,op:Conv force-lowp=op:LOG_SOFTMAX,node:/Exp" 2>&1 >/dev/null | FileCheck %s --check-prefix=WARN --implicit-check-not=warning:
// WARN-DAG: warning: --keep-fp32: 'node:foo' names no op or node in the model
// WARN-DAG: warning: --keep-fp32: 'op:Conv' names no op or node in the model
// WARN-DAG: warning: --force-lowp: 'node:/Exp' names no op or node in the model
// RUN: ampc-opt %s --ampc-assign-precision=rules=%S/Inputs/rules.json 2>&1 >/dev/null | FileCheck %s --check-prefix=FILE-WARN --implicit-check-not=warning:
// FILE-WARN-DAG: warning: {{.*}}rules.json force_lowp[1]: 'node:/missing' names no op or node in the model
// FILE-WARN-DAG: warning: {{.*}}rules.json categories.Conv: no op of type 'Conv' in the model
//
// Two rules of the same rank, one in each list, that name one op are an
// error on that op (exit status 1, nothing printed).
// RUN: (ampc-opt %s --split-input-file "--ampc-assign-precision=keep-fp32=op:MatMul force-lowp=op:matmul" 2>&1; echo "exit=$?") | FileCheck %s --check-prefix=CONFLICT-OP
// CONFLICT-OP: error: {{.*}}both --keep-fp32 'op:MatMul' and --force-lowp 'op:matmul' apply
// CONFLICT-OP-NOT: func.func @model
// CONFLICT-OP: exit=1
// RUN: (ampc-opt %s --split-input-file "--ampc-assign-precision=keep-fp32=node:/sm force-lowp=node:/sm" 2>&1; echo "exit=$?") | FileCheck %s --check-prefix=CONFLICT-NODE
// CONFLICT-NODE: error: both --keep-fp32 'node:/sm' and --force-lowp 'node:/sm' apply
// CONFLICT-NODE: exit=1
// RUN: (ampc-opt %s --split-input-file "--ampc-assign-precision=rules=%S/Inputs/rules.json force-lowp=node:/enc/MatMul" 2>&1; echo "exit=$?") | FileCheck %s --check-prefix=CONFLICT-FILE
// CONFLICT-FILE: error: {{.*}}both {{.*}}rules.json keep_fp32[0] 'node:/enc/MatMul' and --force-lowp 'node:/enc/MatMul' apply
// CONFLICT-FILE: exit=1
//
// A category change names the op by its ONNX op type; for ops written in
// MLIR without importer locations that is the op name in CamelCase
// (ampc.matmul is ONNX MatMul, ampc.log_softmax is LogSoftmax).
// RUN: ampc-opt %s --split-input-file --ampc-assign-precision=rules=%S/Inputs/rules-categories.json | FileCheck %s --check-prefix=CATEGORIES

// @model: /enc/MatMul has a node name only; /head/MatMul and /sm have the
// importer's form, a name around fused<"OpType">.

// keep-fp32=op:MatMul keeps both matmuls (with and without the fused op
// type) in f32; nothing downstream is low precision, so no cast at all.
// KEEP-OP-LABEL: func.func @model
// KEEP-OP-SAME: (%[[X:.+]]: tensor<4x4xf32>, %[[W:.+]]: tensor<4x4xf32>)
// KEEP-OP-NEXT: %[[M:.+]] = ampc.matmul %[[X]], %[[W]] {ampc.precision = #ampc.precision<category = allow, compute = f32, rule = "override --keep-fp32 op:MatMul">} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// KEEP-OP-NEXT: %[[N:.+]] = ampc.matmul %[[M]], %[[W]] {ampc.precision = #ampc.precision<category = allow, compute = f32, rule = "override --keep-fp32 op:MatMul">} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// KEEP-OP-NEXT: %[[S:.+]] = ampc.softmax %[[N]] {ampc.precision = #ampc.precision<category = fp32_output, compute = f32, rule = "fp32_output list">} : tensor<4x4xf32>
// KEEP-OP-NEXT: %[[E:.+]] = ampc.exp %[[S]] {ampc.precision = #ampc.precision<category = deny, compute = f32, rule = "deny list">} : tensor<4x4xf32>
// KEEP-OP-NEXT: %[[A:.+]] = ampc.add %[[E]], %[[M]] {ampc.precision = #ampc.precision<category = promote, compute = f32, rule = "promote list: widest input is f32">} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// KEEP-OP-NEXT: %[[R:.+]] = ampc.relu %[[A]] {ampc.precision = #ampc.precision<category = follow, compute = f32, rule = "follow list: input is f32">} : tensor<4x4xf32>
// KEEP-OP-NEXT: return %[[R]] : tensor<4x4xf32>

// force-lowp=op:softmax (lower case matches Softmax) and node:/exp run an
// fp32_output op and a deny op in f16; the category stays as it was.
// FORCE-LABEL: func.func @model
// FORCE-SAME: (%[[X:.+]]: tensor<4x4xf32>, %[[W:.+]]: tensor<4x4xf32>)
// FORCE-NEXT: ampc.cast %[[X]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// FORCE-NEXT: ampc.cast %[[W]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// FORCE-NEXT: %[[M:.+]] = ampc.matmul {{.+}} {ampc.precision = #ampc.precision<category = allow, compute = f16, rule = "allow list">}
// FORCE-NEXT: ampc.cast %[[W]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// FORCE-NEXT: %[[N:.+]] = ampc.matmul %[[M]], {{.+}} {ampc.precision = #ampc.precision<category = allow, compute = f16, rule = "allow list">}
// FORCE-NEXT: %[[S:.+]] = ampc.softmax %[[N]] {ampc.precision = #ampc.precision<category = fp32_output, compute = f16, rule = "override --force-lowp op:softmax">} : tensor<4x4xf16>
// FORCE-NEXT: %[[E:.+]] = ampc.exp %[[S]] {ampc.precision = #ampc.precision<category = deny, compute = f16, rule = "override --force-lowp node:/exp">} : tensor<4x4xf16>
// FORCE-NEXT: %[[A:.+]] = ampc.add %[[E]], %[[M]] {ampc.precision = #ampc.precision<category = promote, compute = f16, rule = "promote list: widest input is f16">} : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf16>
// FORCE-NEXT: %[[R:.+]] = ampc.relu %[[A]] {ampc.precision = #ampc.precision<category = follow, compute = f16, rule = "follow list: input is f16">} : tensor<4x4xf16>
// FORCE-NEXT: %[[R32:.+]] = ampc.cast %[[R]] {ampc.autocast} : tensor<4x4xf16> to tensor<4x4xf32>
// FORCE-NEXT: return %[[R32]] : tensor<4x4xf32>

// Precedence: keep-fp32=op:MatMul loses to force-lowp=node:/head/MatMul on
// the second matmul, and force-lowp=op:Softmax loses to keep-fp32=node:/sm.
// PREC-LABEL: func.func @model
// PREC-SAME: (%[[X:.+]]: tensor<4x4xf32>, %[[W:.+]]: tensor<4x4xf32>)
// PREC-NEXT: %[[M:.+]] = ampc.matmul %[[X]], %[[W]] {ampc.precision = #ampc.precision<category = allow, compute = f32, rule = "override --keep-fp32 op:MatMul">} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// PREC-NEXT: %[[MH:.+]] = ampc.cast %[[M]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// PREC-NEXT: %[[WH:.+]] = ampc.cast %[[W]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// PREC-NEXT: %[[N:.+]] = ampc.matmul %[[MH]], %[[WH]] {ampc.precision = #ampc.precision<category = allow, compute = f16, rule = "override --force-lowp node:/head/MatMul">} : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf16>
// PREC-NEXT: %[[NF:.+]] = ampc.cast %[[N]] {ampc.autocast} : tensor<4x4xf16> to tensor<4x4xf32>
// PREC-NEXT: %[[S:.+]] = ampc.softmax %[[NF]] {ampc.precision = #ampc.precision<category = fp32_output, compute = f32, rule = "override --keep-fp32 node:/sm">} : tensor<4x4xf32>

// The rules file: keep_fp32 node:/enc/MatMul, Softmax changed to follow (it
// follows the f16 of /head/MatMul), force_lowp op:Exp.
// FILE-LABEL: func.func @model
// FILE-SAME: (%[[X:.+]]: tensor<4x4xf32>, %[[W:.+]]: tensor<4x4xf32>)
// FILE-NEXT: %[[M:.+]] = ampc.matmul %[[X]], %[[W]] {ampc.precision = #ampc.precision<category = allow, compute = f32, rule = "override {{.*}}rules.json keep_fp32[0] node:/enc/MatMul">} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// FILE-NEXT: %[[MH:.+]] = ampc.cast %[[M]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// FILE-NEXT: %[[WH:.+]] = ampc.cast %[[W]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// FILE-NEXT: %[[N:.+]] = ampc.matmul %[[MH]], %[[WH]] {ampc.precision = #ampc.precision<category = allow, compute = f16, rule = "allow list">} : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf16>
// FILE-NEXT: %[[S:.+]] = ampc.softmax %[[N]] {ampc.precision = #ampc.precision<category = follow, compute = f16, rule = "{{.*}}rules.json categories.Softmax: input is f16">} : tensor<4x4xf16>
// FILE-NEXT: %[[E:.+]] = ampc.exp %[[S]] {ampc.precision = #ampc.precision<category = deny, compute = f16, rule = "override {{.*}}rules.json force_lowp[0] op:Exp">} : tensor<4x4xf16>
// FILE-NEXT: %[[EF:.+]] = ampc.cast %[[E]] {ampc.autocast} : tensor<4x4xf16> to tensor<4x4xf32>
// FILE-NEXT: %[[A:.+]] = ampc.add %[[EF]], %[[M]] {ampc.precision = #ampc.precision<category = promote, compute = f32, rule = "promote list: widest input is f32">} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// FILE-NEXT: %[[R:.+]] = ampc.relu %[[A]] {ampc.precision = #ampc.precision<category = follow, compute = f32, rule = "follow list: input is f32">} : tensor<4x4xf32>
// FILE-NEXT: return %[[R]] : tensor<4x4xf32>

// A command-line node rule beats the file's op rule.
// FILE-CLI-LABEL: func.func @model
// FILE-CLI: ampc.softmax %{{.+}} {ampc.precision = #ampc.precision<category = follow, compute = f16, rule = "{{.*}}rules.json categories.Softmax: input is f16">} : tensor<4x4xf16>
// FILE-CLI-NEXT: %[[SF:.+]] = ampc.cast %{{.+}} {ampc.autocast} : tensor<4x4xf16> to tensor<4x4xf32>
// FILE-CLI-NEXT: ampc.exp %[[SF]] {ampc.precision = #ampc.precision<category = deny, compute = f32, rule = "override --keep-fp32 node:/exp">} : tensor<4x4xf32>

// In paint mode overrides seed the colouring: the kept matmul is deny and
// its deny spreads forward into the add; the forced exp is allow.
// PAINT-LABEL: func.func @model
// PAINT-SAME: (%[[X:.+]]: tensor<4x4xf32>, %[[W:.+]]: tensor<4x4xf32>)
// PAINT-NEXT: %[[M:.+]] = ampc.matmul %[[X]], %[[W]] {ampc.precision = #ampc.precision<category = allow, compute = f32, rule = "override --keep-fp32 node:/enc/MatMul">} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// PAINT-NEXT: %[[MH:.+]] = ampc.cast %[[M]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// PAINT-NEXT: %[[WH:.+]] = ampc.cast %[[W]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// PAINT-NEXT: %[[N:.+]] = ampc.matmul %[[MH]], %[[WH]] {ampc.precision = #ampc.precision<category = allow, compute = f16, rule = "paint: allow list">} : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf16>
// PAINT-NEXT: %[[NF:.+]] = ampc.cast %[[N]] {ampc.autocast} : tensor<4x4xf16> to tensor<4x4xf32>
// PAINT-NEXT: %[[S:.+]] = ampc.softmax %[[NF]] {ampc.precision = #ampc.precision<category = fp32_output, compute = f32, rule = "paint: fp32_output list">} : tensor<4x4xf32>
// PAINT-NEXT: %[[SH:.+]] = ampc.cast %[[S]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// PAINT-NEXT: %[[E:.+]] = ampc.exp %[[SH]] {ampc.precision = #ampc.precision<category = deny, compute = f16, rule = "override --force-lowp op:Exp">} : tensor<4x4xf16>
// PAINT-NEXT: %[[EF:.+]] = ampc.cast %[[E]] {ampc.autocast} : tensor<4x4xf16> to tensor<4x4xf32>
// PAINT-NEXT: %[[A:.+]] = ampc.add %[[EF]], %[[M]] {ampc.precision = #ampc.precision<category = promote, compute = f32, rule = "paint: deny spreads forward">} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// PAINT-NEXT: %[[R:.+]] = ampc.relu %[[A]] {ampc.precision = #ampc.precision<category = follow, compute = f32, rule = "paint: not painted, stays f32">} : tensor<4x4xf32>
// PAINT-NEXT: return %[[R]] : tensor<4x4xf32>

// force-lowp under dtype=bf16 means bf16.
// BF16-LABEL: func.func @model
// BF16: ampc.softmax %{{.+}} {ampc.precision = #ampc.precision<category = fp32_output, compute = bf16, rule = "override --force-lowp op:Softmax">} : tensor<4x4xbf16>

// Both matmuls take the changed category: deny, f32, no casts.
// CATEGORIES-LABEL: func.func @model
// CATEGORIES-SAME: (%[[X:.+]]: tensor<4x4xf32>, %[[W:.+]]: tensor<4x4xf32>)
// CATEGORIES-NEXT: %[[M:.+]] = ampc.matmul %[[X]], %[[W]] {ampc.precision = #ampc.precision<category = deny, compute = f32, rule = "{{.*}}rules-categories.json categories.MatMul">} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CATEGORIES-NEXT: %[[N:.+]] = ampc.matmul %[[M]], %[[W]] {ampc.precision = #ampc.precision<category = deny, compute = f32, rule = "{{.*}}rules-categories.json categories.MatMul">} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
func.func @model(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %m = ampc.matmul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> loc("/enc/MatMul")
  %n = ampc.matmul %m, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> loc("/head/MatMul"(fused<"MatMul">["m.onnx":0:0]))
  %s = ampc.softmax %n : tensor<4x4xf32> loc("/sm"(fused<"Softmax">["m.onnx":0:0]))
  %e = ampc.exp %s : tensor<4x4xf32> loc("/exp")
  %a = ampc.add %e, %m : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> loc("/add")
  %r = ampc.relu %a : tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// -----

// Overrides on promote and follow ops, and op: rules spelled like the MLIR
// op name (log_softmax matches LogSoftmax).

// KEEP-OP-LABEL: func.func @promote_follow
// KEEP-OP: ampc.add %{{.+}}, %{{.+}} {ampc.precision = #ampc.precision<category = promote, compute = f32, rule = "promote list: widest input is f32">} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>

// FORCE-LABEL: func.func @promote_follow
// FORCE-SAME: (%[[X:.+]]: tensor<4x4xf32>, %[[W:.+]]: tensor<4x4xf32>, %[[Y:.+]]: tensor<4x4xf32>)
// FORCE: %[[YH:.+]] = ampc.cast %[[Y]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// FORCE-NEXT: %[[L:.+]] = ampc.log_softmax %[[YH]] {ampc.precision = #ampc.precision<category = fp32_output, compute = f16, rule = "override --force-lowp op:log_softmax">} : tensor<4x4xf16>

// keep-fp32 on a promote op whose inputs are both f16 casts both up;
// force-lowp on a follow op whose input is f32 casts it down.
// PREC-LABEL: func.func @promote_follow
// PREC-SAME: (%[[X:.+]]: tensor<4x4xf32>, %[[W:.+]]: tensor<4x4xf32>, %[[Y:.+]]: tensor<4x4xf32>)
// PREC-NEXT: %[[A:.+]] = ampc.matmul %[[X]], %[[W]] {ampc.precision = #ampc.precision<category = allow, compute = f32, rule = "override --keep-fp32 op:MatMul">}
// PREC-NEXT: %[[B:.+]] = ampc.matmul %[[W]], %[[X]] {ampc.precision = #ampc.precision<category = allow, compute = f32, rule = "override --keep-fp32 op:MatMul">}
// PREC-NEXT: %[[C:.+]] = ampc.add %[[A]], %[[B]] {ampc.precision = #ampc.precision<category = promote, compute = f32, rule = "override --keep-fp32 node:/add2">} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// PREC-NEXT: %[[YH:.+]] = ampc.cast %[[Y]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// PREC-NEXT: %[[T:.+]] = ampc.tanh %[[YH]] {ampc.precision = #ampc.precision<category = follow, compute = f16, rule = "override --force-lowp node:/tanh">} : tensor<4x4xf16>

// Without keep-fp32 on the matmuls, /add2 really does see two f16 inputs.
// FILE-LABEL: func.func @promote_follow
// FILE: %[[A:.+]] = ampc.matmul {{.+}} -> tensor<4x4xf16>
// FILE: %[[B:.+]] = ampc.matmul {{.+}} -> tensor<4x4xf16>
// FILE-NEXT: ampc.add %[[A]], %[[B]] {ampc.precision = #ampc.precision<category = promote, compute = f16, rule = "promote list: widest input is f16">} : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf16>

// CATEGORIES-LABEL: func.func @promote_follow
// CATEGORIES: ampc.log_softmax %{{.+}} {ampc.precision = #ampc.precision<category = follow, compute = f32, rule = "{{.*}}rules-categories.json categories.LogSoftmax: input is f32">} : tensor<4x4xf32>
func.func @promote_follow(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>, %y: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %a = ampc.matmul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> loc("/a/MatMul")
  %b = ampc.matmul %w, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> loc("/b/MatMul")
  %c = ampc.add %a, %b : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> loc("/add2")
  %d = ampc.tanh %y : tensor<4x4xf32> loc("/tanh")
  %l = ampc.log_softmax %y : tensor<4x4xf32>
  return %c, %d, %l : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

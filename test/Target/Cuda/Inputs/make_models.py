"""Writes the models the CUDA execution tests need beyond the checked-in
ones, with seeded weights, into the folder given:

deep_mlp.onnx     x[8, 64] through three 64-wide Gemm + Relu layers and a
                  64 -> 10 Gemm: deep enough that the memory plan puts a
                  Relu's result where an earlier Gemm's input lived (where a
                  RELU_BIAS epilogue writing the Relu's buffer would overlap
                  its own A operand).
cnn_32x32.onnx    a real-sized CNN: x[8, 3, 32, 32], Conv 3->16 (3x3, pad 1)
                  + Relu + BatchNormalization (training), MaxPool 2, Conv
                  16->32 + Relu + BatchNormalization, GlobalAveragePool,
                  Flatten, Gemm 32->10: the bias gradients and batch
                  statistics reduce 8,192 and 2,048 elements per channel.
                  The Relu comes before the BatchNormalization so that the
                  convolution's bias matters: directly before a training
                  BatchNormalization its gradient is zero but for rounding,
                  and AdamW, which normalises each gradient, trains it on
                  that rounding noise, which no two correct implementations
                  share (the fp16 training comparison then drifted by 18x
                  a step, past its tolerance by the third).
long_rows.onnx    rows long enough for the CUDA target's block-per-row
                  kernels (256 elements or more: layerNormByBlock,
                  softmaxByBlock, reduceByBlock, forward and gradients):
                  x[64, 320], LayerNormalization, Gemm 320->300,
                  LogSoftmax over the 300, the column sums over the batch
                  and the mean of all 19,200 values (a reduction split over
                  blocks: reducePartials, reduceFinish) added back, Gemm
                  300->3.
warp_rows.onnx    rows for the warp-per-row kernels (8 to 255 elements:
                  layerNormByWarp, layerNormGradByWarp with the Scale and
                  B adjoints' leaf shares, softmaxByWarp): x[96, 40] plus
                  a bias (so that LayerNorm's input needs its gradient),
                  LayerNormalization over the 40, Gemm 40->24, Softmax
                  over the 24, Gemm 24->3; 96 rows are two pairwise leaves.
dominant.onnx     long rows with a dominant logit: x[16, 300] times a
                  scale plus a bias (the parameters), plus a constant
                  that puts +100 in one column of the even rows and -100
                  in the odd rows; Softmax and LogSoftmax over the 300
                  added back to the logits, which feed the attached
                  cross-entropy. A row's max must be subtracted before exp
                  (exp(100) overflows against a wrong max, as the minimum,
                  -100, does), in the forward, the gradients and the loss;
                  random N(0, 1) inputs never show it.
attention.onnx    causal self-attention as exporters write it: x[2, 20, 32]
                  through Q, K and V MatMuls, per-head Reshape/Transpose
                  (2 heads of 16), MatMul(Q, Kᵀ), a constant scale, a
                  constant triu(-inf, 1) mask added, Softmax, MatMul with V,
                  the heads merged back and a 32 -> 3 head over the 40 rows:
                  ampc-fuse-attention makes it one ampc.attention on both
                  targets (the CUDA kernels at head dim 16, the sequence of
                  20 two partial tiles).
attention_dropout.onnx  the same at batch 1 with a training-mode Dropout of
                  0.2 between the Softmax and MatMul(P, V): fused, both
                  targets draw the Dropout's mask in the attention kernels
                  (forward and backward) and must agree.
residual.onnx     two residual blocks as resnet's: x[2, 8, 8, 8]; block 1
                  Conv 8->16 (stride 2) + BatchNormalization + Relu, Conv
                  16->16 + BatchNormalization, added to a 1x1 stride-2
                  Conv + BatchNormalization shortcut, Relu; block 2 the
                  same with the identity shortcut; GlobalAveragePool,
                  Flatten, Gemm 16->3. ampc-fuse-batch-norm-epilogue makes
                  every BatchNorm's ReLU and residual add its epilogue
                  (the later BatchNorm of block 1 takes the other's Y as
                  its residual), forward and eval; the ReLU gradients read
                  the fused Y.
many_params.onnx  x[4, 4] plus 260 bias vectors of 4 in turn (Add), then a
                  4x4 Gemm: 262 parameters, more than one multi-tensor list
                  (256) holds.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(3)


def save(name, nodes, inits, x_shape, out_shape, folder):
    graph = helper.make_graph(
        nodes, os.path.splitext(name)[0],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, out_shape)],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(folder, name))


def tensor(name, shape, scale):
    return numpy_helper.from_array(
        (scale * rng.standard_normal(shape)).astype(np.float32), name)


def gemm_chain(widths, relu):
    nodes, inits, previous = [], [], "x"
    for i, (fan_in, fan_out) in enumerate(zip(widths, widths[1:])):
        inits += [tensor("w%d" % i, (fan_out, fan_in), 1 / np.sqrt(fan_in)),
                  tensor("b%d" % i, (fan_out,), 0.1)]
        last = i == len(widths) - 2
        out = "logits" if last else "g%d" % i
        nodes.append(helper.make_node("Gemm", [previous, "w%d" % i, "b%d" % i],
                                      [out], name="Gemm_%d" % i, transB=1))
        previous = out
        if relu and not last:
            nodes.append(helper.make_node("Relu", [out], ["h%d" % i],
                                          name="Relu_%d" % i))
            previous = "h%d" % i
    return nodes, inits


def bias_chain(count):
    nodes, inits, previous = [], [], "x"
    for i in range(count):
        inits.append(tensor("bias%d" % i, (4,), 0.1))
        nodes.append(helper.make_node("Add", [previous, "bias%d" % i],
                                      ["a%d" % i], name="Add_%d" % i))
        previous = "a%d" % i
    more_nodes, more_inits = gemm_chain([4, 4], relu=False)
    more_nodes[0].input[0] = previous
    return nodes + more_nodes, inits + more_inits


def cnn():
    nodes, inits = [], []
    previous, channels = "x", 3
    for i, width in enumerate([16, 32]):
        inits += [tensor("conv%d.w" % i, (width, channels, 3, 3),
                         1 / np.sqrt(9 * channels)),
                  tensor("conv%d.b" % i, (width,), 0.1),
                  numpy_helper.from_array(np.ones(width, np.float32), "bn%d.s" % i),
                  numpy_helper.from_array(np.zeros(width, np.float32), "bn%d.b" % i),
                  numpy_helper.from_array(np.zeros(width, np.float32), "bn%d.m" % i),
                  numpy_helper.from_array(np.ones(width, np.float32), "bn%d.v" % i)]
        nodes += [
            helper.make_node("Conv", [previous, "conv%d.w" % i, "conv%d.b" % i],
                             ["c%d" % i], name="Conv_%d" % i, pads=[1, 1, 1, 1],
                             kernel_shape=[3, 3]),
            helper.make_node("Relu", ["c%d" % i], ["n%d" % i], name="Relu_%d" % i),
            helper.make_node("BatchNormalization",
                             ["n%d" % i, "bn%d.s" % i, "bn%d.b" % i, "bn%d.m" % i,
                              "bn%d.v" % i],
                             ["r%d" % i, "bn%d.rm" % i, "bn%d.rv" % i],
                             name="BatchNormalization_%d" % i, training_mode=1)]
        previous, channels = "r%d" % i, width
        if i == 0:
            nodes.append(helper.make_node("MaxPool", [previous], ["p0"],
                                          name="MaxPool_0", kernel_shape=[2, 2],
                                          strides=[2, 2]))
            previous = "p0"
    inits += [tensor("fc.w", (10, 32), 1 / np.sqrt(32)), tensor("fc.b", (10,), 0.1)]
    nodes += [helper.make_node("GlobalAveragePool", [previous], ["gap"], name="Gap"),
              helper.make_node("Flatten", ["gap"], ["flat"], name="Flatten"),
              helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"],
                               name="Gemm_fc", transB=1)]
    return nodes, inits


def warp_rows():
    inits = [tensor("b0", (40,), 0.1),
             numpy_helper.from_array(
                 (1 + 0.1 * rng.standard_normal(40)).astype(np.float32), "ln.s"),
             tensor("ln.b", (40,), 0.1), tensor("w", (24, 40), 1 / np.sqrt(40)),
             tensor("head", (3, 24), 1 / np.sqrt(24))]
    nodes = [
        helper.make_node("Add", ["x", "b0"], ["xb"], name="Add_0"),
        helper.make_node("LayerNormalization", ["xb", "ln.s", "ln.b"], ["n"],
                         name="LayerNorm", axis=-1),
        helper.make_node("Gemm", ["n", "w"], ["h"], name="Gemm_0", transB=1),
        helper.make_node("Softmax", ["h"], ["p"], name="Softmax", axis=-1),
        helper.make_node("Gemm", ["p", "head"], ["logits"], name="Gemm_1",
                         transB=1)]
    return nodes, inits


def long_rows():
    inits = [numpy_helper.from_array(
                 (1 + 0.1 * rng.standard_normal(320)).astype(np.float32), "ln.s"),
             tensor("ln.b", (320,), 0.1), tensor("w", (300, 320), 1 / np.sqrt(320)),
             tensor("head", (3, 300), 1 / np.sqrt(300)),
             numpy_helper.from_array(np.array([0], np.int64), "axis0")]
    nodes = [
        helper.make_node("LayerNormalization", ["x", "ln.s", "ln.b"], ["n"],
                         name="LayerNorm", axis=-1),
        helper.make_node("Gemm", ["n", "w"], ["h"], name="Gemm_0", transB=1),
        helper.make_node("LogSoftmax", ["h"], ["l"], name="LogSoftmax", axis=-1),
        helper.make_node("ReduceSum", ["l", "axis0"], ["s"], name="ReduceSum",
                         keepdims=1),
        helper.make_node("ReduceMean", ["l"], ["m"], name="ReduceMean",
                         keepdims=1),
        helper.make_node("Add", ["l", "s"], ["ls"], name="Add_0"),
        helper.make_node("Add", ["ls", "m"], ["c"], name="Add_1"),
        helper.make_node("Gemm", ["c", "head"], ["logits"], name="Gemm_1",
                         transB=1)]
    return nodes, inits


def dominant():
    rows, width = 16, 300
    spike = np.zeros((rows, width), np.float32)
    for r in range(rows):
        spike[r, (37 * r + 11) % width] = 100.0 if r % 2 == 0 else -100.0
    inits = [numpy_helper.from_array(
                 (1 + 0.1 * rng.standard_normal(width)).astype(np.float32), "s"),
             tensor("b", (width,), 0.1)]
    nodes = [
        helper.make_node("Constant", [], ["spike"], name="Spike",
                         value=numpy_helper.from_array(spike, "spike")),
        helper.make_node("Mul", ["x", "s"], ["xs"], name="Scale"),
        helper.make_node("Add", ["xs", "b"], ["xb"], name="Bias"),
        helper.make_node("Add", ["xb", "spike"], ["h"], name="AddSpike"),
        helper.make_node("Softmax", ["h"], ["p"], name="Softmax", axis=-1),
        helper.make_node("LogSoftmax", ["h"], ["l"], name="LogSoftmax",
                         axis=-1),
        helper.make_node("Add", ["h", "p"], ["hp"], name="Add_p"),
        helper.make_node("Add", ["hp", "l"], ["logits"], name="Add_l")]
    return nodes, inits


def bn_split():
    """Training-mode BatchNormalization over 2 channels of 4·64·64 elements:
    each channel's statistics and adjoint sums split over 2 blocks
    (cudaBatchNormSplits), then pooled into a 3-class head."""
    inits = [numpy_helper.from_array(
                 (1 + 0.1 * rng.standard_normal(2)).astype(np.float32), "bn.s"),
             tensor("bn.b", (2,), 0.1),
             numpy_helper.from_array(np.zeros(2, np.float32), "bn.mean"),
             numpy_helper.from_array(np.ones(2, np.float32), "bn.var"),
             tensor("head", (3, 2), 1.0)]
    nodes = [
        helper.make_node("BatchNormalization",
                         ["x", "bn.s", "bn.b", "bn.mean", "bn.var"],
                         ["y", "bn.mean_out", "bn.var_out"],
                         name="BatchNorm", training_mode=1),
        helper.make_node("Relu", ["y"], ["r"], name="Relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["p"], name="Pool"),
        helper.make_node("Flatten", ["p"], ["f"], name="Flatten"),
        helper.make_node("Gemm", ["f", "head"], ["logits"], name="Gemm",
                         transB=1)]
    return nodes, inits


def residual():
    nodes, inits = [], []

    def conv_bn(name, x, cin, cout, kernel, stride):
        inits.extend([
            tensor(name + ".w", (cout, cin, kernel, kernel),
                   1 / np.sqrt(kernel * kernel * cin)),
            numpy_helper.from_array(
                (1 + 0.1 * rng.standard_normal(cout)).astype(np.float32),
                name + ".s"),
            tensor(name + ".b", (cout,), 0.1),
            numpy_helper.from_array(np.zeros(cout, np.float32), name + ".m"),
            numpy_helper.from_array(np.ones(cout, np.float32), name + ".v")])
        pad = kernel // 2
        nodes.extend([
            helper.make_node("Conv", [x, name + ".w"], [name + ".c"],
                             name=name + "_conv", kernel_shape=[kernel, kernel],
                             strides=[stride, stride], pads=[pad] * 4),
            helper.make_node("BatchNormalization",
                             [name + ".c", name + ".s", name + ".b",
                              name + ".m", name + ".v"],
                             [name + ".y", name + ".rm", name + ".rv"],
                             name=name + "_bn", training_mode=1)])
        return name + ".y"

    def block(name, x, cin, cout, stride):
        h = conv_bn(name + ".a", x, cin, cout, 3, stride)
        nodes.append(helper.make_node("Relu", [h], [name + ".r"],
                                      name=name + "_relu_a"))
        h = conv_bn(name + ".b", name + ".r", cout, cout, 3, 1)
        shortcut = (conv_bn(name + ".d", x, cin, cout, 1, stride)
                    if stride != 1 or cin != cout else x)
        nodes.extend([
            helper.make_node("Add", [h, shortcut], [name + ".sum"],
                             name=name + "_add"),
            helper.make_node("Relu", [name + ".sum"], [name + ".out"],
                             name=name + "_relu")])
        return name + ".out"

    h = block("b1", "x", 8, 16, 2)
    h = block("b2", h, 16, 16, 1)
    inits += [tensor("fc.w", (3, 16), 0.25), tensor("fc.b", (3,), 0.1)]
    nodes += [helper.make_node("GlobalAveragePool", [h], ["gap"], name="Gap"),
              helper.make_node("Flatten", ["gap"], ["flat"], name="Flatten"),
              helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"],
                               name="Gemm_fc", transB=1)]
    return nodes, inits


def attention(b=2, dropout=0.0):
    """Causal self-attention (see the module's docstring), at batch `b`,
    with a training-mode Dropout of `dropout` on the probabilities if it
    is not 0."""
    seq, d, heads = 20, 32, 2
    hd = d // heads
    mask = np.triu(np.full((seq, seq), -np.inf, np.float32), 1)
    inits = [tensor("wq", (d, d), d ** -0.5), tensor("wk", (d, d), d ** -0.5),
             tensor("wv", (d, d), d ** -0.5), tensor("head", (d, 3), d ** -0.5),
             numpy_helper.from_array(np.array([b, seq, heads, hd], np.int64),
                                     "split_shape"),
             numpy_helper.from_array(np.array([b * seq, d], np.int64),
                                     "rows_shape")]
    nodes = [helper.make_node("Constant", [], ["mask"], name="Mask",
                              value=numpy_helper.from_array(mask)),
             helper.make_node("Constant", [], ["scale"], name="Scale",
                              value=numpy_helper.from_array(
                                  np.array(hd ** -0.5, np.float32)))]
    for w in ("q", "k", "v"):
        nodes += [helper.make_node("MatMul", ["x", "w" + w], [w + "_proj"],
                                   name="Proj_" + w),
                  helper.make_node("Reshape", [w + "_proj", "split_shape"],
                                   [w + "_split"], name="Split_" + w),
                  helper.make_node("Transpose", [w + "_split"], [w + "_heads"],
                                   name="Heads_" + w,
                                   perm=[0, 2, 3, 1] if w == "k"
                                   else [0, 2, 1, 3])]
    nodes += [helper.make_node("MatMul", ["q_heads", "k_heads"], ["qk"],
                               name="QK"),
              helper.make_node("Mul", ["qk", "scale"], ["scaled"], name="Mul"),
              helper.make_node("Add", ["scaled", "mask"], ["masked"],
                               name="AddMask"),
              helper.make_node("Softmax", ["masked"], ["p"], name="Softmax",
                               axis=-1)]
    probabilities = "p"
    if dropout:
        nodes += [helper.make_node("Constant", [], ["ratio"], name="Ratio",
                                   value=numpy_helper.from_array(
                                       np.array(dropout, np.float32))),
                  helper.make_node("Constant", [], ["training"],
                                   name="Training",
                                   value=numpy_helper.from_array(
                                       np.array(True))),
                  helper.make_node("Dropout", ["p", "ratio", "training"],
                                   ["p_dropped"], name="AttnDropout")]
        probabilities = "p_dropped"
    nodes += [helper.make_node("MatMul", [probabilities, "v_heads"], ["o"],
                               name="PV"),
              helper.make_node("Transpose", ["o"], ["o_t"], name="Merge",
                               perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["o_t", "rows_shape"], ["rows"],
                               name="Rows"),
              helper.make_node("MatMul", ["rows", "head"], ["logits"],
                               name="Head")]
    return nodes, inits


def main():
    folder = sys.argv[1]
    save("deep_mlp.onnx", *gemm_chain([64, 64, 64, 64, 10], relu=True),
         [8, 64], [8, 10], folder)
    save("cnn_32x32.onnx", *cnn(), [8, 3, 32, 32], [8, 10], folder)
    save("many_params.onnx", *bias_chain(260), [4, 4], [4, 4], folder)
    save("long_rows.onnx", *long_rows(), [64, 320], [64, 3], folder)
    save("warp_rows.onnx", *warp_rows(), [96, 40], [96, 3], folder)
    save("dominant.onnx", *dominant(), [16, 300], [16, 300], folder)
    save("bn_split.onnx", *bn_split(), [4, 2, 64, 64], [4, 3], folder)
    save("residual.onnx", *residual(), [2, 8, 8, 8], [2, 3], folder)
    save("attention.onnx", *attention(), [2, 20, 32], [40, 3], folder)
    save("attention_dropout.onnx", *attention(b=1, dropout=0.2), [1, 20, 32],
         [20, 3], folder)


if __name__ == "__main__":
    main()

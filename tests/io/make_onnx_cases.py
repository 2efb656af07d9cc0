#!/usr/bin/python3
"""Writes the small hand-made ONNX files of tests/io/onnx/ (and the fuzz seed
tests/fuzz/corpus/onnx/tiny_mlp.onnx) with python3-onnx; no torch needed.
The files are committed: rerun only to change them."""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def t(name, arr):
    return numpy_helper.from_array(np.asarray(arr, dtype=np.float32), name)


def save(model, path):
    model.ir_version = 8
    onnx.save(model, path)


def graph(nodes, inputs, outputs, inits, name="g", opset=13):
    return helper.make_model(helper.make_graph(nodes, name, inputs, outputs, inits),
                             opset_imports=[helper.make_opsetid("", opset)])


X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
W = np.arange(12, dtype=np.float32).reshape(3, 4) / 10  # (out, in)
B = np.array([0.5, -0.5, 0.25], dtype=np.float32)


def tiny_mlp():  # Gemm(transB) -> Relu -> Softmax: the classifier-head rule
    return graph([helper.make_node("Gemm", ["x", "W", "B"], ["h"], name="fc", transB=1),
                  helper.make_node("Relu", ["h"], ["r"], name="relu"),
                  helper.make_node("Softmax", ["r"], ["y"], name="softmax", axis=-1)],
                 [X], [Y], [t("W", W), t("B", B)], name="tiny_mlp")


def gemm_no_trans():  # Gemm with B as (in, out) and a MatMul of two activations
    return graph([helper.make_node("Gemm", ["x", "Wt"], ["h"], name="fc"),
                  helper.make_node("Transpose", ["h"], ["ht"], name="tr", perm=[1, 0]),
                  helper.make_node("MatMul", ["h", "ht"], ["y"], name="scores")],
                 [X], [Y], [t("Wt", W.T)], name="gemm_no_trans")


def conv_net():  # an op we have no kernel for, and a Flatten that changes the features
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])
    return graph([helper.make_node("Conv", ["x", "K"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", ["c"], ["r"], name="relu"),
                  helper.make_node("Flatten", ["r"], ["f"], name="flatten"),
                  helper.make_node("Reshape", ["f", "shape"], ["y"], name="view")],
                 [x], [Y], [t("K", np.ones((3, 2, 3, 3))), numpy_helper.from_array(np.array([1, 48], dtype=np.int64), "shape")],
                 name="conv_net")


def attention_bits():  # the pieces of attention: views, two-activation MatMul, scale, mask, softmax, SiLU
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    mask = numpy_helper.from_array(np.triu(np.ones((3, 3), dtype=bool), 1), "mask")
    return graph([helper.make_node("Transpose", ["x"], ["xt"], name="tr", perm=[0, 2, 1]),
                  helper.make_node("MatMul", ["x", "xt"], ["s"], name="scores"),
                  helper.make_node("Mul", ["s", "scale"], ["ss"], name="scale"),
                  helper.make_node("Where", ["mask", "ninf", "ss"], ["m"], name="mask"),
                  helper.make_node("Softmax", ["m"], ["p"], name="softmax", axis=-1),
                  helper.make_node("Sigmoid", ["p"], ["sg"], name="sigmoid"),
                  helper.make_node("Mul", ["p", "sg"], ["y"], name="silu")],
                 [x], [Y], [t("scale", 0.5), t("ninf", -np.inf), mask], name="attention_bits")


def causal_mask_2x():  # the causal mask as torch 2.x writes it: slice bounds as Unsqueeze(Constant)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 3, 4])
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], name="tr", perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["x", "xt"], ["s"], name="scores")]
    inits = [t("bias", np.tril(np.ones((5, 5))).reshape(1, 1, 5, 5)), t("zero", 0.0), t("ninf", -np.inf),
             numpy_helper.from_array(np.array([0], dtype=np.int64), "axis0")]

    def bound(name, value):  # a 0-d int64 Constant unsqueezed to [1], as torch 2.x exports `:T`
        nodes.append(helper.make_node("Constant", [], [name + "_c"], name=name + "_const",
                                      value=numpy_helper.from_array(np.array(value, dtype=np.int64))))
        nodes.append(helper.make_node("Unsqueeze", [name + "_c", "axis0"], [name], name=name + "_unsqueeze"))

    # bias[:, :, :3, :3], the first slice with torch's INT64_MAX end for `:`
    # (which a float round trip would turn into a negative bound).
    for n, v in [("s0", 0), ("e0", 2**63 - 1), ("a0", 0), ("s1", 0), ("e1", 3), ("a1", 2), ("a2", 3)]:
        bound(n, v)
    nodes += [helper.make_node("Slice", ["bias", "s0", "e0", "a0"], ["b0"], name="slice_all"),
              helper.make_node("Slice", ["b0", "s1", "e1", "a1"], ["b1"], name="slice_rows"),
              helper.make_node("Slice", ["b1", "s1", "e1", "a2"], ["b2"], name="slice_cols"),
              helper.make_node("Equal", ["b2", "zero"], ["cond"], name="equal"),
              helper.make_node("Where", ["cond", "ninf", "s"], ["y"], name="mask")]
    return graph(nodes, [x], [Y], inits, name="main_graph")  # torch 2.x's name for every graph


def eval_conv():  # what an eval-mode export leaves: a batch norm folded into an exporter-made weight
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])
    return graph([helper.make_node("Conv", ["x", "onnx::Conv_7", "onnx::Conv_8"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", ["c"], ["y"], name="relu")],
                 [x], [Y], [t("onnx::Conv_7", np.ones((3, 2, 3, 3))), t("onnx::Conv_8", np.zeros(3))], name="eval_conv")


def eval_dropout():  # opset 13 Dropout without training_mode: the identity
    return graph([helper.make_node("Gemm", ["x", "W", "B"], ["h"], name="fc", transB=1),
                  helper.make_node("Dropout", ["h", "ratio"], ["d"], name="drop"),
                  helper.make_node("Relu", ["d"], ["y"], name="relu")],
                 [X], [Y], [t("W", W), t("B", B), t("ratio", 0.1)], name="eval_dropout")


def embed_split():  # token ids -> Gather -> Split -> Concat -> Add of a constant
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 5])
    return graph([helper.make_node("Gather", ["table", "ids"], ["e"], name="wte"),
                  helper.make_node("Split", ["e", "sizes"], ["a", "b"], name="split", axis=2),
                  helper.make_node("Concat", ["b", "a"], ["c"], name="cat", axis=2),
                  helper.make_node("Add", ["c", "pos"], ["y"], name="pos")],
                 [ids], [Y], [t("table", np.ones((10, 6))), numpy_helper.from_array(np.array([2, 4], dtype=np.int64), "sizes"),
                              t("pos", np.ones((5, 6)))], name="embed_split")


def weights():  # every parameter from the file: a grouped Conv with bias, a BatchNorm (eps 1e-3), a Gemm
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 3, 3])
    k = np.arange(6 * 2 * 2 * 2, dtype=np.float32).reshape(6, 2, 2, 2) / 50 - 0.4
    return graph([helper.make_node("Conv", ["x", "K", "KB"], ["c"], name="conv", group=2),
                  helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["n"], name="bn",
                                   epsilon=1e-3, training_mode=1),
                  helper.make_node("Relu", ["n"], ["r"], name="relu"),
                  helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool"),
                  helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
                  helper.make_node("Gemm", ["f", "W", "B"], ["y"], name="fc", transB=1)],
                 [x], [Y], [t("K", k), t("KB", [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]),
                            t("gamma", [1.5, 0.5, 1.25, 0.75, 1.1, 0.9]), t("beta", [0.0, 0.1, -0.1, 0.2, -0.2, 0.3]),
                            t("mean", np.full(6, 7.0)), t("var", np.full(6, 9.0)),
                            t("W", np.arange(18).reshape(3, 6) / 10), t("B", B)], name="weights")


def shape_fold():  # shape arithmetic and a mask made of constants: folded, never activations
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    i64 = lambda name, v: numpy_helper.from_array(np.array(v, dtype=np.int64), name)  # noqa: E731
    return graph([helper.make_node("Shape", ["x"], ["s"], name="shape"),
                  helper.make_node("Gather", ["s", "zero"], ["b"], name="batch", axis=0),
                  helper.make_node("Unsqueeze", ["b", "axis0"], ["b1"], name="unsq"),
                  helper.make_node("Concat", ["b1", "minus1"], ["target"], name="cat", axis=0),
                  helper.make_node("Reshape", ["x", "target"], ["flat"], name="flatten"),  # (2, 12)
                  helper.make_node("Reshape", ["flat", "s"], ["x3"], name="unflatten"),    # (2, 3, 4) again
                  helper.make_node("Slice", ["s", "one", "three"], ["tt"], name="tail"),    # [3, 4]
                  helper.make_node("ConstantOfShape", ["tt"], ["ones"], name="ones",
                                   value=numpy_helper.from_array(np.array([1.0], dtype=np.float32))),
                  helper.make_node("Trilu", ["ones", "k"], ["upper"], name="triu", upper=1),
                  helper.make_node("Cast", ["upper"], ["mask"], name="cast", to=TensorProto.BOOL),
                  helper.make_node("Where", ["mask", "ninf", "x3"], ["y"], name="fill")],
                 [x], [Y], [i64("zero", 0), i64("axis0", [0]), i64("minus1", [-1]), i64("one", [1]),
                            i64("three", [3]), i64("k", 1), t("ninf", -np.inf)], name="shape_fold")


def rmsnorm(torch_version):  # Llama's RMSNorm as torch exports it, its weight, then a rotary-style table
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    m = graph([helper.make_node("Add", ["x", "pos"], ["a"], name="/Add"),  # a learned table: everything after needs a gradient
               helper.make_node("Pow", ["a", "two"], ["sq"], name="/norm/Pow"),
               helper.make_node("ReduceMean", ["sq"], ["ms"], name="/norm/ReduceMean", axes=[-1], keepdims=1),
               helper.make_node("Add", ["ms", "eps"], ["mse"], name="/norm/Add"),
               helper.make_node("Sqrt", ["mse"], ["rms"], name="/norm/Sqrt"),
               helper.make_node("Div", ["one", "rms"], ["inv"], name="/norm/Div"),
               helper.make_node("Mul", ["a", "inv"], ["xn"], name="/norm/Mul"),
               helper.make_node("Mul", ["xn", "norm.weight"], ["h"], name="/norm/Mul_1"),
               helper.make_node("Mul", ["h", "cos"], ["y"], name="/Mul")],
              [x], [Y], [t("pos", np.arange(12).reshape(3, 4) / 24 - 0.25), t("two", 2.0), t("eps", 1e-6), t("one", 1.0), t("norm.weight", [1.5, 0.5, 1.25, 0.75]),
                         t("cos", np.arange(12).reshape(3, 4) / 12)], name="rmsnorm")
    m.producer_name, m.producer_version = "pytorch", torch_version
    return m


def layer_scale():  # ConvNeXt's block: a permuted LayerNorm's output (a strided view) + layer scale · Conv
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 3, 3])
    return graph([helper.make_node("Transpose", ["x"], ["xt"], name="/ln/Transpose", perm=[0, 2, 3, 1]),
                  helper.make_node("LayerNormalization", ["xt", "ln.weight", "ln.bias"], ["n"], name="/ln/LayerNormalization",
                                   axis=-1, epsilon=1e-6),
                  helper.make_node("Transpose", ["n"], ["h"], name="/ln/Transpose_1", perm=[0, 3, 1, 2]),
                  helper.make_node("Conv", ["h", "conv.weight"], ["c"], name="/conv/Conv"),
                  helper.make_node("Mul", ["layer_scale", "c"], ["s"], name="/Mul"),
                  helper.make_node("Add", ["h", "s"], ["y"], name="/Add")],
                 [x], [Y], [t("ln.weight", [1.5, 0.5, 1.25, 0.75]), t("ln.bias", [0.1, -0.1, 0.2, -0.2]),
                            t("conv.weight", np.arange(16).reshape(4, 4, 1, 1) / 16 - 0.5),
                            t("layer_scale", np.array([0.25, 0.5, 0.75, 1.0]).reshape(4, 1, 1))], name="layer_scale", opset=17)


def zero_pad():  # nn.AvgPool2d as torch exports it: Pad with all-zero pads, then AveragePool
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 4])
    i64 = numpy_helper.from_array(np.zeros(8, dtype=np.int64), "pads")
    return graph([helper.make_node("Conv", ["x", "conv.weight"], ["c"], name="/conv/Conv"),
                  helper.make_node("Pad", ["c", "pads"], ["p"], name="/pool/Pad", mode="constant"),
                  helper.make_node("AveragePool", ["p"], ["y"], name="/pool/AveragePool", kernel_shape=[2, 2],
                                   strides=[2, 2])],
                 [x], [Y], [t("conv.weight", np.arange(12).reshape(4, 3, 1, 1) / 12 - 0.5), i64], name="zero_pad")


def flatten_after_resize():  # interpolate as torch 1.13 exports it: Resize by scales concatenated from two Constants, which inference cannot read
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1, 2, 2])
    ones = helper.make_tensor("ones", TensorProto.FLOAT, [2], [1.0, 1.0])
    twos = helper.make_tensor("twos", TensorProto.FLOAT, [2], [2.0, 2.0])
    return graph([helper.make_node("Constant", [], ["c0"], name="/Constant", value=ones),
                  helper.make_node("Constant", [], ["c1"], name="/Constant_1", value=twos),
                  helper.make_node("Concat", ["c0", "c1"], ["scales"], name="/Concat", axis=0),
                  helper.make_node("Resize", ["x", "", "scales"], ["u"], name="/Resize", mode="linear",
                                   coordinate_transformation_mode="half_pixel"),
                  helper.make_node("Flatten", ["u"], ["f"], name="/Flatten", axis=1),
                  helper.make_node("Gemm", ["f", "h.weight", "h.bias"], ["y"], name="/h/Gemm", transB=1)],
                 [x], [Y], [t("h.weight", np.arange(48).reshape(3, 16) / 48 - 0.5), t("h.bias", [0.1, 0.2, 0.3])],
                 name="flatten_after_resize")


def ceil_pools():  # torch's export of avg_pool2d(3, 2, 1, ceil_mode=True, count_include_pad=False), a dilated max pool
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])
    return graph([helper.make_node("Conv", ["x", "conv.weight"], ["c"], name="/conv/Conv"),
                  helper.make_node("AveragePool", ["c"], ["a"], name="/AveragePool", kernel_shape=[3, 3],
                                   strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
                  helper.make_node("MaxPool", ["a"], ["y"], name="/MaxPool", kernel_shape=[2, 2], strides=[1, 1],
                                   dilations=[2, 2], ceil_mode=1)],
                 [x], [Y], [t("conv.weight", np.arange(12).reshape(4, 3, 1, 1) / 12 - 0.5)], name="ceil_pools")


def depth_space():  # ONNX's own DepthToSpace (DCR, not torch's CRD), SpaceToDepth back, a running sum over channels
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 3, 3])
    axis = numpy_helper.from_array(np.array(1, dtype=np.int64), "axis")
    return graph([helper.make_node("Conv", ["x", "conv.weight"], ["c"], name="/conv/Conv"),
                  helper.make_node("DepthToSpace", ["c"], ["d"], name="/DepthToSpace", blocksize=2, mode="DCR"),
                  helper.make_node("Tanh", ["d"], ["h"], name="/Tanh"),
                  helper.make_node("SpaceToDepth", ["h"], ["s"], name="/SpaceToDepth", blocksize=2),
                  helper.make_node("CumSum", ["s", "axis"], ["y"], name="/CumSum")],
                 [x], [Y], [t("conv.weight", np.arange(32).reshape(8, 4, 1, 1) / 32 - 0.45), axis], name="depth_space")


def lstm(torch_version=None, bias=True):  # one forward LSTM layer as torch exports nn.LSTM (zero initial states), its Y the output
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2, 4])  # (T, B, I)
    w = np.arange(8 * 4).reshape(1, 8, 4) / 64 - 0.25  # gate blocks of 2 rows in ONNX's order i, o, f, c
    r = np.arange(8 * 2).reshape(1, 8, 2) / 32 - 0.25
    b = np.arange(16).reshape(1, 16) / 16 - 0.5  # W's bias then R's
    inits = [t("W", w), t("R", r)] + ([t("B", b)] if bias else []) + [t("h0", np.zeros((1, 2, 2))), t("c0", np.zeros((1, 2, 2)))]
    m = graph([helper.make_node("LSTM", ["x", "W", "R", "B" if bias else "", "", "h0", "c0"], ["y"], name="/lstm/LSTM",
                                hidden_size=2)],
              [x], [Y], inits, name="lstm")
    if torch_version:
        m.producer_name, m.producer_version = "pytorch", torch_version
    return m


def gru():  # one forward GRU layer as torch exports nn.GRU (linear_before_reset, zero initial state), its Y the output
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2, 4])  # (T, B, I)
    w = np.arange(6 * 4).reshape(1, 6, 4) / 48 - 0.25  # gate blocks of 2 rows in ONNX's order z, r, h
    r = np.arange(6 * 2).reshape(1, 6, 2) / 24 - 0.25
    b = np.arange(12).reshape(1, 12) / 12 - 0.5  # W's bias then R's
    return graph([helper.make_node("GRU", ["x", "W", "R", "B", "", "h0"], ["y"], name="/gru/GRU",
                                   hidden_size=2, linear_before_reset=1)],
                 [x], [Y], [t("W", w), t("R", r), t("B", b), t("h0", np.zeros((1, 2, 2)))], name="gru")


def global_pool(torch_version):  # a Conv pooled to 1x1, as torch exports adaptive_avg_pool2d(1)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 4])
    m = graph([helper.make_node("Conv", ["x", "conv.weight"], ["c"], name="/conv/Conv"),
               helper.make_node("GlobalAveragePool", ["c"], ["y"], name="/pool/GlobalAveragePool")],
              [x], [Y], [t("conv.weight", np.arange(12).reshape(4, 3, 1, 1) / 12 - 0.5)], name="global_pool")
    m.producer_name, m.producer_version = "pytorch", torch_version
    return m


def dangling():
    return graph([helper.make_node("Relu", ["ghost"], ["y"], name="relu")], [X], [Y], [])


def symbolic():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    return graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], [x], [Y], [])


def bad_weight():
    return graph([helper.make_node("Gemm", ["x", "W5", "B"], ["y"], name="fc", transB=1)],
                 [X], [Y], [t("W5", np.zeros((3, 5))), t("B", B)])


def two_outputs():
    return graph([helper.make_node("Relu", ["x"], ["y"], name="relu"), helper.make_node("Tanh", ["x"], ["z"], name="tanh")],
                 [X], [Y, helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], [])


def many_inputs():
    return graph([helper.make_node("Concat", ["x"] * 300, ["y"], name="cat", axis=1)], [X], [Y], [])


def rank9():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1] * 9)
    return graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], [x], [Y], [])


if __name__ == "__main__":
    out = os.path.join(HERE, "onnx")
    os.makedirs(out, exist_ok=True)
    for name, make in [("tiny_mlp", tiny_mlp), ("gemm_no_trans", gemm_no_trans), ("conv_net", conv_net),
                       ("dangling", dangling), ("symbolic", symbolic), ("bad_weight", bad_weight), ("two_outputs", two_outputs),
                       ("many_inputs", many_inputs), ("rank9", rank9), ("attention_bits", attention_bits),
                       ("eval_conv", eval_conv), ("eval_dropout", eval_dropout), ("embed_split", embed_split),
                       ("causal_mask_2x", causal_mask_2x), ("weights", weights), ("shape_fold", shape_fold),
                       ("layer_scale", layer_scale), ("lstm", lstm), ("gru", gru), ("zero_pad", zero_pad), ("ceil_pools", ceil_pools), ("rmsnorm_torch1", lambda: rmsnorm("1.13.0")),
                       ("global_pool_torch1", lambda: global_pool("1.13.0")), ("global_pool_torch2", lambda: global_pool("2.6.0")), ("rmsnorm_torch2", lambda: rmsnorm("2.6.0")),
                       ("lstm_torch2", lambda: lstm("2.6.0")), ("lstm_nobias_torch2", lambda: lstm("2.6.0", bias=False)),
                       ("flatten_after_resize", flatten_after_resize),
                       ("depth_space", depth_space)]:
        save(make(), os.path.join(out, name + ".onnx"))
    save(tiny_mlp(), os.path.join(HERE, "..", "fuzz", "corpus", "onnx", "tiny_mlp.onnx"))
    print("wrote", out)

#!/usr/bin/python3
"""Models whose forward returns their own loss, exported to ONNX in training
mode, through `remat run` (issue 11: the importer took the export's
SoftmaxCrossEntropyLoss for a second output and refused the targets input).

1. An MLP returning F.cross_entropy(logits, y): remat's loss and gradients, on
   the dumped input and labels, equal the *original module's* with its own
   weights, the file's (float64; relative error < 1e-4), so the file's loss is
   the one trained on the file's weights.
2. The same written as LogSoftmax and NegativeLogLikelihoodLoss nodes (torch
   exports F.nll_loss(F.log_softmax(z)) as one SoftmaxCrossEntropyLoss; other
   exporters do not).
3. A nanoGPT-style GPT whose forward returns (logits, loss), with dropout: every
   strategy runs with store-all's loss and gradients, and PyTorch running the
   file with its own weights (onnx_file_crosscheck.py) agrees.
4. What remat cannot take is one clear error: class weights, reduction='sum',
   rank-3 logits.
Exit 77 (skip) without torch."""
import copy
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    print(f"SKIP: cannot import torch with {sys.executable}: {e}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torch_crosscheck import read_safetensors  # noqa: E402
from onnx_gpt_crosscheck import Block, B, T, D, V, L  # noqa: E402
import onnx_file_crosscheck  # noqa: E402

failures = []


class Mlp(nn.Module):
    def __init__(self, nll=False):
        super().__init__()
        self.fc1, self.fc2, self.nll = nn.Linear(8, 16), nn.Linear(16, 5), nll

    def forward(self, x, y):
        z = self.fc2(torch.relu(self.fc1(x)))
        return F.nll_loss(F.log_softmax(z, dim=1), y) if self.nll else F.cross_entropy(z, y)


class GptWithLoss(nn.Module):
    """nanoGPT's forward(idx, targets) -> (logits, loss)."""

    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(V, D)
        self.wpe = nn.Parameter(0.02 * torch.randn(T, D))
        self.drop = nn.Dropout(0.1)
        self.h = nn.ModuleList([Block() for _ in range(L)])
        self.ln_f = nn.LayerNorm(D)
        self.lm_head = nn.Linear(D, V, bias=False)

    def forward(self, idx, targets):
        x = self.drop(self.wte(idx) + self.wpe)
        for b in self.h:
            x = b(x)
        logits = self.lm_head(self.ln_f(x))
        return logits, F.cross_entropy(logits.view(-1, V), targets.view(-1), ignore_index=-1)


def export(module, args, path, outputs):
    torch.onnx.export(module.train(), args, path, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, opset_version=13, input_names=["x", "y"], output_names=outputs)


def run(remat, *args):
    return subprocess.run([remat, *args], capture_output=True, text=True)


def write_nll_graph(module, path):
    """The MLP as Gemm, Relu, Gemm, LogSoftmax, NegativeLogLikelihoodLoss."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    inits = [numpy_helper.from_array(p.detach().numpy(), name) for name, p in module.named_parameters()]
    nodes = [helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], name="fc1", transB=1),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("Gemm", ["r", "fc2.weight", "fc2.bias"], ["z"], name="fc2", transB=1),
             helper.make_node("LogSoftmax", ["z"], ["logp"], name="log_softmax", axis=1),
             helper.make_node("NegativeLogLikelihoodLoss", ["logp", "y"], ["loss"], name="nll")]
    graph = helper.make_graph(nodes, "mlp_nll", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8]),
                                                 helper.make_tensor_value_info("y", TensorProto.INT64, [4])],
                              [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def check_against_module(remat, tmp, nll):
    torch.manual_seed(11)
    module = Mlp(nll)
    path = os.path.join(tmp, f"mlp_{'nll' if nll else 'ce'}.onnx")
    if nll:
        write_nll_graph(module, path)
    else:
        export(module, (torch.randn(4, 8), torch.randint(0, 5, (4,))), path, ["loss"])
    dump = os.path.join(tmp, "dump_" + os.path.basename(path))
    r = run(remat, "run", "--model", path, "--strategy", "sqrt", "--backend", "cpu", "--repeat", "1", "--dump", dump)
    if r.returncode != 0:
        failures.append(f"{path}: remat run failed: {r.stderr.strip()}")
        return
    t, meta = read_safetensors(os.path.join(dump, "tensors.safetensors"))
    ops = json.loads(meta["ops"]) if "ops" in meta else json.load(open(os.path.join(dump, "model.json")))["ops"]
    kinds = [op["kind"] for op in ops]
    if kinds != ["Input", "Linear", "ReLU", "Linear", "SoftmaxCELoss"]:
        failures.append(f"{path}: ops {kinds}: the file's loss should be the only one")
        return
    # The original module, in float64, with its own weights (the file's) on
    # remat's input and labels.
    ref = copy.deepcopy(module).double()
    linears = [op["id"] for op in ops if op["kind"] == "Linear"]
    loss = ref(torch.tensor(t["input"], dtype=torch.float64), torch.tensor(t["labels"].astype(np.int64)))
    loss.backward()
    got = float(t["loss"])
    if abs(got - loss.item()) > 1e-4 * abs(loss.item()):
        failures.append(f"{path}: loss remat {got}, the module {loss.item()}")
    for mod, v in zip([ref.fc1, ref.fc2], linears):
        for slot, p in (("weight", mod.weight), ("bias", mod.bias)):
            g = t[f"grad.{v}.{slot}"].astype(np.float64)
            err = np.linalg.norm(g - p.grad.numpy()) / np.linalg.norm(p.grad.numpy())
            if not err < 1e-4:
                failures.append(f"{path}: gradient of op {v} slot {slot}: relative error {err:.2e}")
    print(f"{os.path.basename(path)}: loss remat {got:.8g}, module {loss.item():.8g}")


def check_gpt(remat, tmp):
    torch.manual_seed(5)
    path = os.path.join(tmp, "gpt_with_loss.onnx")
    export(onnx_file_crosscheck.distinct_weights(GptWithLoss()), (torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))), path, ["logits", "loss"])
    m = run(remat, "model", "--model", path)
    if m.returncode != 0 or "the loss 'loss' is trained" not in m.stderr or "appended" in m.stderr:
        failures.append(f"gpt: remat model said: {m.stderr.strip()} (exit {m.returncode})")
    r = run(remat, "run", "--model", path, "--strategy", "all", "--repeat", "1", "--json")
    if r.returncode != 0:
        failures.append(f"gpt: remat run failed: {r.stderr.strip()}")
        return
    runs = json.loads(r.stdout)["strategies"]
    base = next(s for s in runs if s["name"] == "store-all")
    for s in runs:
        if s["status"] != "ok" or s["grad_hash"] != base["grad_hash"] or s["loss"] != base["loss"]:
            failures.append(f"gpt {s['name']}: {s['status']} loss {s.get('loss')} hash {s.get('grad_hash')}")
    print(f"gpt: {len(runs)} strategies agree with store-all")
    if not onnx_file_crosscheck.check(remat, path, "sqrt"):
        failures.append("gpt: onnx_file_crosscheck.py disagrees")


class Refused(nn.Module):
    def __init__(self, how):
        super().__init__()
        self.fc, self.how = nn.Linear(8, 5), how

    def forward(self, x, y):
        z = self.fc(x)
        if self.how == "weights":
            return F.cross_entropy(z, y, weight=torch.ones(5))
        if self.how == "sum":
            return F.cross_entropy(z, y, reduction="sum")
        return F.cross_entropy(z.view(2, 5, 2), y.view(2, 2))  # classes on axis 1 of a rank-3 tensor


def check_refusals(remat, tmp):
    for how, says in (("weights", "class weights"), ("sum", "reduction 'sum'"), ("rank3", "reshape the logits")):
        path = os.path.join(tmp, f"refused_{how}.onnx")
        export(Refused(how), (torch.randn(4, 8), torch.randint(0, 5, (4,))), path, ["loss"])
        r = run(remat, "model", "--model", path)
        lines = [ln for ln in r.stderr.splitlines() if ln.startswith("remat: error")]
        if r.returncode != 2 or len(lines) != 1 or says not in lines[0] or "SoftmaxCrossEntropyLoss" not in lines[0]:
            failures.append(f"{how}: exit {r.returncode}, stderr {r.stderr.strip()!r}")
        else:
            print(f"{how}: {lines[0]}")


def main():
    remat = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        check_against_module(remat, tmp, nll=False)
        check_against_module(remat, tmp, nll=True)
        check_gpt(remat, tmp)
        check_refusals(remat, tmp)
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

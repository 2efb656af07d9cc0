"""remat_capture: one training step of a PyTorch module, written as a Remat
Studio model (the JSON format of docs/model-format.md).

    import remat_capture
    doc = remat_capture.capture(model, torch.randn(8, 3, 224, 224),
                                loss_fn=lambda out: F.cross_entropy(out, labels))
    remat_capture.save(doc, "model.json")

or from a shell:

    python3 -m remat_capture my_model.py:build --input 8,3,224,224 -o model.json

It runs the forward pass and the loss on the CPU with a dispatch-level trace
(every aten op, views as views) and saved_tensors_hooks (what autograd keeps
for backward, per op), then the backward pass. See docs/model-format.md,
"Capturing a model from PyTorch".
"""
import json
import os

import torch

from ._apply import PlanError, apply, has_selective_checkpointing, load_plan
from ._build import Builder
from ._trace import record, storage_key, storage_nbytes

__all__ = ["capture", "save", "torch_saved_bytes", "apply", "load_plan", "PlanError", "has_selective_checkpointing"]


def capture(module, example_input, loss_fn=None, name=None):
    """Runs one training step of `module` on `example_input` (CPU tensors)
    and returns the model as a dict in the JSON model format.

    loss_fn(output) -> scalar tensor; default: the output itself when it is a
    scalar, else mean squared error against a seeded random target (as remat
    appends to an imported ONNX model). Parameters, buffers and the loss's
    target are the baseline, not activations."""
    module.train()
    targets = []

    def step():
        out = module(example_input)
        if loss_fn is not None:
            loss = loss_fn(out)
        elif isinstance(out, torch.Tensor) and out.dim() == 0:
            loss = out
        else:
            g = torch.Generator().manual_seed(0)
            target = torch.randn(out.shape, generator=g, dtype=out.dtype)
            targets.append(target)
            loss = torch.nn.functional.mse_loss(out, target)
        return loss

    rec, loss = record(module, step)
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        raise ValueError("the loss must be a scalar tensor")
    builder = Builder(rec, module, example_input, targets)
    ops, notes = builder.build(loss)
    torch_count = _count(rec, module, targets, builder.loss_targets | builder.weight_casts)
    loss.backward()  # the step completes: what was saved sufficed
    doc = {"format": "remat-model", "version": 1,
           "name": name or type(module).__name__,
           "description": (f"captured by remat_capture from PyTorch {torch.__version__}: {len(rec.ops)} aten ops, "
                           f"{len(ops)} remat ops; autograd saved {torch_count} bytes for backward "
                           "(unique storages; parameters, buffers and the target left out)"),
           "ops": ops}
    if notes:
        doc["description"] += "; notes: " + "; ".join(notes)
    # Not written to the file: which module parameter each of remat's
    # parameter tensors ("op.name", as `remat run --dump` names them) is, for
    # checks that run the module itself on remat's weights.
    doc["parameters"] = builder.parameters
    return doc


def _count(rec, module, targets, loss_targets):
    """PyTorch's own count: unique storages of every saved tensor, parameters,
    buffers and the loss's target (labels, regression targets: storage keys in
    loss_targets; under torch.autocast also its casts of the weights) left out
    (the figure docs/model-format.md quotes)."""
    excluded = {storage_key(t) for t in list(module.parameters()) + list(module.buffers()) + targets}
    excluded |= loss_targets
    seen = {}
    for p in rec.packs:
        key = storage_key(p.tensor)
        if key not in excluded:
            seen[key] = storage_nbytes(p.tensor)
    return sum(seen.values())


def torch_saved_bytes(doc):
    """The count capture() put in the description (for scripts)."""
    text = doc.get("description", "")
    marker = "autograd saved "
    i = text.find(marker)
    return int(text[i + len(marker):].split(" ", 1)[0]) if i >= 0 else None


def save(doc, path):
    """Writes the model, one op per line (as `remat model --write` does), whole or not at all."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write('{"format": "remat-model", "version": 1, "name": %s,\n "description": %s,\n "ops": [\n'
                % (json.dumps(doc["name"]), json.dumps(doc.get("description", ""))))
        f.write(",\n".join("  " + json.dumps(op, separators=(",", ":")) for op in doc["ops"]))
        f.write("\n]}\n")
    os.replace(tmp, path)

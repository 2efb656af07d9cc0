"""remat_capture.apply(module, plan): a strategy's schedule, exported by
`remat export --torch-plan`, put on the user's module with PyTorch's own
checkpointing (torch.utils.checkpoint, non-reentrant) where its regions can
hold the schedule, else with saved_tensors_hooks (_replay.py).

Each backward phase of remat's schedule that recomputes something becomes one
checkpoint region: a module's forward, or a run of consecutive children of an
nn.Sequential, holding the ops that phase recomputes. PyTorch keeps a region's
inputs and recomputes the region when its backward begins, as remat's phase
does. Inside a region:

- with selective activation checkpointing (PyTorch 2.4 and later:
  create_selective_checkpoint_contexts), the ops remat keeps are MUST_SAVE and
  the others PREFER_RECOMPUTE, so a region may hold kept ops;
- without it (PyTorch 1.13), a plain region recomputes everything in it, so a
  plan is applied only when each phase's ops are exactly a region's ops.

A checkpoint-set plan no region holds (a phase that cuts a residual block,
or one a region would run extra ops for) is replayed op by op instead with
saved_tensors_hooks, the machinery non-reentrant checkpointing is built on
(_replay.py); so is a compress plan (bf16 or f16), its checkpoints kept as
casts. Refused with the reason (PlanError): nested recomputation (revolve,
budget: an op recomputed twice), offload (saved_tensors_hooks can move a
tensor at pack time but fetch it only at unpack, not a segment ahead as
remat's schedule does), int8 compression (codes and a scale: no single cast),
a recomputed op that draws random numbers.

Ops are matched by the capture's names: the aten overload and its occurrence
among that overload's calls in the step ("call"), so the module must be the one
captured, called on an input of the captured shape.
"""
import functools
import json

import torch
import torch.utils.checkpoint as _ckpt

try:  # PyTorch 1.13 and 2.x
    from torch.utils._python_dispatch import TorchDispatchMode
except ImportError:  # pragma: no cover
    TorchDispatchMode = object

__all__ = ["apply", "load_plan", "PlanError", "has_selective_checkpointing"]


class PlanError(ValueError):
    """A plan this PyTorch cannot apply as remat scheduled it; the message says why."""


def has_selective_checkpointing():
    return hasattr(_ckpt, "create_selective_checkpoint_contexts") and hasattr(_ckpt, "CheckpointPolicy")


def load_plan(plan):
    """A plan dict, or the path of the JSON file `remat export --torch-plan` wrote."""
    if isinstance(plan, str):
        with open(plan) as f:
            plan = json.load(f)
    if not isinstance(plan, dict) or plan.get("format") != "remat-torch-plan":
        raise PlanError("not a remat torch plan (expected {\"format\": \"remat-torch-plan\", ...}; "
                        "write one with remat export --torch-plan)")
    if plan.get("version") != 1:
        raise PlanError(f"torch plan version {plan.get('version')} is not supported (this reads version 1)")
    return plan


# ---- which region holds each phase ----------------------------------------------------------

class Region:
    """One checkpoint region: module `path`'s forward, or children [first,
    last) of the nn.Sequential at `path`."""

    def __init__(self, path, module, ops, first=None, last=None):
        self.path, self.module, self.ops = path, module, ops
        self.first, self.last = first, last
        self.phase = None
        self.stop = -1           # the last op in it whose node saves something
        self.must_save = set()   # kept ops a selective policy caches

    def name(self):
        if self.first is None:
            return self.path or "(the whole module)"
        return f"{self.path or '(root)'}[{self.first}:{self.last}]"


def _under(path, module_path):
    return module_path is not None and (path == "" or module_path == path or module_path.startswith(path + "."))


def _candidates(module, plan):
    ops = [op for op in plan["ops"] if op["kind"] != "Input"]
    found = []
    for path, m in module.named_modules():
        found.append(Region(path, m, {op["id"] for op in ops if _under(path, op.get("module"))}))
        if isinstance(m, torch.nn.Sequential):
            names = [n for n, _ in m.named_children()]
            child = [f"{path}.{n}" if path else n for n in names]
            sets = [{op["id"] for op in ops if _under(c, op.get("module"))} for c in child]
            for i in range(len(names)):
                for j in range(i + 1, len(names) + 1):
                    if (i, j) != (0, len(names)):
                        found.append(Region(path, m, set().union(*sets[i:j]), i, j))
    return [r for r in found if r.ops]


def _names(plan, ids, limit=3):
    ids = sorted(ids)
    text = ", ".join(f"{plan['ops'][i]['name']} (op {i})" for i in ids[:limit])
    return text + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


# aten ops that draw random numbers (a replay or a recomputation draws others
# unless the generator's state is put back).
RANDOM = ("dropout", "bernoulli", "rand", "normal", "multinomial")

# Kinds whose autograd node saves a parameter (a weight, a norm's scale):
# their recomputation runs even when they save no activation.
_WEIGHTED = {"Linear", "Dense", "Conv", "BatchNorm", "LayerNorm", "Embedding"}


def _packs(op):
    """Whether the op's autograd node saves anything (so a recomputation must run it)."""
    return bool(op.get("saved")) or op.get("aux_bytes", 0) > 0 or op["kind"] in _WEIGHTED


def _owner(ops, v):
    """The op owning A(v)'s storage (a view's, down its inputs)."""
    while ops[v]["view"] and ops[v].get("inputs"):
        v = ops[v]["inputs"][0]
    return v


def plan_regions(module, plan, selective):
    """The checkpoint regions of `plan` on `module`, one per backward phase,
    or PlanError with the reason."""
    kind = plan.get("kind")
    strategy = plan.get("strategy")
    if kind == "nested":
        twice = [op["id"] for op in plan["ops"] if op["recomputes"] > 1]
        raise PlanError(f"'{strategy}' recomputes {_names(plan, twice)} more than once (nested recomputation); "
                        "torch.utils.checkpoint recomputes a region once per backward pass, so remat's schedule "
                        "cannot be expressed as checkpoint regions: choose a checkpoint-set strategy (sqrt, every-k, "
                        "manual, selective, auto, optimal)")
    if kind == "offload":
        raise PlanError(f"'{strategy}' moves given checkpoints to the host and fetches each back a segment before "
                        "its backward reads it; saved_tensors_hooks can move a saved tensor when autograd packs "
                        "it, but can fetch it only when backward unpacks it, so the device would hold another "
                        "set of tensors than remat predicts at each step (and on the CPU there is no host tier "
                        "to move to): not applied. Use the plan of its base strategy, and "
                        "torch.autograd.graph.save_on_cpu if you want PyTorch's own offload")
    if kind == "compress":
        raise PlanError(f"'{strategy}' keeps given checkpoints converted: no checkpoint region converts what it "
                        "keeps (apply() replays such a plan op by op, with how='auto' or 'replay')")
    if kind != "checkpoint-set":
        raise PlanError(f"unknown plan kind '{kind}'")
    ops = plan["ops"]
    phases = {}
    for op in ops:
        if op["phase"] >= 0:
            phases.setdefault(op["phase"], set()).add(op["id"])
    missing = [op["id"] for op in ops if op["phase"] >= 0 and op.get("module") is None]
    if missing:
        raise PlanError(f"'{strategy}' recomputes {_names(plan, missing)}, which ran outside the module "
                        "(in the loss function): apply() can only checkpoint the module's own forward")
    cands = _candidates(module, plan)
    regions = []
    for g in sorted(phases):
        want = phases[g]
        fits = [r for r in cands if want <= r.ops]
        if not fits:
            raise PlanError(f"phase {g} of '{strategy}' recomputes {_names(plan, want)}, which no single module "
                            "or run of nn.Sequential children holds")
        best = min(fits, key=lambda r: len(r.ops))
        extra = best.ops - want
        # PyTorch 2.x stops a recomputation once the region's last saved
        # tensor is made again: ops after the last one that saves anything
        # are not run again (and what SAC cached for them would stay cached
        # to the end of the step, so they are not MUST_SAVE).
        best.stop = max((i for i in best.ops if _packs(ops[i])), default=-1)
        if selective:
            bad = {i for i in extra if not ops[i]["keep"] and i <= best.stop}
            best.must_save = {i for i in extra if ops[i]["keep"] and i <= best.stop}
            how = ("neither recomputes in that phase nor keeps; selective checkpointing could only save them "
                   "(more memory) or recompute them (more ops)")
        else:
            bad = extra
            how = ("does not recompute in that phase; torch.utils.checkpoint without selective checkpointing "
                   f"(PyTorch {torch.__version__}; it needs 2.4 or later) recomputes a region whole")
        if bad:
            raise PlanError(f"phase {g} of '{strategy}' recomputes {_names(plan, want)}; the smallest region "
                            f"holding them, {best.name()}, also runs {_names(plan, bad)}, which remat {how}")
        inside = best.ops
        outside_inputs = {u for i in inside for u in ops[i].get("inputs", []) if u not in inside}
        dropped = [u for u in outside_inputs if not ops[u]["keep"]]
        if dropped:
            raise PlanError(f"phase {g} of '{strategy}': region {best.name()} reads {_names(plan, dropped)}, which "
                            "PyTorch keeps as the region's input until its backward and remat does not keep")
        held = sorted({s for op in ops if op["id"] not in inside for s in op.get("saved", [])
                       if _owner(ops, s) in inside and not ops[s]["keep"]})
        if held:
            raise PlanError(f"phase {g} of '{strategy}': {_names(plan, held)}, made in region {best.name()}, "
                            "is saved by an op after it, so PyTorch keeps it from the forward pass; remat "
                            "recomputes it instead")
        best.phase = g
        regions.append(best)
    return regions


# ---- running a region under checkpoint --------------------------------------------------------

class _State:
    """What the measuring harness (_measure.py) sets and reads: whether it is
    measuring (then ops are counted even where no policy needs it), whether a
    region is being recomputed, and the (aten, call) of the op about to run in it."""
    measuring = False
    recomputing = 0
    current = None
    outer_pack = None  # _measure's pack hook, which the replay's own hooks call (_replay.py)


state = _State()


_names_of = {}

# One module call reaches other aten ops on other devices. The capture runs on
# the CPU, where F.batch_norm's _batch_norm_impl_index
# (aten/src/ATen/native/Normalization.cpp) calls native_batch_norm; on CUDA it
# calls cudnn_batch_norm for a float input of 3 or more dimensions (on ROCm
# miopen_batch_norm), which returns a fourth tensor (cudnn's reserve space).
# So that a plan captured on the CPU names the same calls on the GPU, the
# calls of such a family are named and counted as one ("batch_norm", the
# call's place among the step's batch norms), the plan's ops likewise
# (plan_keys). Without it a plan's recomputed batch norms ran on the GPU
# unrecognized and were kept (gpu/torch_apply.py, 2026-11-28: the ResNet's
# replayed plans kept 132,096 to 394,364 B more at the forward's end).
_FAMILY = {f"aten.{n}": "batch_norm" for n in (
    "native_batch_norm.default", "_native_batch_norm_legit.default", "_native_batch_norm_legit.no_stats",
    "_native_batch_norm_legit_no_training.default", "_batch_norm_with_update.default",
    "cudnn_batch_norm.default", "miopen_batch_norm.default")}


def _name(func):
    """"aten.addmm.default", as the capture wrote it (str() of an overload),
    or its family's name (_FAMILY), cached."""
    n = _names_of.get(func)
    if n is None:
        n = str(func)
        n = _names_of[func] = _FAMILY.get(n, n)
    return n


def plan_keys(plan):
    """op id -> the (name, call) _name and the counters give its aten call at
    run time: the capture's (aten, call), or for a family's op (_FAMILY) the
    family's name and the call's place among the family's calls (the capture's
    ops are in the order they ran). Ops no aten call made are left out."""
    keys, seen, ranks = {}, {}, {}
    for op in plan["ops"]:
        aten = op.get("aten")
        if not aten:
            continue
        fam = _FAMILY.get(aten)
        if fam is None:
            keys[op["id"]] = (aten, op["call"])
            continue
        k = seen.get((aten, op["call"]))
        if k is None:
            k = seen[(aten, op["call"])] = (fam, ranks.get(fam, 0))
            ranks[fam] = k[1] + 1
        keys[op["id"]] = k
    return keys


class _NoCounter:
    """Stands in for the counter where nothing needs the calls (plain regions, not measured)."""
    counts = {}
    paused = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _CallCounter(TorchDispatchMode):
    """Counts every aten op by overload, as the capture numbered them ("call").
    In the forward pass it runs under the whole module; in a recomputation,
    from the counts the region started with."""

    def __init__(self, counts=None, announce=False):
        super().__init__()
        self.counts = dict(counts or {})
        self.announce = announce
        # Above zero while torch.utils.checkpoint's own code runs around a
        # region (PyTorch 2.x dispatches ops of its own there): not the module's.
        self.paused = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.paused:
            return func(*args, **(kwargs or {}))
        key = _name(func)
        call = self.counts.get(key, 0)
        self.counts[key] = call + 1
        if self.announce:
            state.current = (key, call)
        return func(*args, **(kwargs or {}))


class Applied(torch.nn.Module):
    """The module with the plan's checkpoint regions installed while it runs
    (the module itself is left as it was between calls)."""

    def __init__(self, module, plan, regions, selective):
        super().__init__()
        self.module = module
        self.plan = plan
        self.regions = regions
        self.selective = selective
        # (aten, call) of the kept ops a region's recomputation reaches: the
        # selective policy's MUST_SAVE (every other op: PREFER_RECOMPUTE).
        self._keep = {}
        keys = plan_keys(plan)
        for r in regions:
            for i in r.must_save:
                if i in keys:
                    self._keep[keys[i]] = True
        self._counter = None
        # One patch per module: its whole forward, or its runs of children.
        ops = plan["ops"]
        self._patches = []
        by_seq = {}
        for r in regions:
            # torch.utils.checkpoint stashes the CPU generator's state (a
            # 5,056 B tensor, torch.get_rng_state()) and each used CUDA
            # device's (in host memory) per region call, kept to its backward,
            # so that a random op draws the same numbers again. remat keeps no
            # such thing: a region that runs no random op stashes none.
            r.random = any(any(w in (ops[i].get("aten") or "") for w in RANDOM) for i in r.ops)
            if r.first is None:
                self._patches.append((r.module, r))
            elif id(r.module) in by_seq:
                by_seq[id(r.module)].append(r)
            else:
                by_seq[id(r.module)] = [r]
                self._patches.append((r.module, by_seq[id(r.module)]))

    def describe(self):
        how = "selective checkpointing" if self.selective else "torch.utils.checkpoint regions"
        if not self.regions:
            return f"{self.plan['strategy']}: nothing recomputed, no region"
        names = ", ".join(r.name() for r in self.regions)
        return f"{self.plan['strategy']}: {len(self.regions)} {how}: {names}"

    def forward(self, *args, **kwargs):
        patched = []
        # The calls are counted only where they are needed: by the selective
        # policy, or to name what a measured step recomputes (a Python
        # dispatch mode slows every op).
        counter = _CallCounter() if self.selective or state.measuring else _NoCounter()
        self._counter = counter
        try:
            for m, runs in self._patches:
                self._install(m, runs, patched)
            with counter:
                return self.module(*args, **kwargs)
        finally:
            for m, had, old in reversed(patched):
                if had:
                    m.forward = old
                else:
                    del m.forward
            self._counter = None

    # A region is run through a function made per call: the forward pass
    # notes the counts it started from, a second call is the recomputation.
    def _region_fn(self, run):
        counter = self._counter
        base = dict(counter.counts)
        calls = [0]

        def fn(*args):
            calls[0] += 1
            if calls[0] == 1:
                counter.paused -= 1
                try:
                    return run(*args)
                finally:
                    counter.paused += 1
            state.recomputing += 1
            try:
                with (_CallCounter(base, announce=True) if state.measuring else _NoCounter()):
                    return run(*args)
            finally:
                state.recomputing -= 1
                state.current = None
        return fn

    def _checkpoint(self, region, run, *args):
        fn = self._region_fn(run)
        self._counter.paused += 1
        try:
            if not self.selective:
                return _ckpt.checkpoint(fn, *args, use_reentrant=False, preserve_rng_state=region.random)
            return _ckpt.checkpoint(fn, *args, use_reentrant=False, preserve_rng_state=region.random,
                                    context_fn=self._contexts())
        finally:
            self._counter.paused -= 1

    def _contexts(self):
        """One pair of SAC modes per region call. The policy names an op by its
        overload and call; the forward pass reads the call from the module's
        counter (the op has not reached it yet: SAC's mode runs first), and the
        recomputation repeats the forward pass's decisions in order, as SAC's
        own cache is popped per overload in order."""
        policy = _ckpt.CheckpointPolicy
        counter = self._counter
        decided = {}

        def policy_fn(ctx, func, *args, **kwargs):
            key = _name(func)
            if ctx.is_recompute:
                return decided[key].pop(0)
            keep = self._keep.get((key, counter.counts.get(key, 0)), False)
            choice = policy.MUST_SAVE if keep else policy.PREFER_RECOMPUTE
            decided.setdefault(key, []).append(choice)
            return choice
        return functools.partial(_ckpt.create_selective_checkpoint_contexts, policy_fn)

    def _install(self, m, runs, patched):
        """Patches m.forward: the whole forward in one region (runs: that
        Region), or the nn.Sequential's children with each run [first, last)
        in one (runs: a list of Regions)."""
        had = "forward" in m.__dict__
        old = m.__dict__.get("forward")
        orig = old if had else type(m).forward.__get__(m)
        if not isinstance(runs, list):  # the region of m's whole forward
            def forward(*args, **kwargs):
                run = functools.partial(orig, **kwargs) if kwargs else orig
                return self._checkpoint(runs, run, *args)
        else:
            children = list(m.children())
            starts = {r.first: r for r in runs}

            def run_children(first, last):
                def run(x):
                    for c in children[first:last]:
                        x = c(x)
                    return x
                return run

            def forward(x):
                i = 0
                while i < len(children):
                    if i in starts:
                        r = starts[i]
                        x = self._checkpoint(r, run_children(i, r.last), x)
                        i = r.last
                    else:
                        x = children[i](x)
                        i += 1
                return x
        m.forward = forward
        patched.append((m, had, old))


def apply(module, plan, selective=None, how="auto"):
    """Wraps `module` so that a training step keeps exactly the plan's tensors
    (see the module docstring). `plan`: a dict or a path. `selective`: use
    selective activation checkpointing (default: when this PyTorch has it).
    `how`: "regions" (checkpoint regions only), "replay" (a checkpoint-set
    plan replayed op by op with saved_tensors_hooks, _replay.py) or "auto"
    (regions where they hold every phase, else the replay).
    Raises PlanError when the plan cannot be applied, saying why."""
    from . import _replay
    plan = load_plan(plan)
    if selective is None:
        selective = has_selective_checkpointing()
    elif selective and not has_selective_checkpointing():
        raise PlanError(f"PyTorch {torch.__version__} has no selective activation checkpointing "
                        "(torch.utils.checkpoint.create_selective_checkpoint_contexts, PyTorch 2.4 and later)")
    if how not in ("auto", "regions", "replay"):
        raise ValueError(f"how: 'auto', 'regions' or 'replay', not {how!r}")
    if plan.get("kind") == "compress" and how != "regions":
        if any(op["recomputes"] > 1 for op in plan["ops"]):
            plan_regions(module, dict(plan, kind="nested"), selective)  # refused, saying why
        _replay.check_plan(plan)
        return _replay.Replayed(module, plan, "its checkpoints are kept converted")
    if how == "replay":
        plan_regions(module, dict(plan, ops=[dict(op, phase=-1) for op in plan["ops"]]), selective)  # the kind
        _replay.check_plan(plan)
        return _replay.Replayed(module, plan, "asked for")
    try:
        regions = plan_regions(module, plan, selective)
    except PlanError as e:
        if how == "regions" or plan.get("kind") != "checkpoint-set":
            raise
        _replay.check_plan(plan)
        return _replay.Replayed(module, plan, str(e))
    return Applied(module, plan, regions, selective)

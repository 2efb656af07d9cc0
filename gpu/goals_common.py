"""What gpu/torch_goals.py and its peak-gap half (goals_gap.py) share: remat's
environment, running it, and the small helpers both sides call."""
import gc
import os
import subprocess

# remat's runs get the environment as it was before torch_goals.py set
# CUBLAS_WORKSPACE_CONFIG for PyTorch (remat lends cuBLAS its own workspace):
# torch_goals.py imports this module first.
REMAT_ENV = dict(os.environ)
MIB = 1 << 20


def run(cmd, what):
    p = subprocess.run(cmd, capture_output=True, text=True, env=REMAT_ENV)
    if p.returncode != 0:
        raise RuntimeError(f"{what}: {' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[-800:]}")
    return p.stdout


def failure(e):
    return f"{type(e).__name__}: {e}".replace("|", "/").replace("\n", " ")[:400]


def free_cached(torch, dev):
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.empty_cache()


def fmt(b):
    return "n/a" if b is None else f"{b / MIB:.1f}"

#!/usr/bin/env python3
"""Bytes the widening call of mixed precision moves on the CUDA backend around
each op's f32 kernel, by op kind, for one step under store-all: what the
16-bit kernels (docs/gpu.md#16-bit-loads-and-stores) save, and what the kinds
left on the widening call still cost. From the model's op list alone
(`remat model --write`): the forward widens each 16-bit input (reads 2 bytes
an element, writes 4) and its kernel reads the copy (4, not 2); a 16-bit
output is written as f32 (4, not 2) and narrowed (reads 4, writes 2); the
backward widens G(v) likewise, and each 16-bit input gradient is written as
f32, rounded in place (8) and narrowed (6): 16 bytes an element more than the
2 a 16-bit store takes; a derivative that reads its input (GELU, SiLU, batch
norm, the fused attention's q, k, v) or its
output (ReLU, Tanh, Sigmoid, Softmax, the fused attention's) widens it again.
Products (Linear, MatMul, Conv) and views are left out: they are not this
path's (the fused Attention is, since it reads and writes its tensors as stored).

  tools/widening-traffic.py build/app/remat gpt:12:768:12:1024:8:bf16@cuda resnet:50:64:224:64:1000:bf16@cuda
"""
import collections
import json
import subprocess
import sys
import tempfile

# core/exec/pointwise_path.cpp's kinds with 16-bit kernels.
DIRECT = {'ReLU', 'GELU', 'Tanh', 'Sigmoid', 'SiLU', 'Add', 'Dropout', 'Softmax', 'MulConst', 'DivConst',
          'AddConst', 'MaskedFill', 'BatchNorm', 'SoftmaxCELoss', 'Attention'}
NOT_THIS_PATH = {'Input', 'Linear', 'Dense', 'MatMul', 'Conv', 'ConvTranspose', 'Reshape', 'Slice',
                 'Transpose', 'Expand'}


def table(remat, spec):
    with tempfile.NamedTemporaryFile(suffix='.json') as f:
        subprocess.run([remat, 'model', '-m', spec, '--write', f.name], check=True, stdout=subprocess.DEVNULL)
        ops = json.load(open(f.name))['ops']

    def low(o):
        return (o.get('dtype') or 'f32') in ('bf16', 'f16')

    def numel(o):
        n = 1
        for d in o.get('shape') or []:
            n *= d
        return n

    by = collections.Counter()
    for o in ops:
        ins = [ops[i] for i in o.get('inputs') or []]
        if o['kind'] in NOT_THIS_PATH or not (low(o) or any(low(i) for i in ins)):
            continue
        n = numel(o)
        b = sum(8 * numel(i) for i in ins if low(i)) + (16 * n if low(o) else 0)
        b += sum(16 * numel(i) for i in ins if low(i))
        if o['kind'] in ('GELU', 'SiLU', 'BatchNorm', 'Attention'):
            b += sum(8 * numel(i) for i in ins if low(i))
        if o['kind'] in ('ReLU', 'Tanh', 'Sigmoid', 'Softmax', 'Attention') and low(o):
            b += 8 * n
        by[o['kind'] if o['kind'] in DIRECT else o['kind'] + ' (widened)'] += b
    total = sum(by.values())
    print(f'{spec}: {total / 2**30:.1f} GiB of widening traffic a step')
    for k, b in sorted(by.items(), key=lambda x: -x[1]):
        print(f'  {k:28s} {b / 2**30:8.2f} GiB  {100 * b / total:5.1f} %')


if __name__ == '__main__':
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    for spec in sys.argv[2:]:
        table(sys.argv[1], spec)

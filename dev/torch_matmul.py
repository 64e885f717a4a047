"""PyTorch fp32 (no TF32) matmul TFLOP/s on the shapes `bun run bench --only matmul` times,
for side-by-side ratios in one device run: python3 dev/torch_matmul.py"""
import json, time, torch

torch.backends.cuda.matmul.allow_tf32 = False
T, H, F, V = 4096, 896, 4864, 151936
shapes = [(f'square {s}', s, s, s, False, False) for s in (1024, 2048, 4096, 8192)] + [
    ('mlp up/gate: x @ W^T', T, F, H, False, True), ('mlp down: x @ W^T', T, H, F, False, True),
    ('lm head: x @ W^T', T, V, H, False, True), ('mlp up/gate dX: dY @ W', T, H, F, False, False),
    ('mlp down dX: dY @ W', T, F, H, False, False), ('lm head dX: dY @ W', T, H, V, False, False),
    ('mlp up/gate dW: dY^T @ X', F, H, T, True, False), ('mlp down dW: dY^T @ X', H, F, T, True, False),
    ('lm head dW: dY^T @ X', V, H, T, True, False)]
for name, m, n, k, ta, tb in shapes:
    a = torch.randn((k, m) if ta else (m, k), device='cuda')
    b = torch.randn((n, k) if tb else (k, n), device='cuda')
    f = lambda: (a.t() if ta else a) @ (b.t() if tb else b)
    for _ in range(3): f()
    torch.cuda.synchronize(); reps = max(3, int(2e12 / (2 * m * n * k)))
    t = time.perf_counter()
    for _ in range(reps): f()
    torch.cuda.synchronize(); ms = (time.perf_counter() - t) / reps * 1e3
    print(json.dumps({'kind': 'torch_matmul', 'name': name, 'm': m, 'n': n, 'k': k, 'ms': ms, 'tflops': 2 * m * n * k / ms / 1e9}))
    del a, b; torch.cuda.empty_cache()

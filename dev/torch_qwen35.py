"""PyTorch reference for `bench --only qwen35`: forward + backward of the next-token loss through
transformers' Qwen3.5 text model (Qwen3_5ForCausalLM), random weights, fp32 with TF32 off, no
optimizer step. Prints one JSON line with the fields src/bench/qwen35_step.ts prints, plus which
implementation of the gated delta rule and of the causal conv1d transformers picked: the
flash-linear-attention / causal-conv1d kernels when those packages import, else its torch fallback.
python3 dev/torch_qwen35.py [--preset 2b|small] [--batch N] [--seq N] [--warmup N] [--iters N] [--device cuda|cpu]"""
import argparse, importlib, importlib.util, json, statistics, time
import torch
import transformers
from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

ROPE = {'rope_type': 'default', 'rope_theta': 10000000, 'partial_rotary_factor': 0.25}
# Keep in step with QWEN35_BENCH_SHAPES in src/bench/qwen35_step.ts (both print their config).
SHAPES = {
    '2b': dict(
        config=dict(vocab_size=248320, hidden_size=2048, intermediate_size=6144, num_hidden_layers=24,
                    num_attention_heads=8, num_key_value_heads=2, head_dim=256,
                    linear_num_key_heads=16, linear_num_value_heads=16, linear_key_head_dim=128, linear_value_head_dim=128,
                    linear_conv_kernel_dim=4, full_attention_interval=4, attn_output_gate=True, attention_bias=False,
                    rope_parameters=ROPE, rms_norm_eps=1e-6, tie_word_embeddings=True, max_position_embeddings=262144),
        source="text_config of Qwen/Qwen3.5-2B's config.json as quoted by public code (not read from the Hub itself); "
               'text-only RoPE (M-RoPE reduces to it for text positions), no MTP layer',
        batch=4, seq=1024),
    'small': dict(
        config=dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                    num_attention_heads=2, num_key_value_heads=1, head_dim=32,
                    linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
                    linear_conv_kernel_dim=4, full_attention_interval=2, attn_output_gate=True, attention_bias=False,
                    rope_parameters=ROPE, rms_norm_eps=1e-6, tie_word_embeddings=True, max_position_embeddings=4096),
        source='tiny smoke-test shape: one linear-attention and one full-attention layer',
        batch=2, seq=32),
}


def text_config(fields):
    """Qwen3_5TextConfig from the shared fields: the layer pattern is passed as layer_types and the
    output gate (always on in transformers' Qwen3.5 attention) is dropped, so no version of the
    class has to accept keyword arguments it does not declare."""
    kw = {k: v for k, v in fields.items() if k not in ('full_attention_interval', 'attn_output_gate')}
    n, every = fields['num_hidden_layers'], fields['full_attention_interval']
    kw['layer_types'] = ['full_attention' if (i + 1) % every == 0 else 'linear_attention' for i in range(n)]
    kw['use_cache'] = False
    cfg = Qwen3_5TextConfig(**kw)
    cfg._attn_implementation = 'sdpa'
    return cfg


def importable(name):
    if importlib.util.find_spec(name) is None:
        return None
    try:
        mod = importlib.import_module(name)
    except Exception as e:  # installed but broken (e.g. no Triton): transformers falls back too
        return f'import fails: {type(e).__name__}: {e}'
    return getattr(mod, '__version__', 'installed')


def resolved(fn):
    """The function a transformers kernel hook will really call. Newer versions wrap the torch
    reference with functools.wraps (so __module__ always names transformers) and keep the chosen
    package kernel in the wrapper's `implementation` closure cell; older ones store the kernel,
    or None for the torch path, on the layer itself."""
    seen = set()
    while fn is not None and id(fn) not in seen:
        seen.add(id(fn))
        code = getattr(fn, '__code__', None)
        cells = dict(zip(code.co_freevars, fn.__closure__ or ())) if code is not None else {}
        if 'implementation' in cells:
            return cells['implementation'].cell_contents
        if getattr(fn, '__wrapped__', None) is None:
            return fn
        fn = fn.__wrapped__
    return fn


def delta_net(model):
    return next(m for m in model.modules() if type(m).__name__ == 'Qwen3_5GatedDeltaNet')


def picked(model, name):
    """Where the GatedDeltaNet's `name` kernel comes from, as module.function."""
    mod = importlib.import_module(type(model).__module__)
    layer = delta_net(model)
    if hasattr(layer, name):
        fn = getattr(layer, name)
    else:
        fn = getattr(mod, 'torch_' + name, None) or getattr(mod, name, None)
    fn = resolved(fn)
    if fn is None:
        return 'torch (no kernel attached)'
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', getattr(fn, '__name__', '?'))}"


def kind(where, package):
    return package if where.startswith(package) else 'torch' if where.startswith(('torch', 'transformers')) else where


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--preset', choices=sorted(SHAPES), default='2b')
    ap.add_argument('--batch', type=int)
    ap.add_argument('--seq', type=int)
    ap.add_argument('--warmup', type=int, default=1)
    ap.add_argument('--iters', type=int, default=3)
    ap.add_argument('--device', default='cuda')
    args = ap.parse_args()
    shape = SHAPES[args.preset]
    B, T = args.batch or shape['batch'], args.seq or shape['seq']
    if B < 1 or T < 2 or args.warmup < 1 or args.iters < 1:
        ap.error('need batch >= 1, seq >= 2, warmup >= 1, iters >= 1')
    dev = torch.device(args.device)
    cuda = dev.type == 'cuda'
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision('highest')

    cfg = text_config(shape['config'])
    torch.manual_seed(0)
    with dev:
        model = Qwen3_5ForCausalLM(cfg)
    model = model.float().train()
    params = list(model.parameters())
    V = cfg.vocab_size
    ids = torch.randint(0, V, (B, T), device=dev, generator=torch.Generator(device=dev).manual_seed(1))

    def sync():
        if cuda:
            torch.cuda.synchronize(dev)

    def step():
        loss = model(input_ids=ids, labels=ids, use_cache=False).loss
        loss.backward()
        sync()
        model.zero_grad(set_to_none=True)
        return loss

    # The loss read in warm-up shows the model computes something sane (~ln V at init).
    first_loss = float(step().item())
    for _ in range(args.warmup - 1):
        step()
    if cuda:
        torch.cuda.reset_peak_memory_stats(dev)
    times = []
    for _ in range(args.iters):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    ms = statistics.median(times)
    nparam = sum(p.numel() for p in params)

    delta_rule_fn = picked(model, 'chunk_gated_delta_rule')
    conv_fn = picked(model, 'causal_conv1d_fn')
    row = {
        'bench': 'qwen35_fwd_bwd', 'impl': 'torch', 'shape': args.preset, 'shape_source': shape['source'],
        'config': shape['config'],
        'layer_types': ''.join('L' if t == 'linear_attention' else 'F' for t in cfg.layer_types),
        'batch': B, 'seq': T, 'tokens': B * T, 'params': nparam, 'warmup': args.warmup, 'iters': args.iters,
        'loss_first': round(first_loss, 4),
        'ms_per_step': round(ms, 1), 'ms_min': round(min(times), 1),
        'tokens_per_s': round(B * T / (ms / 1e3)),
        'tflops_6nd': round(6 * nparam * B * T / (ms / 1e3) / 1e12, 2),
        # peak_bytes: tensors allocated at the high-water mark; peak_held_bytes: what the caching
        # allocator held from the device (the WebGPU bench's pool high-water).
        'peak_bytes': torch.cuda.max_memory_allocated(dev) if cuda else None,
        'peak_held_bytes': torch.cuda.max_memory_reserved(dev) if cuda else None,
        'delta_rule': kind(delta_rule_fn, 'fla'), 'delta_rule_fn': delta_rule_fn,
        'causal_conv1d': kind(conv_fn, 'causal_conv1d'), 'causal_conv1d_fn': conv_fn,
        'gated_norm': f'{type(delta_net(model).norm).__module__}.{type(delta_net(model).norm).__qualname__}',
        'fla_package': importable('fla'), 'causal_conv1d_package': importable('causal_conv1d'),
        'attn_implementation': cfg._attn_implementation, 'dtype': 'float32', 'tf32': False,
        'device': torch.cuda.get_device_name(dev) if cuda else args.device,
        'torch': torch.__version__, 'transformers': transformers.__version__,
        'loss': 'transformers ForCausalLMLoss: full [B, T, V] fp32 logits, cross-entropy over B x (T-1)',
    }
    print(json.dumps(row))


if __name__ == '__main__':
    main()

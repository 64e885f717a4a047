#!/usr/bin/env bash
# Every speed aim of docs/RESULTS.md section 3 measured from one script, each beside its peer
# where one exists: the 0.5B GRPO iteration on TRL's work (and TRL's GRPOTrainer on the
# same work), its LoRA rank-16 form in 6 and 8 GiB, decoding at 1, 32 and 128 rows, the
# train step at 8 x 512 (and PyTorch's bf16 autocast step), the embedded default's
# iteration and a 512-episode validation of the bundled model.
#
#   dev/speed_aims.sh OUT_FILE
#
# Run from the repository root on the GPU machine, with WEBGPU_TOGGLES set where the
# adapter needs them (NVIDIA through Dawn: allow_unsafe_apis,vulkan_enable_f16_on_nvidia).
# The peers run where their scripts are given: TRL_GRPO=path/to/trl_grpo.py with
# TRL_TOKENIZER=path/to/tokenizer.json, TORCH_REFERENCE=path/to/torch_reference.py
# (../shared/bench/ holds both); a peer that is not given is skipped, named in the file.
# Each step has a time limit, so a slow one costs its limit and the rest still run; the
# whole set takes about twenty minutes on an H100, past one call's limit: SPEED_AIMS_PART=aims
# runs the aims alone (about seven minutes), =levers the levers (about eight), =profiles the
# profiles by phase and the aim's memory (about five).
set -u
out=${1:?usage: dev/speed_aims.sh OUT_FILE}
# The GPU machine's kit puts Bun on PATH and has no npx; elsewhere Bun may be the npm package.
bun=(bun); command -v bun >/dev/null || bun=(npx bun)
: > "$out"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
bench() { timeout "$1" "${bun[@]}" run bench "${@:2}" >> "$out" 2>&1 || echo "step failed or ran past $1 s: bench ${*:2}" >> "$out"; }
step() { echo "=== $*" >> "$out"; }
trl=(--iters 2 --max-turns 1 --max-response-tokens 256 --tasks 16 --group-size 8 --set "algorithm.klCoef=0 algorithm.entropyCoef=0")

git log --oneline -1 >> "$out" 2>&1
part=${SPEED_AIMS_PART:-all}
case $part in all|aims|levers|profiles) ;; *) echo "SPEED_AIMS_PART must be all, aims, levers or profiles, got $part" >&2; exit 2 ;; esac
if [ "$part" = all ] || [ "$part" = aims ]; then
step "0.5B GRPO on TRL's work (TRL's default recipe: no reference, no entropy term), TRL's GRPOTrainer after it where given"
if [ -n "${TRL_GRPO:-}" ]; then
  bench 270 --only rl-iteration "${trl[@]}" --trl "$TRL_GRPO" --trl-tokenizer "${TRL_TOKENIZER:?TRL_TOKENIZER: the tokenizer.json trl_grpo.py reads}"
else
  echo "TRL skipped: TRL_GRPO not set" >> "$out"
  bench 120 --only rl-iteration "${trl[@]}"
fi
for gib in 6 8; do
  step "LoRA rank 16 on TRL's work in $gib GiB"
  bench 90 --only rl-iteration "${trl[@]}" --lora 16 --gpu-memory "$gib"
done
step "decoding Qwen2.5-0.5B shapes at 1, 32 and 128 rows, 400-token prompts"
bench 60 --only profile --batch 1 --seq 64 --decode-batches 1,32,128 --prompt-tokens 400 --new-tokens 32
step "the host's share of a decode step of the bundled model (submits held back), at 1 and 128 rows"
for rows in 1 128; do timeout 60 "${bun[@]}" dev/host_profile.ts --batch $rows --steps 32 --reps 15 >> "$out" 2>&1 || echo "host_profile failed or ran past 60 s" >> "$out"; done
step "train step, Qwen2.5-0.5B shapes, 8 x 512"
bench 60 --only train
step "PyTorch bf16 autocast train step, same shapes"
if [ -n "${TORCH_REFERENCE:-}" ]; then
  # The reference script's train() alone, bf16 autocast only (its generation runs are not needed here).
  timeout 90 python3 -c "exec(open('$TORCH_REFERENCE').read().split('for mode in')[0]); train('bf16')" >> "$out" 2>&1 || echo "PyTorch failed or ran past 90 s" >> "$out"
else
  echo "skipped: TORCH_REFERENCE not set" >> "$out"
fi
step "the embedded default's iteration (the bundled model)"
bench 90 --only rl-iteration --preset household --iters 2
step "512 validation episodes of the bundled model (128 valid_seen tasks x 4 runs, one batch)"
timeout 90 "${bun[@]}" run cli eval models/household-tiny --tasks 128 --seeds 4 --split valid_seen --max-batch 512 --progress plain >> "$out" 2>&1 || echo "eval failed or ran past 90 s" >> "$out"
fi
if [ "$part" = all ] || [ "$part" = levers ]; then
# The levers, each beside the default run above: the decode attention's keys cut into
# fewer and more parts, the decode kernel before c5124bd, the training attention's forward
# on tensor cores too, and the f32 kernels in its place.
for n in 32768 262144; do
  step "lever: decoding Qwen2.5-0.5B shapes at 1, 32 and 128 rows, the decode attention's keys cut into parts until $n invocations (65,536 by default)"
  bench 40 --only profile --batch 1 --seq 64 --decode-batches 1,32,128 --prompt-tokens 400 --new-tokens 32 --policy attention.decodeInvocations=$n
  step "lever: the embedded default's iteration, decode attention in parts until $n invocations"
  bench 90 --only rl-iteration --preset household --iters 2 --policy attention.decodeInvocations=$n
done
step "lever: the decode attention kernel before c5124bd (its parent's tree, this checkout's node_modules) against this one, the f32 training attention in both: the bundled model's iteration and decoding at 1 and 32 rows"
old=$(mktemp -d)/before-c5124bd
if git worktree add -q --detach "$old" c5124bd~1 >> "$out" 2>&1; then
  ln -s "$PWD/node_modules" "$old/node_modules"
  for tree in "$old" .; do
    echo "tree: $tree" >> "$out"
    policy=(); [ "$tree" = . ] && policy=(--policy attention.tensorBackward=false)
    (cd "$tree" && bench 90 --only rl-iteration --preset household --iters 2 "${policy[@]}" && bench 60 --only generate "${policy[@]}")
  done
  git worktree remove --force "$old"
else
  echo "the tree before c5124bd could not be checked out" >> "$out"
fi
step "lever: the training attention on tensor cores: its tests on this GPU, then the train steps and both iterations with the backward alone on them (the default), with the taped forward too (attention.tensorTrainingForward), and with the f32 kernels"
timeout 120 "${bun[@]}" test tests/attention_tensor.test.ts tests/layer_memory.test.ts >> "$out" 2>&1 || echo "the tensor-core attention tests failed or ran past 120 s" >> "$out"
for p in attention.tensorBackward=true attention.tensorTrainingForward=true attention.tensorBackward=false; do
  bench 60 --only train --policy $p
  bench 60 --only train --preset household --batch 16 --seq 2048 --policy $p
done
for p in attention.tensorTrainingForward=true attention.tensorBackward=false; do
  bench 90 --only rl-iteration --preset household --iters 2 --policy $p
  bench 120 --only rl-iteration "${trl[@]}" --policy $p
done
fi
[ "$part" = all ] || [ "$part" = profiles ] || exit 0
step "where the time goes: both iterations once more under the kernel profiler, GPU time per kernel for each phase"
bench 120 --only rl-iteration --preset household --iters 2 --profile
bench 200 --only rl-iteration "${trl[@]}" --profile
step "the aim's memory: TRL's work with full weights in a 10 GiB budget"
bench 120 --only rl-iteration "${trl[@]}" --gpu-memory 10

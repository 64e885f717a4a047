import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, test } from 'node:test';
import { parseTrlSummary, runTrlPeer, trlPeerRow } from '../src/bench/trl_peer.ts';

// The summary line ../shared/bench/trl_grpo.py printed on the H100 (TRL 1.13.0, commit af48adc's call).
const SUMMARY = '{"variant": "default", "peer": "TRL GRPOTrainer 1.13.0", "completions": 128, "prompt_tokens_mean": 300.0, "completion_tokens_mean": 256.0, ' +
  '"s_per_iteration": 7.694508219499994, "step_times": [18.79, 8.34, 7.05], "peak_allocated_gib": 15.427499294281006, "peak_reserved_gib": 18.41015625, ' +
  '"gradient_checkpointing": true, "beta": 0.0, "generate_s": [16.13, 5.52, 5.51], "generate_and_score_s": [16.18, 5.56, 5.55]}';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'trl-peer-test-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe('TRL beside the rl-iteration bench', () => {
  test('the summary is the last JSON line with s_per_iteration, whatever TRL logs around it', () => {
    const s = parseTrlSummary(`{'loss': '1.77e-08', 'grad_norm': '1.072'}\n${SUMMARY.replace('7.694', '9.9')}\nnoise\n${SUMMARY}\n{'train_runtime': '34.2'}\n`);
    assert.equal(s.s_per_iteration, 7.694508219499994);
    assert.deepEqual(s.generate_s, [16.13, 5.52, 5.51]);
    assert.throws(() => parseTrlSummary("{'loss': 1}\n"), /no summary line/);
    assert.throws(() => parseTrlSummary('{"s_per_iteration": 7, "step_times": [], "generate_s": []}'), /no number peak_allocated_gib/);
  });

  test('the row: ours over TRL, and over TRL without its generation (its first iteration left out, as its own figure)', () => {
    const row = trlPeerRow({ step_s: 4.94 }, parseTrlSummary(SUMMARY)) as Record<string, number | string>;
    assert.equal(row.peer_s, 7.69);
    // Iterations 2 and 3: (5.52 + 5.51) / 2.
    assert.equal(row.peer_generate_s, +(5.515).toFixed(2));
    assert.equal(row.peer_without_generate_s, +(7.694508219499994 - 5.515).toFixed(2));
    assert.equal(row.ours_over_peer, +(4.94 / 7.694508219499994).toFixed(2));
    assert.equal(row.ours_over_peer_without_generate, +(4.94 / (7.694508219499994 - 5.515)).toFixed(2));
    assert.equal(row.peer, 'TRL GRPOTrainer 1.13.0');
  });

  test('the peer runs as a child process with the script\'s arguments; a failing one is an error naming it', { timeout: 60_000 }, async (t) => {
    const python = ['python3', 'python'].find((p) => spawnSync(p, ['--version']).status === 0);
    if (!python) return t.skip('no python on this machine');
    // Echoes its arguments into the summary, as trl_grpo.py prints its own.
    const script = path.join(tmp, 'peer.py');
    fs.writeFileSync(script, [
      'import json, sys',
      'a = sys.argv[1:]',
      "print('training...')",
      `s = json.loads(${JSON.stringify(SUMMARY)})`,
      "s['variant'] = a[a.index('--variant') + 1]",
      "s['step_times'] = [float(a[a.index('--steps') + 1])]",
      "s['peer'] = a[a.index('--tokenizer') + 1]",
      'print(json.dumps(s))',
    ].join('\n'));
    const s = await runTrlPeer({ script, tokenizer: '/tmp/tok.json', variant: 'beta', steps: 4, python });
    assert.deepEqual([s.variant, s.step_times, s.peer], ['beta', [4], '/tmp/tok.json']);
    const failing = path.join(tmp, 'fail.py');
    fs.writeFileSync(failing, 'import sys\nsys.exit(3)\n');
    await assert.rejects(runTrlPeer({ script: failing, tokenizer: 'x', python }), /TRL peer: .*fail\.py .* exited with 3/);
    await assert.rejects(runTrlPeer({ script, tokenizer: 'x', python: path.join(tmp, 'no-such-python') }), /could not start/);
  });
});

// Metrics: the JSONL log (null for non-finite values, resume truncation, torn lines),
// TensorBoard event files parsed back record by record (CRC-32C against published test
// vectors, the Event protobuf decoded field by field), the summary line, and the HTML
// report.

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, test } from 'node:test';
import { loadConfig, writeRunConfig } from '../src/config/config.ts';
import { MetricsLogger, readMetrics, rolloutMetrics, summaryLine } from '../src/report/metrics.ts';
import { renderReport, summarizeRun, writeComparisonReport, writeReport } from '../src/report/report.ts';
import { niceTicks } from '../src/report/svg_chart.ts';
import { crc32c, encodeEvent, frameRecord, maskedCrc32c } from '../src/report/tensorboard.ts';
import { METRICS_FILE, REPORT_FILE } from '../src/report/run_files.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'trainer-metrics-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));
let n = 0;
const dir = () => path.join(tmp, `run${n++}`);

/** The TFRecord framing, read independently of the writer. */
function readRecords(bytes: Uint8Array): Uint8Array[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out: Uint8Array[] = [];
  let at = 0;
  while (at < bytes.length) {
    const len = Number(view.getBigUint64(at, true));
    assert.equal(view.getUint32(at + 8, true), maskedCrc32c(bytes.subarray(at, at + 8)), 'length CRC');
    const data = bytes.subarray(at + 12, at + 12 + len);
    assert.equal(view.getUint32(at + 12 + len, true), maskedCrc32c(data), 'data CRC');
    out.push(data);
    at += 12 + len + 4;
  }
  assert.equal(at, bytes.length);
  return out;
}

interface DecodedEvent {
  wallTime?: number;
  step?: number;
  fileVersion?: string;
  scalars: [string, number][];
}

/** A minimal protobuf reader for the Event fields the writer uses. */
function decodeEvent(b: Uint8Array): DecodedEvent {
  const ev: DecodedEvent = { scalars: [] };
  const fields = (buf: Uint8Array) => {
    const out: [number, number, Uint8Array | number][] = [];
    let i = 0;
    const varint = () => {
      let v = 0;
      let mul = 1;
      for (;;) {
        const byte = buf[i++];
        v += (byte & 0x7f) * mul;
        mul *= 128;
        if (!(byte & 0x80)) return v;
      }
    };
    while (i < buf.length) {
      const key = varint();
      const [field, wire] = [Math.floor(key / 8), key % 8];
      if (wire === 0) out.push([field, wire, varint()]);
      else if (wire === 1) (out.push([field, wire, buf.slice(i, i + 8)]), (i += 8));
      else if (wire === 5) (out.push([field, wire, buf.slice(i, i + 4)]), (i += 4));
      else if (wire === 2) {
        const len = varint();
        out.push([field, wire, buf.slice(i, i + len)]);
        i += len;
      } else throw new Error(`wire type ${wire}`);
    }
    return out;
  };
  for (const [f, w, v] of fields(b)) {
    if (f === 1 && w === 1) ev.wallTime = new DataView((v as Uint8Array).buffer).getFloat64(0, true);
    else if (f === 2 && w === 0) ev.step = v as number;
    else if (f === 3 && w === 2) ev.fileVersion = new TextDecoder().decode(v as Uint8Array);
    else if (f === 5 && w === 2) {
      for (const [vf, , value] of fields(v as Uint8Array)) {
        assert.equal(vf, 1);
        let tag = '';
        let x = NaN;
        for (const [ff, ww, vv] of fields(value as Uint8Array)) {
          if (ff === 1 && ww === 2) tag = new TextDecoder().decode(vv as Uint8Array);
          if (ff === 2 && ww === 5) x = new DataView((vv as Uint8Array).buffer).getFloat32(0, true);
        }
        ev.scalars.push([tag, x]);
      }
    } else throw new Error(`unexpected field ${f}`);
  }
  return ev;
}

describe('metrics log', () => {
  test('one JSON line per iteration, iteration first, null for non-finite values', () => {
    const d = dir();
    const log = new MetricsLogger(d);
    log.log(1, { 'rollout/success': 0.25, 'actor/grad_norm': Infinity, 'actor/pg_loss': NaN });
    log.log(2, { 'rollout/success': 0.5, 'val/success': 0.4 });
    log.close();
    const lines = fs.readFileSync(path.join(d, METRICS_FILE), 'utf8').trim().split('\n');
    assert.equal(lines[0], '{"iteration":1,"rollout/success":0.25,"actor/grad_norm":null,"actor/pg_loss":null}');
    assert.deepEqual(readMetrics(path.join(d, METRICS_FILE)), [
      { iteration: 1, 'rollout/success': 0.25, 'actor/grad_norm': null, 'actor/pg_loss': null },
      { iteration: 2, 'rollout/success': 0.5, 'val/success': 0.4 },
    ]);
    assert.throws(() => new MetricsLogger(d), /already holds a run \(metrics\.jsonl\): pass --resume to continue it, --overwrite to replace it/);
    new MetricsLogger(d, { overwrite: true }).close();
    assert.deepEqual(readMetrics(path.join(d, METRICS_FILE)), []);
  });

  test('resuming drops rows after the checkpoint; a torn last line is skipped', () => {
    const d = dir();
    const log = new MetricsLogger(d);
    for (let it = 1; it <= 5; it++) log.log(it, { x: it });
    log.close();
    fs.appendFileSync(path.join(d, METRICS_FILE), '{"iteration":6,"x"');
    assert.equal(readMetrics(path.join(d, METRICS_FILE)).length, 5);
    const resumed = new MetricsLogger(d, { resumeFrom: 3 });
    resumed.log(4, { x: 40 });
    resumed.close();
    assert.deepEqual(readMetrics(path.join(d, METRICS_FILE)).map((r) => [r.iteration, r.x]), [[1, 1], [2, 2], [3, 3], [4, 40]]);
    fs.writeFileSync(path.join(d, METRICS_FILE), '{"iteration":1}\nnot json\n{"iteration":2}\n');
    assert.throws(() => readMetrics(path.join(d, METRICS_FILE)), /metrics\.jsonl:2: not a JSON object/);
  });

  test('rollout statistics map to the metric names', () => {
    const stats = {
      trajectories: 8, failed: 1, completed: 7, samples: 40, successRate: 3 / 7, successByType: { pick: { trajectories: 4, won: 2, successRate: 0.5 } },
      meanReturn: 30 / 7, meanEpisodeLength: 5.5, turns: 40, invalidActionRate: 0.1, truncatedEpisodes: 2, envScoreMean: 0.6,
      promptTokens: 9000, tokensGenerated: 1200, truncatedPrompts: 0, teacherPromptTokens: 0, truncatedTeacherPrompts: 0, engineCalls: 10,
      generateSeconds: 3, wallSeconds: 4,
    };
    const m = rolloutMetrics(stats, 'rollout');
    assert.equal(m['rollout/success'], 3 / 7);
    assert.equal(m['rollout/success/pick'], 0.5);
    assert.equal(m['rollout/invalid_rate'], 0.1);
    assert.equal(m['rollout/episode_len'], 5.5);
    assert.equal(m['rollout/score'], 0.6);
    assert.equal(m['tokens/generated'], 1200);
    assert.equal(m['time/rollout'], 4);
    assert.equal(m['time/rollout_generate'], 3);
    assert.equal(m['rollout/engine_calls'], 10);
    const v = rolloutMetrics({ ...stats, envScoreMean: null }, 'val');
    assert.equal(v['val/success/pick'], 0.5);
    assert.equal(v['val/score'], undefined);
    assert.equal(v['tokens/generated'], undefined);
  });

  test('summary line', () => {
    const line = summaryLine(12, 150, {
      'rollout/success': 0.3125, 'val/success': 0.4, 'actor/pg_loss': -0.01234, 'actor/kl': 0.00012, 'actor/grad_norm': Infinity,
      'throughput/tokens_per_s': 12345, 'time/iteration': 57.12, 'time/rollout': 45.1, 'time/update': 12,
    });
    assert.equal(line, 'iter 12/150 | success 0.3125 | val 0.4000 | pg -0.0123 | kl 1.2e-4 | gnorm Infinity | tok/s 12.3k | 57.1s (rollout 45.1s, update 12.0s)');
    assert.equal(summaryLine(12, 150, { 'time/iteration': 57.12 }, 'about 2 h 11 min left'), 'iter 12/150 | 57.1s | about 2 h 11 min left');
  });
});

describe('TensorBoard event files', () => {
  test('CRC-32C matches the published check values', () => {
    assert.equal(crc32c(new TextEncoder().encode('123456789')), 0xe3069283);
    // RFC 3720 (iSCSI) appendix B.4.
    assert.equal(crc32c(new Uint8Array(32)), 0x8a9136aa);
    assert.equal(crc32c(new Uint8Array(32).fill(0xff)), 0x62a8ab43);
    assert.equal(crc32c(Uint8Array.from({ length: 32 }, (_, i) => i)), 0x46dd794e);
    // The mask is rotate-right 15 plus a constant.
    const c = crc32c(new Uint8Array(1));
    assert.equal(maskedCrc32c(new Uint8Array(1)), ((((c >>> 15) | (c << 17)) >>> 0) + 0xa282ead8) >>> 0);
  });

  test('an Event encodes as the protobuf wire format spells it', () => {
    const bytes = encodeEvent({ wallTime: 1.5, step: 300, scalars: [['a', 2]] });
    // 09 <double 1.5> | 10 <varint 300 = ac 02> | 2a len(Summary) | Summary: 0a len(Value) | Value: 0a 01 'a' 15 <float 2>
    assert.deepEqual([...bytes], [
      0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 0x10, 0xac, 0x02, 0x2a, 0x0a, 0x0a, 0x08, 0x0a, 0x01, 0x61, 0x15, 0, 0, 0, 0x40,
    ]);
    const framed = frameRecord(bytes);
    assert.equal(framed.length, 8 + 4 + bytes.length + 4);
    assert.deepEqual([...framed.subarray(0, 8)], [bytes.length, 0, 0, 0, 0, 0, 0, 0]);
  });

  test('the logger writes a file_version event, then one event per iteration, that parse back', () => {
    const d = dir();
    const log = new MetricsLogger(d, { tensorboard: true });
    log.log(1, { 'rollout/success': 0.25, 'actor/kl': 0.001, 'actor/grad_norm': NaN });
    log.log(2, { 'rollout/success': 0.5 });
    log.close();
    const files = fs.readdirSync(path.join(d, 'tb'));
    assert.equal(files.length, 1);
    assert.match(files[0], /^events\.out\.tfevents\.\d+\./);
    const events = readRecords(new Uint8Array(fs.readFileSync(path.join(d, 'tb', files[0])))).map(decodeEvent);
    assert.equal(events.length, 3);
    assert.equal(events[0].fileVersion, 'brain.Event:2');
    assert.ok(events[0].wallTime! > 1.6e9);
    assert.equal(events[1].step, 1);
    assert.deepEqual(events[1].scalars.map(([t]) => t), ['rollout/success', 'actor/kl']);
    assert.equal(events[1].scalars[0][1], 0.25);
    assert.equal(events[1].scalars[1][1], Math.fround(0.001));
    assert.deepEqual(events[2], { wallTime: events[2].wallTime, step: 2, scalars: [['rollout/success', 0.5]] });
  });
});

/** Checks that every tag opened in the SVG parts is closed in order (a minimal well-formedness parse). */
function assertBalancedSvg(html: string): number {
  const svgs = html.match(/<svg[\s\S]*?<\/svg>/g) ?? [];
  for (const svg of svgs) {
    const stack: string[] = [];
    for (const m of svg.matchAll(/<(\/?)([a-zA-Z]+)[^>]*?(\/?)>/g)) {
      if (m[3]) continue;
      if (m[1]) assert.equal(stack.pop(), m[2], 'mismatched closing tag');
      else stack.push(m[2]);
    }
    assert.deepEqual(stack, []);
  }
  return svgs.length;
}

function fakeRun(d: string, opts: { peakAt: number; iterations: number; teacher?: boolean }): void {
  const log = new MetricsLogger(d);
  for (let it = 1; it <= opts.iterations; it++) {
    const m: Record<string, number> = {
      'rollout/success': Math.min(1, it / opts.iterations), 'rollout/success/pick': 0.5, 'actor/pg_loss': 0.1 / it, 'actor/kl': 0.001 * it,
      'actor/entropy': 2 - it * 0.01, 'throughput/tokens_per_s': 1000 + it, 'time/rollout': 10, 'time/update': 5, 'time/iteration': 16,
      'sdar/gate_mean': 0.5, 'memory/rollout_peak_gib': 0.25, 'memory/update_peak_gib': 0.3 + it / 100, 'memory/peak_gib': 0.3 + it / 100,
    };
    if (opts.teacher) m['time/teacher'] = 5;
    if (it % 5 === 0) {
      m['val/success'] = it === opts.peakAt ? 0.8 : 0.5;
      m['val/success/pick'] = 0.6;
    }
    log.log(it, m);
  }
  log.close();
}

describe('report', () => {
  test('a single run: summary, charts of the standard metrics and the rest, offline HTML', () => {
    const d = dir();
    fakeRun(d, { peakAt: 10, iterations: 20, teacher: true });
    writeRunConfig(d, loadConfig(undefined, ['method=sdar']));
    const file = writeReport(d);
    assert.equal(file, path.join(d, REPORT_FILE));
    const html = fs.readFileSync(file, 'utf8');
    assert.match(html, /^<!DOCTYPE html>/);
    assert.doesNotMatch(html, /<script|<link|src=|https?:\/\/(?!www\.w3\.org\/2000\/svg)/, 'nothing to fetch');
    const charts = assertBalancedSvg(html);
    const titles = [...html.matchAll(/<text[^>]*class="title">([^<]*)<\/text>/g)].map((m) => m[1]);
    for (const t of ['Success rate', 'Validation success', 'Policy loss', 'KL to reference', 'Entropy', 'Throughput (tokens/s)', 'Seconds per phase', 'GPU memory per phase (GiB)', 'Success: pick', 'sdar/gate_mean']) {
      assert.ok(titles.includes(t), `chart "${t}" missing from ${titles.join(', ')}`);
    }
    assert.equal(charts, titles.length);
    // Validation points carry their values.
    assert.match(html, /<title>val\/success @ 10: 0\.8<\/title>/);
    // Four validations (iterations 5..20) + the standalone validation chart: markers on both.
    assert.equal((html.match(/<title>val\/success @/g) ?? []).length, 8);
    const s = summarizeRun({ name: 'r', dir: d, rows: readMetrics(path.join(d, METRICS_FILE)), config: { method: 'sdar', env: { name: 'household' } } });
    assert.deepEqual([s.method, s.env, s.iterations, s.peakValSuccess, s.peakIteration, s.finalValSuccess], ['sdar', 'household', 20, 0.8, 10, 0.5]);
    assert.ok(Math.abs(s.dropFromPeak! - 0.3) < 1e-12);
    assert.equal(s.teacherShare, 5 / 20);
    assert.equal(s.totalSeconds, 320);
    assert.equal(s.peakMemoryGib, 0.5);
    assert.match(html, /<th>GPU memory \(GiB\)<\/th>/);
    assert.ok(!titles.includes('memory/update_peak_gib'), 'the phases share one memory chart');
    assert.match(html, /<td>sdar<\/td><td>household<\/td>/);
  });

  test('several runs overlay in each chart with a comparison table', () => {
    const [a, b] = [dir(), dir()];
    fakeRun(a, { peakAt: 10, iterations: 10 });
    fakeRun(b, { peakAt: 5, iterations: 15 });
    const out = writeComparisonReport([a, b], path.join(tmp, 'compare', 'report.html'), { names: ['grpo', 'sdar'] });
    const html = fs.readFileSync(out, 'utf8');
    assertBalancedSvg(html);
    assert.equal((html.match(/<tr><td>(grpo|sdar)<\/td>/g) ?? []).length, 2);
    const success = html.match(/<svg[^>]*aria-label="Success rate"[\s\S]*?<\/svg>/)![0];
    assert.equal((success.match(/<path /g) ?? []).length, 4, 'rollout and val curves of both runs');
    for (const name of ['grpo: rollout/success', 'sdar: rollout/success', 'grpo: val/success', 'sdar: val/success']) assert.ok(success.includes(name), name);
    assert.throws(() => writeComparisonReport([a, b], path.join(tmp, 'x.html'), { names: ['same', 'same'] }), /both named "same"/);
    assert.throws(() => renderReport([]), /no runs/);
    assert.throws(() => writeReport(path.join(tmp, 'nothing')), /metrics\.jsonl: not found/);
  });

  test('axis ticks are round numbers covering the data', () => {
    assert.deepEqual(niceTicks(0, 1), [0, 0.2, 0.4, 0.6, 0.8, 1]);
    assert.deepEqual(niceTicks(1, 150), [0, 50, 100, 150]);
    const t = niceTicks(0.013, 0.0171);
    assert.ok(t[0] <= 0.013 && t[t.length - 1] >= 0.0171);
    assert.equal(niceTicks(3, 3).length > 1, true);
  });
});

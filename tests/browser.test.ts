// The training page in a real browser: Debian's Chromium (apt-get install chromium;
// CHROMIUM names another), headless, driven by puppeteer-core, on the page's own
// WebGPU (SwiftShader on a machine without a GPU). The smallest recipe trains one
// iteration; its metrics are finite, its rollout generated tokens, and its losses are
// those of the same recipe under Bun on the software GPU. A page without WebGPU says
// what to enable, and a recipe too large for its memory budget shows the plan's refusal.

import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, test } from 'node:test';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { servePage, type PageServer } from '../src/cli/web.ts';
import { readMetrics, type MetricsRow } from '../src/report/metrics.ts';
import { REPO_ROOT } from './support/repo_files.ts';

const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const RECIPE = { iterations: '1', tasks: '1', groupSize: '2', maxTurns: '1', maxTokens: '16' };
const CLI_RECIPE = ['iterations=1', 'rollout.tasksPerIteration=1', 'rollout.groupSize=2', 'rollout.maxTurns=1', 'rollout.maxResponseTokens=16'];
const RUN_MINUTES = 8;

/** The page's status once it reads `done` or `error: ...`. */
async function finalStatus(page: Page, minutes: number): Promise<string> {
  await page.waitForFunction(() => /^(done|error)/.test(document.getElementById('status')?.textContent ?? ''), { timeout: minutes * 60_000, polling: 1000 });
  return page.$eval('#status', (e) => e.textContent ?? '');
}

/** Runs `body` on a new tab, closed after it however it ends. */
async function inTab<T>(browser: Browser, body: (page: Page) => Promise<T>): Promise<T> {
  const page = await browser.newPage();
  try {
    return await body(page);
  } finally {
    await page.close();
  }
}

/** The same recipe trained by `train` under Bun on the software GPU: its metrics.jsonl rows. */
function trainUnderBun(): Promise<MetricsRow[]> {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'wgt-browser-bun-'));
  const child = spawn(process.execPath, ['src/cli/main.ts', 'train', ...CLI_RECIPE, `output.dir=${out}`, 'output.runName=bun', 'output.progress=none'], {
    cwd: REPO_ROOT, env: { ...process.env, EGL_PLATFORM: 'surfaceless' }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let said = '';
  child.stdout.on('data', (d) => (said += d));
  child.stderr.on('data', (d) => (said += d));
  return new Promise((resolve, reject) => child.on('exit', (code) => {
    if (code !== 0) reject(new Error(`train under Bun exited ${code}:\n${said}`));
    else resolve(readMetrics(path.join(out, 'bun', 'metrics.jsonl')));
  }));
}

describe('the training page in Chromium', () => {
  let server: PageServer;
  let browser: Browser;

  before(async () => {
    assert.ok(fs.existsSync(CHROMIUM), `${CHROMIUM}: no browser; install Debian's chromium (apt-get install chromium), or set CHROMIUM to a Chromium or Chrome`);
    server = await servePage('127.0.0.1', 0, () => {});
    // A page busy compiling shaders may not answer for minutes.
    browser = await puppeteer.launch({ executablePath: CHROMIUM, args: ['--headless=new', '--no-sandbox', '--enable-unsafe-webgpu'], protocolTimeout: RUN_MINUTES * 60_000 });
  });

  after(async () => {
    await browser?.close();
    await server?.close();
  });

  test('the smallest recipe trains one iteration, with the losses Bun computes for it', async () => {
    // One after the other: on two cores, the browser and Bun side by side each take longer than both in turn.
    const [reference] = await trainUnderBun();
    await inTab(browser, async (page) => {
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push((e as Error).message));
      await page.goto(`${server.url}?${new URLSearchParams(RECIPE)}`);
      const status = await finalStatus(page, RUN_MINUTES);
      const log = await page.$eval('#log', (e) => e.textContent ?? '');
      assert.equal(status, 'done', `the page says "${status}"; its log:\n${log}\npage errors: ${errors.join('\n')}`);
      const rows = await page.evaluate(() => window.trainerMetrics);
      assert.equal(rows.length, 1);
      const m = rows[0];
      assert.equal(m.iteration, 1);
      for (const key of ['actor/pg_loss', 'actor/kl', 'actor/entropy', 'actor/grad_norm']) assert.ok(Number.isFinite(m[key]), `${key} = ${m[key]}`);
      assert.ok((m['tokens/generated'] ?? 0) > 0, 'the rollout generated tokens');
      assert.match(await page.$eval('#adapter', (e) => e.textContent ?? ''), /\S/);
      assert.ok((await page.$$('#charts svg')).length >= 3, 'the charts are drawn');

      // window.trainerMetrics holds what metrics.jsonl holds, and the file is in the page's OPFS.
      const saved = await page.evaluate(async () => {
        let dir = await navigator.storage.getDirectory();
        for (const part of ['runs', 'household-grpo-s0']) dir = await dir.getDirectoryHandle(part);
        const text = await (await (await dir.getFileHandle('metrics.jsonl')).getFile()).text();
        return text.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
      });
      assert.deepEqual(rows, saved);

      assert.equal(m['tokens/generated'], reference['tokens/generated'], 'the same tokens sampled');
      for (const key of ['actor/pg_loss', 'actor/kl', 'actor/entropy', 'actor/grad_norm']) {
        const [a, b] = [m[key]!, reference[key]!];
        assert.ok(Math.abs(a - b) <= 1e-6 + 1e-3 * Math.abs(b), `${key}: ${a} in the browser, ${b} under Bun`);
      }

      // Download: the run's directory as one tar archive, its checkpoint a Hugging Face model directory.
      const downloads = fs.mkdtempSync(path.join(os.tmpdir(), 'wgt-browser-dl-'));
      await (await page.createCDPSession()).send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: downloads });
      await page.click('#download');
      const tar = path.join(downloads, 'household-grpo-s0.tar');
      for (let i = 0; i < 60 && !fs.existsSync(tar); i++) await new Promise((r) => setTimeout(r, 500));
      execFileSync('tar', ['-xf', tar], { cwd: downloads });
      assert.deepEqual(readMetrics(path.join(downloads, 'household-grpo-s0', 'metrics.jsonl')), rows);
      assert.ok(fs.existsSync(path.join(downloads, 'household-grpo-s0', 'checkpoints', 'ckpt-1', 'model', 'model.safetensors')));

      // Reloaded with resume=1, the page finds the finished run's checkpoint in its OPFS and has nothing left to do.
      await page.goto(`${server.url}?${new URLSearchParams({ ...RECIPE, resume: '1' })}`);
      assert.equal(await finalStatus(page, 2), 'done');
      assert.match(await page.$eval('#log', (e) => e.textContent ?? ''), /resuming runs\/household-grpo-s0 after iteration 1/);
      assert.deepEqual(await page.evaluate(() => window.trainerMetrics), rows);
    });
  });

  test('a recipe beyond its memory budget shows the plan\'s refusal', async () => {
    await inTab(browser, async (page) => {
      await page.goto(`${server.url}?iterations=1&gpuMemory=0.01`);
      assert.match(await finalStatus(page, 2), /^error: .*GiB/);
    });
  });

  test('a browser without WebGPU gets a page saying what to enable', async () => {
    await inTab(browser, async (page) => {
      await page.evaluateOnNewDocument(() => Object.defineProperty(Navigator.prototype, 'gpu', { get: () => undefined }));
      await page.goto(`${server.url}?iterations=1`);
      assert.match(await finalStatus(page, 1), /^error: this browser offers no WebGPU/);
      assert.match(await page.$eval('#nogpu', (e) => ((e as HTMLElement).hidden ? '' : e.textContent ?? '')), /enable-unsafe-webgpu/);
    });
  });
});

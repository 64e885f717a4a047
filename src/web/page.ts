// The training page: the recipe form, Start, Stop (after the iteration in hand), Resume
// (from the last checkpoint kept in the page's storage) and Download (the run's files
// as one archive); while a run goes: the adapter, its phase and time, live charts, an
// episode of the newest rollout, and the log. An address with a recipe
// (?iterations=2&method=sdar) starts at once. When a run ends, #status reads `done` or
// `error: <message>`, and window.trainerMetrics holds the rows of its metrics.jsonl.

import { loadConfig, runDir } from '../config/config.ts';
import { METHODS } from '../config/config_schema.ts';
import { EMBEDDED_RECIPE } from '../config/default_run.ts';
import type { MetricsRow } from '../report/metrics.ts';
import type { TrajectoryRecord } from '../rollout/sample.ts';
import { browserStorage, pageProcess } from '../storage/browser_platform.ts';
import * as path from '../storage/paths.ts';
import { chartsSvg } from './charts.ts';
import { trainInPage } from './page_run.ts';
import { recipeFromQuery, SHORT_NAMES, type PageRecipe } from './recipe.ts';
import { tarArchive } from './tar.ts';

declare global {
  interface Window {
    trainerMetrics: MetricsRow[];
  }
}

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const FORM_FIELDS = ['method', 'iterations', 'tasks', 'groupSize', 'maxTurns'] as const;

window.trainerMetrics = [];

function setStatus(text: string): void {
  $('status').textContent = text;
}

function appendLog(line: string): void {
  const log = $('log');
  log.textContent += `${line}\n`;
  log.scrollTop = log.scrollHeight;
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);
}

function showEpisode(r: TrajectoryRecord, file: string): void {
  const turns = r.turns.map((t, i) => `<div class="turn"><div class="who">turn ${i + 1}, reward ${t.reward}${t.valid ? '' : ' (invalid)'}</div>`
    + `<pre class="prompt">${escapeHtml(t.prompt)}</pre><pre class="response">${escapeHtml(t.response)}</pre><pre class="observation">${escapeHtml(t.observation)}</pre></div>`);
  $('episode').innerHTML = `<div class="who">${escapeHtml(file.split('/').slice(-1)[0])}: ${escapeHtml(r.task)} (${r.taskType}), ${r.won ? 'won' : 'not won'}, return ${r.episodeReturn}</div>${turns.join('')}`;
}

/** The form shows the recipe in the address, and the method list. */
function fillForm(query: URLSearchParams): void {
  const select = $<HTMLSelectElement>('method');
  select.innerHTML = METHODS.map((m) => `<option>${m}</option>`).join('');
  for (const name of FORM_FIELDS) {
    const v = query.get(name);
    if (v !== null) $<HTMLInputElement>(name).value = v;
  }
}

/** The address of the form's recipe: its fields that are set, and the other settings the address already had. */
function formQuery(resume: boolean): string {
  const q = new URLSearchParams(location.search);
  q.delete('resume');
  for (const name of FORM_FIELDS) {
    const v = $<HTMLInputElement>(name).value.trim();
    if (v) q.set(name, v);
    else q.delete(name);
  }
  if (resume) q.set('resume', '1');
  return `?${q}`;
}

async function download(recipe: PageRecipe): Promise<void> {
  const dir = runDir(loadConfig(undefined, [...EMBEDDED_RECIPE, ...recipe.overrides]));
  await browserStorage.openOpfs();
  if (!browserStorage.exists(dir)) await browserStorage.loadSaved(dir);
  // Paths in the archive start with the run's own folder, as `tar -xf` should make it.
  const parent = path.dirname(path.resolve(dir));
  const files = browserStorage.filesUnder(dir).map((f) => ({ path: path.relative(parent, f.path), data: f.data }));
  if (!files.length) throw new Error(`nothing kept for ${dir} in this browser's storage yet`);
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([tarArchive(files) as Uint8Array<ArrayBuffer>], { type: 'application/x-tar' }));
  a.download = `${path.basename(dir)}.tar`;
  a.click();
  URL.revokeObjectURL(a.href);
}

async function start(recipe: PageRecipe): Promise<void> {
  const t0 = performance.now();
  const clock = setInterval(() => ($('elapsed').textContent = `${((performance.now() - t0) / 1000).toFixed(0)} s`), 1000);
  $<HTMLButtonElement>('stop').disabled = false;
  setStatus(recipe.resume ? 'resuming' : 'training');
  try {
    await trainInPage(recipe, {
      adapter: (d) => ($('adapter').textContent = d),
      line: (text, kind) => (kind === 'progress' ? ($('phase').textContent = text) : appendLog(text)),
      metrics: (rows) => {
        window.trainerMetrics = rows;
        $('charts').innerHTML = chartsSvg(rows).map((svg) => `<div class="chart">${svg}</div>`).join('');
      },
      episode: showEpisode,
    });
    setStatus('done');
  } catch (e) {
    appendLog(String((e as Error).stack ?? e));
    setStatus(`error: ${(e as Error).message}`);
  } finally {
    clearInterval(clock);
    $<HTMLButtonElement>('stop').disabled = true;
  }
}

/** Why this page cannot reach WebGPU, and what to enable; null when it can. */
function webgpuProblem(): string | null {
  if ('gpu' in navigator && navigator.gpu) return null;
  if (!window.isSecureContext) return 'WebGPU is offered only to secure pages: open this page as http://127.0.0.1 or http://localhost (or over https).';
  return 'this browser offers no WebGPU (navigator.gpu is missing): use Chrome or Edge 113+ (on Linux start it with --enable-unsafe-webgpu, '
    + 'or turn on chrome://flags/#enable-unsafe-webgpu), Firefox 141+ (on Linux: dom.webgpu.enabled in about:config), or Safari 26.';
}

function main(): void {
  const query = new URLSearchParams(location.search);
  fillForm(query);
  $('shortNames').textContent = Object.keys(SHORT_NAMES).join(', ');
  let recipe: PageRecipe;
  try {
    recipe = recipeFromQuery(query);
  } catch (e) {
    setStatus(`error: ${(e as Error).message}`);
    return;
  }
  const problem = webgpuProblem();
  if (problem) {
    $('nogpu').textContent = problem;
    $('nogpu').hidden = false;
    setStatus(`error: ${problem}`);
    return;
  }
  $('start').onclick = () => (location.search = formQuery(false));
  $('resume').onclick = () => (location.search = formQuery(true));
  $('stop').onclick = () => {
    pageProcess.interrupt();
    setStatus('stopping after this iteration');
    $<HTMLButtonElement>('stop').disabled = true;
  };
  $('download').onclick = () => void download(recipe).catch((e) => appendLog(`download: ${(e as Error).message}`));
  window.addEventListener('unhandledrejection', (e) => setStatus(`error: ${(e.reason as Error)?.message ?? e.reason}`));
  if ([...query.keys()].length) void start(recipe);
  else setStatus('idle');
}

main();

// A training run's home on disk and its bookkeeping, shared by the RL loop and SFT:
// the run directory with its configuration, metrics (truncated to the checkpoint a
// resumed run continues from), trajectory files, checkpoints, the seeded validation
// panel, the HTML report, and what an interrupted run says about itself. Ctrl-C once
// finishes the iteration in hand and saves a checkpoint; again, a moment later, stops
// at once. Copies of the first signal that arrive within that moment are the same
// Ctrl-C: the terminal signals every process of the foreground group, and a wrapper
// that forwards it (`bun run`, npm's scripts) delivers it a second time.

import * as path from '../storage/paths.ts';
import { hostProcess, storage } from '../storage/storage.ts';
import type { Environment } from '../envs/types.ts';
import { openCheckpoint, storedDtype } from '../hf_model/checkpoint.ts';
import type { StorageDType } from '../safetensors/writer.ts';
import type { Tokenizer } from '../tokenizer/tokenizer.ts';
import { runRollout, type RolloutOptions, type RolloutResult, type SkillsMode } from '../rollout/agent_loop.ts';
import type { Engine } from '../engines/engine.ts';
import { TrajectoryLog } from '../rollout/trajectory_log.ts';
import { assertResumable, loadResumeCheckpoint, saveCheckpoint, type CheckpointContents, type LoadedCheckpoint } from '../checkpoint/checkpoint.ts';
import { configHash, readRunConfig, runDir, writeRunConfig, type TrainConfig } from '../config/config.ts';
import { writeScaleRecord, type ScaleRecord } from '../config/default_run.ts';
import { agentSpec, makeEnvironment } from '../envs/environment.ts';
import { validationPanel } from '../eval/tasks.ts';
import { checkEnvFailures, countEnvFailures } from '../rollout/env_failures.ts';
import { MetricsLogger, rolloutMetrics, type Metrics } from '../report/metrics.ts';
import { Progress } from '../report/progress.ts';
import { writeReport } from '../report/report.ts';
import { runSummary } from '../report/run_summary.ts';
import { RunLock } from './run_lock.ts';
import { planRunStart } from './run_start.ts';

export interface TrainOptions {
  /** Continue the run in the output directory from its latest checkpoint. */
  resume?: boolean;
  /** With resume: the checkpoint (ckpt-N) to continue from instead of the newest intact one. */
  resumeFrom?: string;
  /** Replace an existing run's metrics instead of refusing. */
  overwrite?: boolean;
  /** How the run was scaled down for a software GPU, recorded in its directory; null or unset for a run as configured. */
  scale?: ScaleRecord | null;
  /** Stop after this many iterations in this invocation (time-boxed jobs); `resume` continues. */
  stopAfter?: number;
  /** Stop (with a checkpoint) before an iteration that would likely end after this many seconds from the start; `resume` continues. */
  timeLimitSeconds?: number;
  log?: (line: string) => void;
}

export interface TrainResult {
  runDir: string;
  iterations: number;
  lastMetrics: Metrics;
}

export interface RunOptions {
  resume?: boolean;
  /** How the run was scaled down for a software GPU, recorded in its directory; null or unset for a run as configured. */
  scale?: ScaleRecord | null;
  /** With resume: the checkpoint (ckpt-N) to continue from instead of the newest intact one. */
  resumeFrom?: string;
  overwrite?: boolean;
  log?: (line: string) => void;
}

/** What the rollouts of a run share: where episodes happen and who plays them. */
export interface RolloutSetup {
  engine: Engine;
  tokenizer: Tokenizer;
  /** The engine's name for the weights being trained (a served model), if not its default. */
  model?: string;
}

const ROLLOUT_FILE = /^(?:iter|val|val-noskills|teacher-val)-(\d+)\.jsonl$/;

/** Interrupts this close to the first one are copies of it (a wrapper's forwarded signal), not a second Ctrl-C. */
export const SAME_INTERRUPT_MS = 1500;

export class Run {
  readonly dir: string;
  readonly checkpoints: string;
  readonly hash: string;
  /** The checkpoint a resumed run continues from. */
  readonly checkpoint: LoadedCheckpoint | null;
  readonly checkpointDir: string | null;
  /** Iterations already done (0 for a fresh run). */
  readonly start: number;
  readonly metrics: MetricsLogger;
  readonly progress: Progress;
  readonly env: Environment;
  readonly log: (line: string) => void;
  private readonly lock: RunLock;
  /** When the first Ctrl-C arrived (ms since the epoch), or null. */
  private interruptedAt: number | null = null;
  private lastSaved: { iteration: number; dir: string } | null = null;
  private savedDtype: { dtype: StorageDType | undefined } | null = null;
  private offInterrupt: () => void = () => {};
  /** When this command took the run up, for the time its summary reports. */
  private readonly startedAt = performance.now();

  constructor(readonly cfg: TrainConfig, opts: RunOptions = {}) {
    this.log = opts.log ?? ((l: string) => console.log(l));
    this.dir = runDir(cfg);
    this.checkpoints = path.join(this.dir, 'checkpoints');
    this.hash = configHash(cfg);
    const existed = storage().exists(this.dir);
    this.lock = RunLock.acquire(this.dir, this.log);
    try {
      const start = planRunStart(this.dir, opts);
      this.checkpoint = start.kind === 'resume' ? loadResumeCheckpoint(this.checkpoints, { name: opts.resumeFrom, log: this.log }) : null;
      this.checkpointDir = this.checkpoint?.dir ?? null;
      if (this.checkpoint) assertResumable(this.checkpoint.trainerState, this.hash, this.checkpoint.dir, cfg, readRunConfig(this.dir));
      this.start = this.checkpoint?.trainerState.iteration ?? 0;
      if (this.checkpoint) this.lastSaved = { iteration: this.start, dir: this.checkpointDir! };
      writeRunConfig(this.dir, cfg);
      // A resumed run keeps the record it started with; a run started anew replaces any.
      if (opts.scale || start.kind !== 'resume') writeScaleRecord(this.dir, opts.scale ?? null);
      if (start.kind === 'restart' && start.note) this.log(start.note);
      this.metrics = new MetricsLogger(this.dir, { tensorboard: cfg.output.tensorboard, resumeFrom: this.checkpoint ? this.start : undefined, overwrite: start.kind === 'restart' });
      // The iterations after the checkpoint are done again: their trajectory files start over.
      this.dropRolloutsAfter(this.start);
      this.progress = new Progress(hostProcess().stdout, cfg.output.progress);
      this.env = makeEnvironment(cfg, this.log);
    } catch (e) {
      this.lock.release();
      // A run refused before it wrote anything leaves no directory behind.
      if (!existed && storage().list(this.dir).length === 0) storage().remove(this.dir);
      throw e;
    }
    this.offInterrupt = hostProcess().onInterrupt(() => this.interrupt());
    if (this.checkpoint) this.log(`resuming ${this.dir} after iteration ${this.start} (${this.checkpointDir})`);
  }

  private dropRolloutsAfter(iteration: number): void {
    const dir = path.join(this.dir, 'rollouts');
    if (!storage().exists(dir)) return;
    for (const name of storage().list(dir)) {
      const m = ROLLOUT_FILE.exec(name);
      if (m && Number(m[1]) > iteration) storage().remove(path.join(dir, name));
    }
  }

  /** Where a trajectory file of this run goes, or null when the run keeps none. */
  rolloutFile(stem: string, iteration: number): string | null {
    return this.cfg.output.trajectories ? path.join(this.dir, 'rollouts', `${stem}-${iteration}.jsonl`) : null;
  }

  private interrupt(): void {
    const now = Date.now();
    if (this.interruptedAt === null) {
      this.interruptedAt = now;
      this.log(`\ninterrupted: finishing this iteration and saving a checkpoint (Ctrl-C again, more than ${SAME_INTERRUPT_MS / 1000} s from now, to stop at once)`);
      return;
    }
    if (now - this.interruptedAt < SAME_INTERRUPT_MS) return;
    const saved = this.lastSaved ? `the last checkpoint is ${this.lastSaved.dir} (iteration ${this.lastSaved.iteration})` : 'no checkpoint has been saved yet';
    this.log(`\nstopped: ${saved}; ${this.continuation()}`);
    hostProcess().exit(130);
  }

  /** The command that carries on from where the run stands. */
  private continuation(): string {
    return this.lastSaved ? 'continue with the same command and --resume' : 'run the same command again to start it over';
  }

  /** The user asked the run to stop (Ctrl-C): end after the iteration in hand. */
  get stopRequested(): boolean {
    return this.interruptedAt !== null;
  }

  /** The float type of the checkpoints' model files: checkpoint.dtype, else the model's own for full weights, f32 for an adapter. */
  private modelDtype(): StorageDType | undefined {
    const set = this.cfg.checkpoint.dtype;
    if (set) return set.toUpperCase() as StorageDType;
    if (this.cfg.model.lora) return undefined;
    const source = openCheckpoint(this.cfg.model.path);
    try {
      return storedDtype(source);
    } finally {
      source.close();
    }
  }

  async save(contents: CheckpointContents): Promise<string> {
    this.savedDtype ??= { dtype: this.modelDtype() };
    const model = { ...contents.model, dtype: contents.model.dtype ?? this.savedDtype.dtype };
    const trainerState = { ...contents.trainerState, config: this.cfg };
    const where = await saveCheckpoint(this.checkpoints, { ...contents, model, trainerState }, { keepLast: this.cfg.checkpoint.keepLast });
    this.lastSaved = { iteration: contents.trainerState.iteration, dir: where };
    this.log(`checkpoint ${where}`);
    return where;
  }

  /** Whether `iteration` is due by a period (`every` 0: only the run's last iteration). */
  isDue(every: number, iteration: number, last: number): boolean {
    return iteration === last || (every > 0 && iteration % every === 0);
  }

  /** Rollout options every rollout of the run shares. */
  rolloutOptions(setup: RolloutSetup): Omit<RolloutOptions, 'tasks' | 'groupSize'> {
    const cfg = this.cfg;
    return {
      env: this.env,
      spec: agentSpec(cfg),
      engine: setup.engine,
      tokenizer: setup.tokenizer,
      thinking: cfg.model.thinking,
      model: setup.model,
      maxPromptTokens: cfg.rollout.maxPromptTokens,
      maxResponseTokens: cfg.rollout.maxResponseTokens,
      maxTurns: cfg.rollout.maxTurns,
      invalidPenalty: cfg.algorithm.invalidPenalty,
      stopAfterAction: cfg.rollout.stopAfterAction,
      history: cfg.rollout.history,
      teacherSkillsPlacement: cfg.teacher.skillsPlacement,
      concurrency: cfg.rollout.concurrency,
      envTimeoutMs: cfg.env.timeoutMs,
    };
  }

  /** A progress callback for a rollout of `total` episodes. */
  rolloutProgress(label: string, total: number): RolloutOptions['onProgress'] {
    const phase = this.progress.phase(label, total);
    return (p) => (p.completed + p.failed >= p.total ? phase.finish(`${p.turns} turns`) : phase.update(p.completed + p.failed, `${p.turns} turns, ${p.tokensGenerated} tokens`));
  }

  /** One pass over the validation panel (validation.runs runs of each task); trajectories go to rollouts/<stem>-<iteration>.jsonl. */
  async validationRollout(setup: RolloutSetup, iteration: number, skills: SkillsMode, stem = 'val', label = 'validation'): Promise<RolloutResult> {
    const cfg = this.cfg;
    const panel = validationPanel(cfg);
    const file = this.rolloutFile(stem, iteration);
    // A resumed run may repeat a validation the interrupted one had started.
    if (file) storage().remove(file);
    const trajectoryLog = file ? new TrajectoryLog(file) : undefined;
    let result: RolloutResult;
    try {
      result = await runRollout({
        ...this.rolloutOptions(setup),
        tasks: panel,
        groupSize: cfg.validation.runs,
        sampling: { temperature: cfg.validation.temperature, topP: cfg.rollout.topP, topK: cfg.rollout.topK, seed: cfg.validation.seed },
        groupIdPrefix: `val${iteration}-`,
        withSkills: skills,
        trajectoryLog,
        onProgress: this.rolloutProgress(label, panel.length * cfg.validation.runs),
      });
    } finally {
      trajectoryLog?.close();
    }
    checkEnvFailures(countEnvFailures(result.trajectories), cfg.env.maxFailedShare, `${label} at iteration ${iteration}`);
    return result;
  }

  /** Validation metrics at `iteration`; a policy that reads the skills block is validated with it and without it. */
  async validate(setup: RolloutSetup, iteration: number, policySkills: boolean): Promise<Metrics> {
    const m = rolloutMetrics((await this.validationRollout(setup, iteration, policySkills ? 'policy' : 'none')).stats, 'val');
    if (policySkills) Object.assign(m, rolloutMetrics((await this.validationRollout(setup, iteration, 'none', 'val-noskills')).stats, 'val_noskills'));
    return m;
  }

  /** Closes the metrics, writes the report and sums the run up (how far, how long, its validation, the report); returns the report's path. */
  finish(end: number, total: number, unit = 'iterations'): string {
    this.offInterrupt();
    this.metrics.close();
    this.lock.release();
    const report = writeReport(this.dir);
    const thisCommand = end > this.start ? { from: this.start + 1, to: end, seconds: (performance.now() - this.startedAt) / 1000 } : null;
    for (const line of runSummary({ dir: this.dir, reached: end, total, thisCommand, report, unit })) this.log(line);
    return report;
  }

  /** Releases what the run holds when it ends early (an error), and says how to carry on. */
  abandon(): void {
    this.offInterrupt();
    this.metrics.close();
    this.lock.release();
    const saved = this.lastSaved ? `the last checkpoint is ${this.lastSaved.dir} (iteration ${this.lastSaved.iteration})` : 'no checkpoint was saved';
    this.log(`stopped by an error: ${saved}; once it is fixed, ${this.continuation()}`);
  }
}

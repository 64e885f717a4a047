// The files of a run directory, by name: what the trainer writes there and what the
// reports, `eval` and `compare` read back.

/** The run's resolved configuration (JSON). */
export const RUN_CONFIG_FILE = 'config.json';
/** One JSON object of metrics per iteration. */
export const METRICS_FILE = 'metrics.jsonl';
/** The run's charts and summary, one self-contained HTML file. */
export const REPORT_FILE = 'report.html';

import * as fs from 'node:fs';
import * as path from 'node:path';
import { defineCommand } from 'citty';
import { readArchive } from '../compare/archive.ts';
import { renderResultsTable, resultRows, writeResults } from '../compare/results.ts';
import { CliError } from './args.ts';

export const resultsCommand = defineCommand({
  meta: {
    name: 'results',
    description: 'Rebuild a method comparison\'s table and curves from its archived runs (no GPU needed), e.g. ' +
      '`results docs/results/household` rewrites that environment\'s block of docs/RESULTS.md and its figure.',
  },
  args: {
    archive: { type: 'positional', required: true, description: 'the archive folder, docs/results/<env> (written by `compare --results`)' },
    page: { type: 'string', default: 'docs/RESULTS.md', description: 'the page whose generated block is rewritten (its figure goes to figures/ beside it)' },
    'print-only': { type: 'boolean', description: 'print the table and write nothing' },
  },
  run({ args }) {
    const dir = args.archive;
    if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory()) throw new CliError(`${dir}: no such folder (the archive \`compare --results\` writes)`);
    const runs = readArchive(dir);
    if (!runs.length) throw new CliError(`${dir}: no archived runs (each run is a folder with run.json, metrics.jsonl, val_tasks.json)`);
    const env = path.basename(path.resolve(dir));
    if (args['print-only']) {
      console.log(renderResultsTable(resultRows(runs)));
      return;
    }
    if (!fs.existsSync(args.page)) throw new CliError(`--page ${args.page}: not found`);
    const { figure } = writeResults(env, runs, args.page, fs.readFileSync(args.page, 'utf8'));
    console.log(renderResultsTable(resultRows(runs)));
    console.log(`${runs.length} runs; wrote the ${env} block of ${args.page} and ${path.join(path.dirname(args.page), figure)}`);
  },
});

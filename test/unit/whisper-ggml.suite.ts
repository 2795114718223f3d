import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { peakWindowDbfs, tidyTranscript } from '../../providers/speech/whisper';
import { extractTarGzMember, FetchModelsError } from '../../bin/fetch-models';
import { ct2WhisperToGgml, readNpyFloat32, readTiktoken, WhisperConversionError } from '../../lib/whisper-ggml';

/**
 * The CTranslate2 → GGML conversion of `npm run models:fetch` on a tiny synthetic Whisper
 * (one encoder and one decoder layer, 4-wide): the layout whisper.cpp reads, tensor by
 * tensor. The real model's conversion is pinned by its sha256 in fetch-models.ts and
 * exercised end to end by test/api/speech.test.ts.
 */
const D = 4; // n_state
const MELS = 2;
const VOCAB = 3;

function half(v: number): number {
  // Exact for the small integers and halves used here.
  if (v === 0) return 0;
  const sign = v < 0 ? 0x8000 : 0;
  const a = Math.abs(v);
  const e = Math.floor(Math.log2(a));
  return sign | ((e + 15) << 10) | Math.round((a / 2 ** e - 1) * 1024);
}

type Var = { shape: number[]; dtype: 'f16' | 'i32'; values: number[] };

function ct2(vars: Record<string, Var>): Buffer {
  const parts: Buffer[] = [];
  const u32 = (v: number) => {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v);
    return b;
  };
  const str = (s: string) => {
    const b = Buffer.from(`${s}\0`);
    const n = Buffer.alloc(2);
    n.writeUInt16LE(b.length);
    return Buffer.concat([n, b]);
  };
  parts.push(u32(6), str('WhisperSpec'), u32(3), u32(Object.keys(vars).length));
  for (const [name, v] of Object.entries(vars)) {
    const data = Buffer.alloc(v.values.length * (v.dtype === 'f16' ? 2 : 4));
    v.values.forEach((x, i) => (v.dtype === 'f16' ? data.writeUInt16LE(half(x), i * 2) : data.writeInt32LE(x, i * 4)));
    parts.push(str(name), Buffer.from([v.shape.length]), ...v.shape.map(u32), Buffer.from([v.dtype === 'f16' ? 4 : 3]), u32(data.length), data);
  }
  parts.push(u32(0)); // aliases
  return Buffer.concat(parts);
}

/** Values 0.5, 1, 1.5, ... so every tensor's content is recognisable after the split. */
const seq = (n: number, from = 1) => Array.from({ length: n }, (_, i) => (from + i) / 2);
const f16 = (...shape: number[]): Var => ({ shape, dtype: 'f16', values: seq(shape.reduce((a, b) => a * b, 1)) });

function tinyModel(keyBias = 0): Record<string, Var> {
  const vars: Record<string, Var> = {
    'encoder/conv1/weight': f16(D, MELS, 3),
    'encoder/conv1/bias': f16(D),
    'encoder/conv2/weight': f16(D, D, 3),
    'encoder/conv2/bias': f16(D),
    'encoder/position_encodings/encodings': f16(6, D),
    'encoder/num_heads': { shape: [], dtype: 'i32', values: [2] },
    'encoder/layer_norm/gamma': f16(D),
    'encoder/layer_norm/beta': f16(D),
    'decoder/embeddings/weight': f16(VOCAB, D),
    'decoder/position_encodings/encodings': f16(5, D),
    'decoder/num_heads': { shape: [], dtype: 'i32', values: [2] },
    'decoder/layer_norm/gamma': f16(D),
    'decoder/layer_norm/beta': f16(D),
  };
  const qkvBias = [1, 2, 3, 4, keyBias, 0, 0, 0, 5, 6, 7, 8];
  for (const side of ['encoder', 'decoder']) {
    const l = `${side}/layer_0`;
    Object.assign(vars, {
      [`${l}/self_attention/layer_norm/gamma`]: f16(D),
      [`${l}/self_attention/layer_norm/beta`]: f16(D),
      [`${l}/self_attention/linear_0/weight`]: f16(3 * D, D),
      [`${l}/self_attention/linear_0/bias`]: { shape: [3 * D], dtype: 'f16', values: qkvBias },
      [`${l}/self_attention/linear_1/weight`]: f16(D, D),
      [`${l}/self_attention/linear_1/bias`]: f16(D),
      [`${l}/ffn/layer_norm/gamma`]: f16(D),
      [`${l}/ffn/layer_norm/beta`]: f16(D),
      [`${l}/ffn/linear_0/weight`]: f16(4 * D, D),
      [`${l}/ffn/linear_0/bias`]: f16(4 * D),
      [`${l}/ffn/linear_1/weight`]: f16(D, 4 * D),
      [`${l}/ffn/linear_1/bias`]: f16(D),
    });
  }
  Object.assign(vars, {
    'decoder/layer_0/attention/layer_norm/gamma': f16(D),
    'decoder/layer_0/attention/layer_norm/beta': f16(D),
    'decoder/layer_0/attention/linear_0/weight': f16(D, D),
    'decoder/layer_0/attention/linear_0/bias': f16(D),
    'decoder/layer_0/attention/linear_1/weight': f16(2 * D, D),
    'decoder/layer_0/attention/linear_1/bias': { shape: [2 * D], dtype: 'f16', values: [0, 0, 0, 0, 9, 10, 11, 12] },
    'decoder/layer_0/attention/linear_2/weight': f16(D, D),
    'decoder/layer_0/attention/linear_2/bias': f16(D),
  });
  return vars;
}

const mel = { shape: [MELS, 3], data: Float32Array.from([0.25, 0.5, 0.75, 1, 1.25, 1.5]) };
const tokens = [Buffer.from('a'), Buffer.from(' the'), Buffer.from([0xe2, 0x82])];

/** Reads back a GGML file as whisper.cpp's loader does. */
function readGgml(buf: Buffer) {
  let p = 0;
  const i32 = () => ((p += 4), buf.readInt32LE(p - 4));
  const hparams = Array.from({ length: 12 }, i32);
  const [nMel, nFft] = [i32(), i32()];
  const filters = Array.from({ length: nMel * nFft }, () => ((p += 4), buf.readFloatLE(p - 4)));
  const vocab = Array.from({ length: i32() }, () => {
    const n = i32();
    return buf.subarray((p += n) - n, p).toString('latin1');
  });
  const tensors = new Map<string, { ne: number[]; f32: boolean; values: number[] }>();
  while (p < buf.length) {
    const [nDims, nameLen, type] = [i32(), i32(), i32()];
    const ne = Array.from({ length: nDims }, i32);
    const name = buf.toString('utf8', p, (p += nameLen));
    const n = ne.reduce((a, b) => a * b, 1);
    const values = Array.from({ length: n }, (_, k) => (type === 0 ? buf.readFloatLE(p + 4 * k) : buf.readUInt16LE(p + 2 * k)));
    p += n * (type === 0 ? 4 : 2);
    tensors.set(name, { ne, f32: type === 0, values });
  }
  return { hparams, nMel, nFft, filters, vocab, tensors };
}

describe('CTranslate2 Whisper → whisper.cpp GGML', () => {
  const out = readGgml(ct2WhisperToGgml({ ct2: ct2(tinyModel()), melFilters: mel, tokens }));

  test('header: magic, hyper-parameters read from the tensors, f16; the mel filters; the vocabulary in file order', () => {
    // magic, n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer, n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels, ftype
    expect(out.hparams).toEqual([0x67676d6c, VOCAB, 6, D, 2, 1, 5, D, 2, 1, MELS, 1]);
    expect([out.nMel, out.nFft]).toEqual([MELS, 3]);
    expect(out.filters).toEqual([0.25, 0.5, 0.75, 1, 1.25, 1.5]);
    expect(out.vocab).toEqual(['a', ' the', '\xe2\x82']);
  });

  test("exactly the tensors whisper.cpp loads, under its names (no key biases)", () => {
    const layer = (side: string, cross: boolean) => [
      ...['attn_ln.weight', 'attn_ln.bias', 'attn.query.weight', 'attn.query.bias', 'attn.key.weight', 'attn.value.weight', 'attn.value.bias', 'attn.out.weight', 'attn.out.bias'],
      ...(cross ? ['cross_attn_ln.weight', 'cross_attn_ln.bias', 'cross_attn.query.weight', 'cross_attn.query.bias', 'cross_attn.key.weight', 'cross_attn.value.weight', 'cross_attn.value.bias', 'cross_attn.out.weight', 'cross_attn.out.bias'] : []),
      ...['mlp_ln.weight', 'mlp_ln.bias', 'mlp.0.weight', 'mlp.0.bias', 'mlp.2.weight', 'mlp.2.bias'],
    ].map((n) => `${side}.blocks.0.${n}`);
    expect([...out.tensors.keys()].sort()).toEqual(
      [
        'encoder.conv1.weight', 'encoder.conv1.bias', 'encoder.conv2.weight', 'encoder.conv2.bias', 'encoder.positional_embedding', 'encoder.ln_post.weight', 'encoder.ln_post.bias',
        'decoder.positional_embedding', 'decoder.token_embedding.weight', 'decoder.ln.weight', 'decoder.ln.bias',
        ...layer('encoder', false), ...layer('decoder', true),
      ].sort(),
    );
  });

  test('shapes innermost first; vectors, conv biases ([n, 1]) and positional embeddings in f32, matrices in f16', () => {
    const t = (n: string) => out.tensors.get(n)!;
    expect(t('encoder.conv1.weight')).toMatchObject({ ne: [3, MELS, D], f32: false });
    expect(t('encoder.conv1.bias')).toMatchObject({ ne: [1, D], f32: true, values: [0.5, 1, 1.5, 2] });
    expect(t('encoder.positional_embedding')).toMatchObject({ ne: [D, 6], f32: true });
    expect(t('decoder.positional_embedding')).toMatchObject({ ne: [D, 5], f32: true });
    expect(t('decoder.token_embedding.weight')).toMatchObject({ ne: [D, VOCAB], f32: false });
    expect(t('encoder.blocks.0.mlp.0.weight')).toMatchObject({ ne: [D, 4 * D], f32: false });
    expect(t('encoder.blocks.0.attn_ln.weight')).toMatchObject({ ne: [D], f32: true });
  });

  test('the fused projections are split by rows: query | key | value, and the cross-attention key | value', () => {
    const t = (n: string) => out.tensors.get(n)!;
    // Rows of D values each: the weight's rows 0-3 are the query, 4-7 the key, 8-11 the value.
    expect(t('encoder.blocks.0.attn.query.weight').values).toEqual(seq(D * D).map(half));
    expect(t('encoder.blocks.0.attn.key.weight').values).toEqual(seq(D * D, D * D + 1).map(half));
    expect(t('encoder.blocks.0.attn.value.weight').values).toEqual(seq(D * D, 2 * D * D + 1).map(half));
    expect(t('encoder.blocks.0.attn.query.bias').values).toEqual([1, 2, 3, 4]);
    expect(t('encoder.blocks.0.attn.value.bias').values).toEqual([5, 6, 7, 8]);
    expect(t('decoder.blocks.0.cross_attn.key.weight').values).toEqual(seq(D * D).map(half));
    expect(t('decoder.blocks.0.cross_attn.value.weight').values).toEqual(seq(D * D, D * D + 1).map(half));
    expect(t('decoder.blocks.0.cross_attn.value.bias').values).toEqual([9, 10, 11, 12]);
  });

  test('a key bias that is not zero (whisper.cpp has no tensor for it), a missing tensor or a wrong filter bank are refused', () => {
    expect(() => ct2WhisperToGgml({ ct2: ct2(tinyModel(1)), melFilters: mel, tokens })).toThrow(WhisperConversionError);
    const partial = tinyModel();
    delete partial['decoder/layer_norm/gamma'];
    expect(() => ct2WhisperToGgml({ ct2: ct2(partial), melFilters: mel, tokens })).toThrow(/decoder\/layer_norm\/gamma/);
    expect(() => ct2WhisperToGgml({ ct2: ct2(tinyModel()), melFilters: { shape: [3, 3], data: new Float32Array(9) }, tokens })).toThrow(/mel/);
  });

  test('.npy float32 arrays and tiktoken files are read as OpenAI ships them', () => {
    const header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    const padded = header.padEnd(118, ' ') + '\n';
    const npy = Buffer.concat([Buffer.from('\x93NUMPY\x01\x00', 'latin1'), Buffer.from([padded.length, 0]), Buffer.from(padded, 'latin1'), Buffer.from(mel.data.buffer)]);
    expect(readNpyFloat32(npy)).toEqual({ shape: [2, 3], data: mel.data });
    expect(readTiktoken('YQ== 0\nIHRoZQ== 1\n\n')).toEqual([Buffer.from('a'), Buffer.from(' the')]);
  });
});

test('extractTarGzMember reads one file of a source distribution (.tar.gz), long paths included', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-tar-'));
  try {
    const deep = path.join('pkg-1.0', 'a'.repeat(60), 'b'.repeat(60), 'assets');
    fs.mkdirSync(path.join(dir, deep), { recursive: true });
    fs.writeFileSync(path.join(dir, deep, 'mel.npz'), 'filters');
    fs.writeFileSync(path.join(dir, 'pkg-1.0', 'README'), 'readme');
    execFileSync('tar', ['-czf', path.join(dir, 'pkg.tar.gz'), '-C', dir, 'pkg-1.0']);
    const tgz = fs.readFileSync(path.join(dir, 'pkg.tar.gz'));
    expect(extractTarGzMember(tgz, `${deep}/mel.npz`).toString()).toBe('filters');
    expect(extractTarGzMember(tgz, 'pkg-1.0/README').toString()).toBe('readme');
    expect(() => extractTarGzMember(tgz, 'pkg-1.0/missing')).toThrow(FetchModelsError);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('the transcript is tidied and silence is told by its loudness', () => {
  expect(tidyTranscript(' Hello [BLANK_AUDIO] there.\n Bye ')).toBe('Hello there. Bye');
  expect(peakWindowDbfs(new Float32Array(16_000))).toBe(-Infinity);
  const tone = Float32Array.from({ length: 16_000 }, (_, i) => 0.5 * Math.sin(i / 5));
  expect(peakWindowDbfs(tone)).toBeCloseTo(-9, 0); // a 0.5 sine: RMS 0.354 → -9 dBFS
});

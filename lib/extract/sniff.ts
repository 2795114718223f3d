/**
 * Decides what an uploaded file is from its bytes. The `file-type` package reads magic
 * numbers (and, for zips, the entries that tell DOCX/XLSX/PPTX/ODT/ODS apart); OLE2
 * containers are told apart by their root entries (cfb.ts). The file name's extension
 * is used only for text formats that have no magic bytes (txt, md, csv, html, json, xml,
 * eml, rtf), and then only if the bytes really are text. A client's Content-Type is
 * never consulted. Anything not accepted is `null` (the API answers 415).
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { Module } from 'node:module';
import type * as FileTypeModule from 'file-type' with { 'resolution-mode': 'import' };
import { cfbRootNames, classifyCfb, type ReadAt } from './cfb';
import { detectTextEncoding } from './text';
import type { DocKind } from './types';

export type { DocKind } from './types';

export interface SniffResult {
  mime: string;
  kind: DocKind;
}

/** How much of a file the text check reads. */
const TEXT_SAMPLE_BYTES = 1024 * 1024;

let fileTypeModule: Promise<typeof FileTypeModule> | undefined;

/**
 * file-type is ESM-only. Under Node (≥ 20.19, with or without tsx) a dynamic import
 * loads it. Jest's sandboxed module registry cannot load ESM on Node 20 (its require(esm)
 * needs Node ≥ 24.9 and vm modules, and @swc/jest compiles `import()` to `require()`), so
 * when that fails the package is loaded through Node's own loader instead, which
 * supports require(esm) since Node 20.19.
 */
function loadFileType(): Promise<typeof FileTypeModule> {
  fileTypeModule ??= import('file-type').catch(() => {
    const host = new Module(__filename);
    host.filename = __filename;
    host.paths = (Module as unknown as { _nodeModulePaths(dir: string): string[] })._nodeModulePaths(__dirname);
    return host.require('file-type') as typeof FileTypeModule;
  });
  return fileTypeModule;
}

const OOXML_AND_ODF: Record<string, DocKind> = {
  'application/vnd.openxmlformats-officedocument.wordprocessingml.document': 'docx',
  'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet': 'xlsx',
  'application/vnd.openxmlformats-officedocument.presentationml.presentation': 'pptx',
  'application/vnd.oasis.opendocument.text': 'odt',
  'application/vnd.oasis.opendocument.spreadsheet': 'ods',
};

const IMAGE_MIMES = new Set(['image/png', 'image/jpeg', 'image/webp', 'image/gif', 'image/tiff']);
const AUDIO_MIMES = new Set(['audio/mpeg', 'audio/wav', 'audio/vnd.wave', 'audio/x-wav', 'audio/ogg', 'audio/opus', 'audio/x-m4a', 'audio/mp4', 'audio/webm']);
const VIDEO_MIMES = new Set(['video/mp4', 'video/webm']);

const CFB_MIME = { doc: 'application/msword', xls: 'application/vnd.ms-excel', msg: 'application/vnd.ms-outlook' } as const;

/** Text formats without magic bytes: extension → kind and canonical MIME type. */
const TEXT_EXTENSIONS: Record<string, SniffResult> = {
  txt: { kind: 'text', mime: 'text/plain' },
  text: { kind: 'text', mime: 'text/plain' },
  md: { kind: 'markdown', mime: 'text/markdown' },
  markdown: { kind: 'markdown', mime: 'text/markdown' },
  csv: { kind: 'csv', mime: 'text/csv' },
  tsv: { kind: 'csv', mime: 'text/tab-separated-values' },
  html: { kind: 'html', mime: 'text/html' },
  htm: { kind: 'html', mime: 'text/html' },
  xhtml: { kind: 'html', mime: 'text/html' },
  json: { kind: 'json', mime: 'application/json' },
  xml: { kind: 'xml', mime: 'application/xml' },
  eml: { kind: 'eml', mime: 'message/rfc822' },
  rtf: { kind: 'rtf', mime: 'application/rtf' },
};

function extensionOf(fileName: string): string {
  return path.extname(fileName).slice(1).toLowerCase();
}

/** The text format an extension names (own keys only: "x.constructor" is not a format). */
function textFormat(ext: string): SniffResult | undefined {
  return Object.hasOwn(TEXT_EXTENSIONS, ext) ? TEXT_EXTENSIONS[ext] : undefined;
}

interface Source {
  size: number;
  readAt: ReadAt;
  detect(ft: typeof FileTypeModule): Promise<FileTypeModule.FileTypeResult | undefined>;
}

async function classify(src: Source, fileName: string): Promise<SniffResult | null> {
  const ext = extensionOf(fileName);
  if (src.size === 0) {
    // Zero bytes are trivially valid text: a text-format name keeps its kind (extraction
    // then fails with "no text could be extracted"); anything else has no type at all.
    const format = textFormat(ext);
    return format && format.kind !== 'rtf' ? format : null;
  }
  const ft = await loadFileType();
  const detected = await src.detect(ft);
  if (detected) {
    // Parameters dropped: file-type names Ogg Opus `audio/ogg; codecs=opus`.
    const mime = detected.mime.split(';')[0].trim();
    // A bare MPEG frame sync (0xFFE…) is a weak signature that a UTF-16LE BOM (FF FE)
    // also matches: a text-format name whose bytes really are text stays text.
    if (mime === 'audio/mpeg' && textFormat(ext) && !(await src.readAt(0, 3)).equals(Buffer.from('ID3')) && (await isText(src))) {
      return textFormat(ext)!;
    }
    if (mime === 'application/pdf') return { kind: 'pdf', mime };
    if (OOXML_AND_ODF[mime]) return { kind: OOXML_AND_ODF[mime], mime };
    if (mime === 'application/rtf') return { kind: 'rtf', mime };
    if (mime === 'application/x-cfb' || mime === 'application/msword' || mime === 'application/vnd.ms-excel' || mime === 'application/vnd.ms-outlook') {
      const names = await cfbRootNames(src.readAt, src.size);
      const kind = names ? classifyCfb(names) : null;
      return kind ? { kind, mime: CFB_MIME[kind] } : null;
    }
    if (IMAGE_MIMES.has(mime)) return { kind: 'image', mime };
    if (AUDIO_MIMES.has(mime)) return { kind: 'audio', mime: mime === 'audio/vnd.wave' || mime === 'audio/x-wav' ? 'audio/wav' : mime };
    // WebM is video/webm to file-type whatever it holds; a browser's voice note (MediaRecorder, Opus) has audio tracks only.
    if (mime === 'video/webm' && (await webmTracks(src)) === 'audio') return { kind: 'audio', mime: 'audio/webm' };
    if (VIDEO_MIMES.has(mime)) return { kind: 'video', mime };
    if (mime === 'application/xml' || mime === 'text/xml') {
      // XML declaration found: XHTML stays HTML, other XML-based formats (SVG…) are not accepted.
      if (!(await isText(src))) return null;
      if (ext === 'html' || ext === 'htm' || ext === 'xhtml') return { kind: 'html', mime: 'text/html' };
      if (ext === 'xml' || ext === '') return { kind: 'xml', mime: 'application/xml' };
      return null;
    }
    return null;
  }
  const byName = textFormat(ext);
  if (!byName || !(await isText(src))) return null;
  if (byName.kind === 'rtf') {
    // RTF has a signature; file-type misses it only after leading whitespace or a BOM.
    const head = (await src.readAt(0, 64)).toString('latin1').replace(/^\uFEFF|^ï»¿/, '').trimStart();
    return head.startsWith('{\\rtf') ? byName : null;
  }
  return byName;
}

/** How much of a WebM file is searched for its track list (it precedes the first cluster). */
const WEBM_HEAD_BYTES = 64 * 1024;

/**
 * Whether a WebM file's tracks are all audio: its Tracks element lists each track's
 * CodecID (EBML element 0x86, a short string: size byte 0x80 | length), `A_OPUS`,
 * `A_VORBIS` for audio and `V_VP8`, `V_VP9`, `V_AV1` for video. 'video' when any video
 * codec shows, 'audio' when only audio ones do, null when none is found.
 */
async function webmTracks(src: Source): Promise<'audio' | 'video' | null> {
  const head = await src.readAt(0, Math.min(src.size, WEBM_HEAD_BYTES));
  let audio = false;
  for (let i = 0; i + 4 < head.length; i++) {
    if (head[i] !== 0x86 || head[i + 1] < 0x82 || head[i + 1] > 0x9f || head[i + 3] !== 0x5f) continue;
    if (head[i + 2] === 0x56) return 'video'; // V_
    if (head[i + 2] === 0x41) audio = true; // A_
  }
  return audio ? 'audio' : null;
}

async function isText(src: Source): Promise<boolean> {
  const sample = await src.readAt(0, Math.min(src.size, TEXT_SAMPLE_BYTES));
  return detectTextEncoding(sample) !== null;
}

/** Sniffs a file on disk. */
export async function sniffType(filePath: string, fileName: string): Promise<SniffResult | null> {
  const handle = await fs.open(filePath, 'r');
  try {
    const { size } = await handle.stat();
    const readAt: ReadAt = async (offset, length) => {
      const buf = Buffer.alloc(Math.max(0, Math.min(length, size - offset)));
      if (!buf.length) return buf;
      const { bytesRead } = await handle.read(buf, 0, buf.length, offset);
      return buf.subarray(0, bytesRead);
    };
    return await classify({ size, readAt, detect: (ft) => ft.fileTypeFromFile(filePath) }, fileName);
  } finally {
    await handle.close();
  }
}

/** Sniffs bytes already in memory (email attachments). */
export async function sniffBuffer(buf: Buffer, fileName: string): Promise<SniffResult | null> {
  const readAt: ReadAt = async (offset, length) => buf.subarray(offset, Math.min(buf.length, offset + length));
  return classify({ size: buf.length, readAt, detect: (ft) => ft.fileTypeFromBuffer(buf) }, fileName);
}

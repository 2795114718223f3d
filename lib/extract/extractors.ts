/**
 * The extractors, by kind. They run in the extraction child (child.ts), never in the API
 * or worker process: parsers are loaded lazily so a child loads only what its file needs.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { htmlToPlainText, htmlToSegments } from './html';
import { extractEml, extractMsg, type Attachment } from './mail';
import { extractOdt, extractPptx, rtfToText } from './office';
import { extractCsv, extractWorkbook } from './sheets';
import { SectionBuilder, tidyText } from './sections';
import { decodeText } from './text';
import { assertZipSafe } from './zip';
import { sniffBuffer } from './sniff';
import { ExtractionError, KIND_LABEL, type ChildLimits, type DocKind, type Segment } from './types';
import type { Worker as TesseractWorker } from 'tesseract.js';

export interface ExtractContext {
  limits: ChildLimits;
  warnings: string[];
  ocrLangPath?: string;
  /** 0 for the uploaded file, 1 for its attachments, … */
  depth: number;
}

export interface ExtractInput { kind: DocKind; mime: string; fileName: string }

export async function extractBuffer(buf: Buffer, input: ExtractInput, ctx: ExtractContext): Promise<Segment[]> {
  // Heavy parsers load lazily (inside each module): a child pays only for what its file needs.
  switch (input.kind) {
    case 'pdf': return extractPdf(buf, ctx);
    case 'docx': return extractDocx(buf, ctx);
    case 'doc': return extractDoc(buf);
    case 'odt': return extractOdt(buf, ctx.limits);
    case 'rtf': return oneSegment(rtfToText(decodeText(buf).text));
    case 'pptx': return extractPptx(buf, ctx.limits);
    case 'xlsx':
    case 'xls':
    case 'ods': return extractWorkbook(buf, input.kind, ctx.limits, ctx.warnings);
    case 'csv': return extractCsv(buf, input.fileName, ctx.warnings);
    case 'text': return oneSegment(textOf(buf, ctx));
    case 'markdown': return markdownSegments(textOf(buf, ctx));
    case 'html': return htmlDocumentSegments(textOf(buf, ctx));
    case 'json': return jsonSegments(textOf(buf, ctx), ctx);
    case 'xml': return xmlSegments(textOf(buf, ctx), ctx);
    case 'eml': return extractEml(buf, nestedExtractor(ctx), ctx.limits.maxAttachments, ctx.warnings);
    case 'msg': return extractMsg(buf, nestedExtractor(ctx), ctx.limits.maxAttachments, ctx.warnings);
    case 'image': return ocrImage(buf, input.mime, ctx);
    case 'audio':
    case 'video':
      // Transcription is an HTTP call made by the parent; only attachments get here.
      throw new ExtractionError(`${input.kind} attachments are not transcribed`);
  }
}

function nestedExtractor(ctx: ExtractContext) {
  return async (att: Attachment): Promise<Segment[]> => {
    if (ctx.depth + 1 > ctx.limits.maxAttachmentDepth) throw new ExtractionError('attachments nested too deeply');
    const type = await sniffBuffer(att.content, att.fileName);
    if (!type) throw new ExtractionError('unsupported file type');
    const inner: ExtractContext = { ...ctx, depth: ctx.depth + 1 };
    try {
      return await extractBuffer(att.content, { ...type, fileName: att.fileName }, inner);
    } catch (err) {
      throw toExtractionError(err, type.kind);
    }
  };
}

/** Maps anything a parser threw to a user-facing ExtractionError. */
export function toExtractionError(err: unknown, kind: DocKind): ExtractionError {
  if (err instanceof ExtractionError) return err;
  const detail = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  if (err instanceof RangeError && /call stack/i.test(err.message)) return new ExtractionError('document is too deeply nested to read', detail);
  if (kind === 'pdf') return new ExtractionError('PDF is corrupt or encrypted', detail);
  return new ExtractionError(`${KIND_LABEL[kind]} is corrupt or could not be read`, detail);
}

function oneSegment(text: string): Segment[] {
  return text.trim() ? [{ text }] : [];
}

function textOf(buf: Buffer, ctx: ExtractContext): string {
  const { text, encoding } = decodeText(buf);
  if (encoding === null) ctx.warnings.push('the file is not valid text; undecodable bytes were replaced');
  return text;
}

// ---------------------------------------------------------------------------------------
// PDF (pdfjs-dist, legacy build for Node 20): one segment per page.

type Pdfjs = typeof import('pdfjs-dist/legacy/build/pdf.mjs');

/** The minified builds: same code, ~0.2 s faster to load (no source-map comment). */
async function loadPdfjs(): Promise<Pdfjs> {
  const dir = path.dirname(require.resolve('pdfjs-dist/legacy/build/pdf.min.mjs'));
  const pdfjs = (await import(pathToFileURL(path.join(dir, 'pdf.min.mjs')).href)) as Pdfjs;
  pdfjs.GlobalWorkerOptions.workerSrc = pathToFileURL(path.join(dir, 'pdf.worker.min.mjs')).href;
  return pdfjs;
}

async function extractPdf(buf: Buffer, ctx: ExtractContext): Promise<Segment[]> {
  const pdfjs = await loadPdfjs();
  let doc: Awaited<ReturnType<typeof pdfjs.getDocument>['promise']>;
  try {
    doc = await pdfjs.getDocument({
      data: new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength),
      isEvalSupported: false,
      disableFontFace: true,
      useSystemFonts: false,
      stopAtErrors: false,
      verbosity: 0,
    }).promise;
  } catch (err) {
    const name = err instanceof Error ? err.name : '';
    const detail = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    throw new ExtractionError(name === 'PasswordException' ? 'PDF is encrypted' : 'PDF is corrupt or encrypted', detail);
  }
  // The page tree's own count, read before any page: a tree that names one page 200,000
  // times (a 1.2 MB file) would otherwise be read 200,000 times.
  if (doc.numPages > ctx.limits.maxPdfPages) {
    const pages = doc.numPages;
    await doc.destroy();
    throw new ExtractionError(`the PDF has ${pages} pages, more than the ${ctx.limits.maxPdfPages} that are read`);
  }
  const segments: Segment[] = [];
  let scanned = 0;
  let ocred = 0;
  try {
    for (let n = 1; n <= doc.numPages; n++) {
      try {
        const page = await doc.getPage(n);
        const content = await page.getTextContent();
        let text = '';
        for (const item of content.items) {
          if (!('str' in item)) continue;
          text += item.str;
          if (item.hasEOL) text += '\n';
        }
        if (!text.trim()) {
          // No text layer: a scanned page. Its images are OCR'd, page by page.
          scanned++;
          if (ocred < MAX_OCR_PAGES) {
            ocred++;
            text = await ocrPdfPage(pdfjs, page, ctx, n);
          } else if (ocred === MAX_OCR_PAGES) {
            ocred++;
            ctx.warnings.push(`only the first ${MAX_OCR_PAGES} scanned pages were OCR'd`);
          }
        }
        page.cleanup();
        if (text.trim()) segments.push({ text, page: n });
      } catch (err) {
        ctx.warnings.push(`page ${n} could not be read: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
  } finally {
    await doc.destroy();
  }
  if (!segments.length && doc.numPages > 0) ctx.warnings.push(scanned ? 'the PDF has no text layer and OCR found no text in its pages' : 'the PDF has no text');
  return segments;
}

/** Scanned pages OCR'd per PDF (each takes a few seconds); the rest are skipped with a warning. */
const MAX_OCR_PAGES = 50;
/** Images smaller than this (logos, rules, bullets) are not worth OCR on a scanned page. */
const MIN_OCR_PIXELS = 20_000;

/**
 * A page without a text layer: the images it paints (a scan is one full-page image, or a
 * few strips), decoded by pdfjs itself, each handed to OCR as a BMP (encoded here: no
 * canvas, no image library needed). Their texts are joined in painting order.
 */
async function ocrPdfPage(pdfjs: Pdfjs, page: Awaited<ReturnType<Awaited<ReturnType<Pdfjs['getDocument']>['promise']>['getPage']>>, ctx: ExtractContext, n: number): Promise<string> {
  const ops = await page.getOperatorList();
  const texts: string[] = [];
  for (let i = 0; i < ops.fnArray.length; i++) {
    const fn = ops.fnArray[i];
    let img: PdfImage | undefined;
    if (fn === pdfjs.OPS.paintImageXObject) {
      const name = ops.argsArray[i][0] as string;
      const objs = name.startsWith('g_') ? page.commonObjs : page.objs;
      // Resolved by pdfjs's worker after the operator list may already be complete: wait for it.
      img = await new Promise<PdfImage | undefined>((resolve) => {
        const timer = setTimeout(() => resolve(undefined), 10_000);
        objs.get(name, (data: unknown) => {
          clearTimeout(timer);
          resolve(data as PdfImage);
        });
      });
    } else if (fn === pdfjs.OPS.paintInlineImageXObject) {
      img = ops.argsArray[i][0] as PdfImage;
    }
    if (!img?.data || !img.width || !img.height || img.width * img.height < MIN_OCR_PIXELS) continue;
    if (img.width * img.height > ctx.limits.maxImagePixels) {
      ctx.warnings.push(`page ${n}: an image too large to OCR (${img.width}×${img.height} pixels)`);
      continue;
    }
    const bmp = imageToBmp(img);
    if (!bmp) continue;
    const [segment] = await ocrImage(bmp, 'image/bmp', ctx);
    if (segment?.text.trim()) texts.push(segment.text);
  }
  return texts.join('\n');
}

interface PdfImage {
  width: number;
  height: number;
  /** pdfjs's ImageKind: 1 grayscale 1 bit per pixel (rows padded to bytes), 2 RGB, 3 RGBA. */
  kind?: number;
  data?: Uint8Array | Uint8ClampedArray;
}

/** A decoded pdfjs image as a 24-bit BMP (bottom-up rows, padded to 4 bytes), which OCR reads; null for a layout it does not know. */
export function imageToBmp(img: PdfImage): Buffer | null {
  const { width: w, height: h, data } = img;
  if (!data) return null;
  const rowBytes = Math.ceil(w / 8);
  const channels = data.length === w * h * 4 ? 4 : data.length === w * h * 3 ? 3 : data.length === rowBytes * h ? 1 : 0;
  if (!channels) return null;
  const stride = (w * 3 + 3) & ~3;
  const out = Buffer.alloc(54 + stride * h);
  out.write('BM', 0, 'latin1');
  out.writeUInt32LE(out.length, 2);
  out.writeUInt32LE(54, 10);
  out.writeUInt32LE(40, 14);
  out.writeInt32LE(w, 18);
  out.writeInt32LE(h, 22);
  out.writeUInt16LE(1, 26);
  out.writeUInt16LE(24, 28);
  out.writeUInt32LE(stride * h, 34);
  for (let y = 0; y < h; y++) {
    const row = 54 + (h - 1 - y) * stride;
    for (let x = 0; x < w; x++) {
      let r: number, g: number, b: number;
      if (channels === 1) {
        // 1 bpp: a set bit is white in pdfjs's grayscale masks.
        const v = (data[y * rowBytes + (x >> 3)] >> (7 - (x & 7))) & 1 ? 255 : 0;
        r = g = b = v;
      } else {
        const p = (y * w + x) * channels;
        r = data[p];
        g = data[p + 1];
        b = data[p + 2];
      }
      out[row + x * 3] = b;
      out[row + x * 3 + 1] = g;
      out[row + x * 3 + 2] = r;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Word

async function extractDocx(buf: Buffer, ctx: ExtractContext): Promise<Segment[]> {
  await assertZipSafe(buf, ctx.limits);
  const mammoth = await import('mammoth');
  const { value } = await mammoth.convertToHtml({ buffer: buf }, { ignoreEmptyParagraphs: true });
  return htmlToSegments(value);
}

async function extractDoc(buf: Buffer): Promise<Segment[]> {
  const { default: WordExtractor } = await import('word-extractor');
  const doc = await new WordExtractor().extract(buf);
  const segments: Segment[] = [];
  const body = doc.getBody();
  if (body.trim()) segments.push({ text: body });
  const extras: Array<[string, string]> = [
    ['Footnotes', doc.getFootnotes()],
    ['Endnotes', doc.getEndnotes()],
    ['Comments', doc.getAnnotations()],
    ['Text boxes', doc.getTextboxes({ includeHeadersAndFooters: false, includeBody: true })],
    ['Headers and footers', doc.getHeaders({ includeFooters: true })],
  ];
  for (const [heading, text] of extras) if (text.trim()) segments.push({ text, heading });
  return segments;
}

// ---------------------------------------------------------------------------------------
// Markdown: split at ATX (#) and setext (=== / ---) headings, outside code fences.

export function markdownSegments(md: string): Segment[] {
  const out = new SectionBuilder();
  const lines = md.replace(/\r\n?/g, '\n').split('\n');
  let fence: string | null = null;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fenceMatch = /^\s{0,3}(`{3,}|~{3,})/.exec(line);
    if (fenceMatch) {
      if (!fence) fence = fenceMatch[1][0];
      else if (fenceMatch[1][0] === fence) fence = null;
      out.addLine(line);
      continue;
    }
    if (fence) { out.addLine(line); continue; }
    const atx = /^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+\s*)?$/.exec(line);
    if (atx) { out.addHeading(atx[1]); continue; }
    const next = lines[i + 1];
    if (line.trim() && next !== undefined && /^\s{0,3}(=+|-+)\s*$/.test(next) && !/^\s{0,3}[-*+]\s/.test(line)) {
      out.addHeading(line);
      i++;
      continue;
    }
    out.addLine(line);
  }
  return out.finish();
}

// ---------------------------------------------------------------------------------------
// HTML: sections at h1–h6; the page's <title> (skipped with <head> by the converter) recorded on the first segment.

async function htmlDocumentSegments(html: string): Promise<Segment[]> {
  const segments = await htmlToSegments(html);
  const raw = /<title[^>]*>([\s\S]{0,2000}?)<\/title>/i.exec(html.slice(0, 200_000))?.[1];
  const title = raw ? (await htmlToPlainText(raw)).replace(/\s+/g, ' ').trim() : '';
  if (title && segments.length) segments[0] = { ...segments[0], title };
  return segments;
}

// ---------------------------------------------------------------------------------------
// JSON and XML: pretty text.

function jsonSegments(text: string, ctx: ExtractContext): Segment[] {
  try {
    return oneSegment(JSON.stringify(JSON.parse(text), null, 2));
  } catch {
    ctx.warnings.push('the file is not valid JSON; indexed as plain text');
    return oneSegment(text);
  }
}

/**
 * XML as an indented outline: one line per element ("name attr=value: text"), so element
 * names, attributes and text are all searchable without the markup noise.
 */
async function xmlSegments(text: string, ctx: ExtractContext): Promise<Segment[]> {
  const { SaxesParser } = await import('saxes');
  const lines: string[] = [];
  const stack: Array<{ label: string; text: string; emitted: boolean }> = [];
  const emitPending = () => {
    stack.forEach((node, depth) => {
      if (node.emitted) return;
      const t = node.text.replace(/\s+/g, ' ').trim();
      lines.push(`${'  '.repeat(depth)}${node.label}${t ? `: ${t}` : ''}`);
      node.text = '';
      node.emitted = true;
    });
  };
  try {
    const parser = new SaxesParser({ xmlns: false });
    parser.on('opentag', (tag) => {
      emitPending();
      const attrs = Object.entries(tag.attributes)
        .filter(([k]) => !k.startsWith('xmlns'))
        .map(([k, v]) => `${k}=${String(v)}`);
      stack.push({ label: [tag.name, ...attrs].join(' '), text: '', emitted: false });
    });
    const onText = (t: string) => { if (stack.length) stack[stack.length - 1].text += t; };
    parser.on('text', onText);
    parser.on('cdata', onText);
    parser.on('closetag', () => {
      const node = stack[stack.length - 1];
      if (!node) return;
      const t = node.text.replace(/\s+/g, ' ').trim();
      if (!node.emitted) emitPending();
      else if (t) lines.push(`${'  '.repeat(stack.length)}${t}`);
      stack.pop();
    });
    parser.write(text).close();
  } catch {
    ctx.warnings.push('the file is not well-formed XML; indexed as plain text');
    return oneSegment(text);
  }
  return oneSegment(lines.join('\n'));
}

// ---------------------------------------------------------------------------------------
// Images: OCR with tesseract.js and the English model of @tesseract.js-data/eng, offline.

let tesseractWorker: Promise<TesseractWorker> | undefined;

export function defaultOcrLangPath(): string {
  return path.join(path.dirname(require.resolve('@tesseract.js-data/eng/package.json')), '4.0.0_best_int');
}

async function getTesseract(ctx: ExtractContext): Promise<TesseractWorker> {
  tesseractWorker ??= (async () => {
    const { createWorker, OEM } = await import('tesseract.js');
    return createWorker('eng', OEM.LSTM_ONLY, {
      langPath: ctx.ocrLangPath ?? defaultOcrLangPath(),
      cacheMethod: 'none',
      gzip: true,
      errorHandler: () => undefined,
    });
  })();
  return tesseractWorker;
}

export async function closeOcr(): Promise<void> {
  const w = tesseractWorker;
  tesseractWorker = undefined;
  if (w) await (await w).terminate().catch(() => undefined);
}

/** Width × height from the header of PNG, GIF and JPEG files (null if unknown). */
export function imageDimensions(buf: Buffer): { width: number; height: number } | null {
  if (buf.length >= 24 && buf.readUInt32BE(0) === 0x89504e47) return { width: buf.readUInt32BE(16), height: buf.readUInt32BE(20) };
  if (buf.length >= 10 && buf.toString('latin1', 0, 3) === 'GIF') return { width: buf.readUInt16LE(6), height: buf.readUInt16LE(8) };
  if (buf.length >= 4 && buf[0] === 0xff && buf[1] === 0xd8) {
    let o = 2;
    while (o + 9 < buf.length) {
      if (buf[o] !== 0xff) { o++; continue; }
      const marker = buf[o + 1];
      if (marker === 0xff) { o++; continue; }
      if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
        return { height: buf.readUInt16BE(o + 5), width: buf.readUInt16BE(o + 7) };
      }
      if (marker === 0xd8 || (marker >= 0xd0 && marker <= 0xd7) || marker === 0x01) { o += 2; continue; }
      o += 2 + buf.readUInt16BE(o + 2);
    }
  }
  return null;
}

async function ocrImage(buf: Buffer, mime: string, ctx: ExtractContext): Promise<Segment[]> {
  const dims = imageDimensions(buf);
  if (dims && dims.width * dims.height > ctx.limits.maxImagePixels) {
    throw new ExtractionError(`image is too large to OCR (${dims.width}×${dims.height} pixels)`);
  }
  const worker = await getTesseract(ctx);
  let text: string;
  try {
    const { data } = await worker.recognize(buf);
    text = data.text;
  } catch (err) {
    throw new ExtractionError(`image could not be read for OCR (${mime})`, err instanceof Error ? err.message : String(err));
  }
  return oneSegment(tidyText(text));
}

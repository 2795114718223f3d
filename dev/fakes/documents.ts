/**
 * Generators for real documents used by the extraction tests and benches. Everything is built at
 * test time (no binary fixtures): PDFs with pdfkit, DOCX with docx, XLSX with exceljs,
 * XLS/ODS with SheetJS, PPTX with pptxgenjs (in a subprocess), EML with nodemailer's MailComposer, a PNG
 * with text rendered by pureimage (pure JS) in the Liberation Sans font that pdfjs-dist
 * ships, and the odd ones (ODT, zip bombs, WAV, media headers, CFB containers) by hand.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { PassThrough, Readable } from 'node:stream';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import PDFDocument from 'pdfkit';
import { Document, HeadingLevel, Packer, Paragraph } from 'docx';
import ExcelJS from 'exceljs';
import * as XLSX from '@e965/xlsx';
import yazl from 'yazl';
import * as PImage from 'pureimage';
import MailComposer from 'nodemailer/lib/mail-composer';
import { passage, prng, TOPICS } from './prose';

const execFileAsync = promisify(execFile);

/** The texts the generated documents contain, so tests can look for them. */
export const TEXT = {
  pdfPage1: 'Refund policy: customers may return items within 30 days.',
  pdfPage2: 'Shipping to Lisbon takes five business days.',
  docxHeading1: 'Warranty',
  docxPara1: 'The warranty covers manufacturing defects for two years.',
  docxHeading2: 'Exclusions',
  docxPara2: 'Water damage is not covered by the warranty.',
  slide1Title: 'Quarterly results',
  slide1Body: 'Revenue grew twelve percent.',
  slide2Title: 'Next steps',
  slide2Body: 'Hire two more support agents.',
  emailSubject: 'Order 1234 delivery',
  emailBody: 'Your parcel left our warehouse this morning.',
  emailAttachmentText: 'The spare key is under the blue flowerpot.',
  ocrWords: ['CONCIERGE', 'KNOWLEDGE', 'INVOICE'],
} as const;

export const SHEET_ROWS: Array<[string, number, number]> = [
  ['Widget', 9.99, 12],
  ['Gadget', 24.5, 3],
  ['Gizmo', 5, 40],
];
export const SHEET_HEADERS = ['Product', 'Price', 'Stock'] as const;

export function tempDir(prefix = 'extract-test-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** Writes `data` to `dir/name` and returns the path. */
export function writeFile(dir: string, name: string, data: Buffer | string): string {
  const p = path.join(dir, name);
  fs.writeFileSync(p, data);
  return p;
}

/** Everything a stream yields (a PDFDocument's bytes). */
export async function collect(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(Buffer.isBuffer(c) ? c : Buffer.from(c as string));
  return Buffer.concat(chunks);
}

/** A PDF with one known sentence per page. */
export async function makePdf(pages: string[] = [TEXT.pdfPage1, TEXT.pdfPage2]): Promise<Buffer> {
  const doc = new PDFDocument({ autoFirstPage: false, compress: true });
  const done = collect(doc);
  for (const text of pages) {
    doc.addPage({ size: 'A4' });
    doc.fontSize(14).text(text, 72, 72);
  }
  doc.end();
  return done;
}

/**
 * A scanned PDF: each page is an image of text (rendered with pureimage, PNG or JPEG)
 * and has no text layer, as a scanner produces.
 */
export async function makeScannedPdf(pages: Array<readonly string[]>, format: 'png' | 'jpeg' = 'png'): Promise<Buffer> {
  const doc = new PDFDocument({ autoFirstPage: false, compress: true });
  const done = collect(doc);
  for (const words of pages) {
    const image = await makeTextPng(words, format);
    doc.addPage({ size: 'A4' });
    doc.image(image, 36, 36, { width: 520 });
  }
  doc.end();
  return done;
}

/** A long PDF (for the timeout test). */
export async function makeBigPdf(pages = 200): Promise<Buffer> {
  return makePdf(Array.from({ length: pages }, (_, i) => `Page ${i + 1}. ${'Lorem ipsum dolor sit amet. '.repeat(60)}`));
}

export async function makeDocx(): Promise<Buffer> {
  const doc = new Document({
    sections: [{
      children: [
        new Paragraph({ text: TEXT.docxHeading1, heading: HeadingLevel.HEADING_1 }),
        new Paragraph(TEXT.docxPara1),
        new Paragraph({ text: TEXT.docxHeading2, heading: HeadingLevel.HEADING_2 }),
        new Paragraph(TEXT.docxPara2),
      ],
    }],
  });
  return Packer.toBuffer(doc);
}

export async function makeXlsx(): Promise<Buffer> {
  const wb = new ExcelJS.Workbook();
  const ws = wb.addWorksheet('Prices');
  ws.addRow([...SHEET_HEADERS]);
  for (const r of SHEET_ROWS) ws.addRow(r);
  const staff = wb.addWorksheet('Staff');
  staff.addRow(['Name', 'Role']);
  staff.addRow(['Ana', 'Support lead']);
  return Buffer.from(await wb.xlsx.writeBuffer());
}

function sheetJsBook(): XLSX.WorkBook {
  const wb = XLSX.utils.book_new();
  XLSX.utils.book_append_sheet(wb, XLSX.utils.aoa_to_sheet([[...SHEET_HEADERS], ...SHEET_ROWS]), 'Prices');
  return wb;
}

/** Legacy Excel 97-2003 (BIFF8) workbook. */
export function makeXls(): Buffer {
  return XLSX.write(sheetJsBook(), { type: 'buffer', bookType: 'xls' }) as Buffer;
}

export function makeOds(): Buffer {
  return XLSX.write(sheetJsBook(), { type: 'buffer', bookType: 'ods' }) as Buffer;
}

export function makeCsv(): string {
  return [SHEET_HEADERS.join(','), ...SHEET_ROWS.map((r) => r.join(','))].join('\n') + '\n';
}

/**
 * A two-slide PPTX from pptxgenjs. pptxgenjs 4 loads node:fs with a dynamic import(),
 * which Jest's CommonJS sandbox refuses, so it runs in a plain Node subprocess.
 */
export async function makePptx(): Promise<Buffer> {
  const slides: Array<[string, string]> = [[TEXT.slide1Title, TEXT.slide1Body], [TEXT.slide2Title, TEXT.slide2Body]];
  const script = `
    const PptxGenJS = require(${JSON.stringify(require.resolve('pptxgenjs'))});
    const pptx = new PptxGenJS();
    pptx.defineSlideMaster({
      title: 'TITLED',
      objects: [{ placeholder: { options: { name: 'title', type: 'title', x: 0.5, y: 0.3, w: 9, h: 1 }, text: '' } }],
    });
    for (const [title, body] of ${JSON.stringify(slides)}) {
      const slide = pptx.addSlide({ masterName: 'TITLED' });
      slide.addText(title, { placeholder: 'title' });
      slide.addText(body, { x: 0.5, y: 2, w: 9, h: 1 });
    }
    pptx.write({ outputType: 'nodebuffer' }).then((b) => process.stdout.write(b.toString('base64')));
  `;
  const { stdout } = await execFileAsync(process.execPath, ['-e', script], { maxBuffer: 64 * 1024 * 1024, env: { PATH: process.env.PATH } });
  return Buffer.from(stdout, 'base64');
}

export async function makeEml(): Promise<Buffer> {
  const mail = new MailComposer({
    from: 'Shop <shop@example.com>',
    to: 'Customer <customer@example.com>',
    subject: TEXT.emailSubject,
    date: new Date('2024-05-01T10:00:00Z'),
    text: TEXT.emailBody,
    attachments: [
      { filename: 'notes.txt', content: TEXT.emailAttachmentText, contentType: 'text/plain' },
      { filename: 'invoice.pdf', content: await makePdf([TEXT.pdfPage1]), contentType: 'application/pdf' },
    ],
  });
  return mail.compile().build();
}

export function makeHtml(): string {
  return `<!doctype html><html><head><title>Help</title><style>p{color:red}</style><script>var x = 'hidden script';</script></head>
<body><h1>Store hours</h1><p>We are open from 9 to 5 on weekdays.</p>
<h2>Holidays</h2><p>The store is closed on public holidays.</p><ul><li>New Year</li><li>Christmas</li></ul></body></html>`;
}

export function makeMarkdown(): string {
  return '# Returns\n\nReturn items within 30 days.\n\n## Exceptions\n\nGift cards cannot be returned.\n\n```\n# not a heading\n```\n';
}

export function makeRtf(): string {
  return '{\\rtf1\\ansi\\deff0{\\fonttbl{\\f0 Arial;}}{\\colortbl;\\red255\\green0\\blue0;}' +
    '{\\*\\generator Test;}\\f0\\fs24 Caf\\\'e9 opening hours\\par Open daily from 8 \\u8211? 20.\\par}';
}

/** An ODF text document built by hand (mimetype first and stored, as the spec requires). */
export async function makeOdt(): Promise<Buffer> {
  const content = `<?xml version="1.0" encoding="UTF-8"?>
<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2">
<office:body><office:text>
<text:h text:outline-level="1">Delivery areas</text:h>
<text:p>We deliver to Porto<text:s/>and Braga.</text:p>
<text:h text:outline-level="2">Fees</text:h>
<text:p>Delivery costs<text:tab/>five euros.</text:p>
</office:text></office:body></office:document-content>`;
  return zipOf([
    ['mimetype', 'application/vnd.oasis.opendocument.text', false],
    ['content.xml', content, true],
    ['META-INF/manifest.xml', '<?xml version="1.0" encoding="UTF-8"?><manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"><manifest:file-entry manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.text"/><manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/></manifest:manifest>', true],
  ]);
}

/** A plain zip archive that is no office document. */
export async function makePlainZip(): Promise<Buffer> {
  return zipOf([['readme.txt', 'just a zip', true], ['data/info.json', '{"a":1}', true]]);
}

async function zipOf(entries: Array<[string, string | Buffer, boolean]>): Promise<Buffer> {
  const zip = new yazl.ZipFile();
  for (const [name, data, compress] of entries) zip.addBuffer(Buffer.from(data), name, { compress });
  zip.end();
  return collect(zip.outputStream);
}

/** A PNG (white background, black text) rendered with pureimage, for OCR. */
export async function makeTextPng(words: readonly string[] = TEXT.ocrWords, format: 'png' | 'jpeg' = 'png'): Promise<Buffer> {
  const fontPath = require.resolve('pdfjs-dist/standard_fonts/LiberationSans-Regular.ttf');
  const font = PImage.registerFont(fontPath, 'TestSans');
  font.loadSync();
  const img = PImage.make(900, 110 * words.length + 40);
  const ctx = img.getContext('2d');
  ctx.fillStyle = '#ffffff';
  ctx.fillRect(0, 0, img.width, img.height);
  ctx.fillStyle = '#000000';
  ctx.font = '64px TestSans';
  words.forEach((w, i) => ctx.fillText(w, 40, 100 + i * 110));
  const out = new PassThrough();
  const done = collect(out);
  if (format === 'png') await PImage.encodePNGToStream(img, out);
  else await PImage.encodeJPEGToStream(img, out, 95);
  out.end();
  return done;
}

/** A mono 16-bit PCM WAV of `ms` milliseconds of a 440 Hz tone; RIFF header written by hand. */
export function makeWav(ms = 300, sampleRate = 16000): Buffer {
  const samples = Math.round((sampleRate * ms) / 1000);
  const data = Buffer.alloc(samples * 2);
  for (let i = 0; i < samples; i++) data.writeInt16LE(Math.round(Math.sin((2 * Math.PI * 440 * i) / sampleRate) * 8000), i * 2);
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'ascii');
  h.writeUInt32LE(36 + data.length, 4);
  h.write('WAVE', 8, 'ascii');
  h.write('fmt ', 12, 'ascii');
  h.writeUInt32LE(16, 16); // fmt chunk size
  h.writeUInt16LE(1, 20); // PCM
  h.writeUInt16LE(1, 22); // mono
  h.writeUInt32LE(sampleRate, 24);
  h.writeUInt32LE(sampleRate * 2, 28); // byte rate
  h.writeUInt16LE(2, 32); // block align
  h.writeUInt16LE(16, 34); // bits per sample
  h.write('data', 36, 'ascii');
  h.writeUInt32LE(data.length, 40);
  return Buffer.concat([h, data]);
}

function box(type: string, payload: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(8 + payload.length, 0);
  head.write(type, 4, 'ascii');
  return Buffer.concat([head, payload]);
}

/** An ISO-BMFF file with the given major brand (`isom` → MP4, `M4A ` → M4A): an ftyp box and an empty mdat. */
export function makeIsoMedia(brand: 'isom' | 'M4A ' = 'isom'): Buffer {
  const compat = brand === 'isom' ? ['isom', 'iso2', 'avc1', 'mp41'] : ['M4A ', 'mp42', 'isom'];
  const ftyp = box('ftyp', Buffer.concat([Buffer.from(brand, 'ascii'), Buffer.from([0, 0, 2, 0]), ...compat.map((b) => Buffer.from(b, 'ascii'))]));
  return Buffer.concat([ftyp, box('free', Buffer.alloc(16)), box('mdat', Buffer.alloc(64))]);
}

/** The start of a WebM file: an EBML header with DocType "webm". */
export function makeWebm(): Buffer {
  const docType = Buffer.concat([Buffer.from([0x42, 0x82, 0x84]), Buffer.from('webm', 'ascii')]);
  const body = Buffer.concat([Buffer.from([0x42, 0x86, 0x81, 0x01]), Buffer.from([0x42, 0xf7, 0x81, 0x01]), docType]);
  return Buffer.concat([Buffer.from([0x1a, 0x45, 0xdf, 0xa3, 0x80 | body.length]), body, Buffer.alloc(64)]);
}

/** An MP3: an ID3v2 tag then a few MPEG-1 Layer III frame headers (silent frames). */
export function makeMp3(): Buffer {
  const id3 = Buffer.from([0x49, 0x44, 0x33, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00]);
  const frame = Buffer.alloc(417);
  frame.set([0xff, 0xfb, 0x90, 0x64]);
  return Buffer.concat([id3, frame, frame, frame]);
}

/** An Ogg page carrying a Vorbis identification header. */
export function makeOgg(): Buffer {
  const page = Buffer.alloc(28 + 30);
  page.write('OggS', 0, 'ascii');
  page[5] = 0x02; // beginning of stream
  page[26] = 1; // one segment
  page[27] = 30; // of 30 bytes
  page[28] = 0x01;
  page.write('vorbis', 29, 'ascii');
  return page;
}

/** Minimal headers of other image formats (for sniffing only). */
export const IMAGE_HEADERS = {
  gif: () => Buffer.concat([Buffer.from('GIF89a', 'ascii'), Buffer.from([1, 0, 1, 0, 0, 0, 0]), Buffer.from([0x3b])]),
  webp: () => {
    const b = Buffer.alloc(40);
    b.write('RIFF', 0, 'ascii');
    b.writeUInt32LE(32, 4);
    b.write('WEBPVP8 ', 8, 'ascii');
    return b;
  },
  tiff: () => Buffer.concat([Buffer.from([0x49, 0x49, 0x2a, 0x00, 0x08, 0x00, 0x00, 0x00]), Buffer.alloc(32)]),
};

/** "%PDF-1.7\n" followed by random bytes. */
export function makeCorruptPdf(size = 4096): Buffer {
  return Buffer.concat([Buffer.from('%PDF-1.7\n', 'ascii'), randomBytes(size)]);
}

/** Deterministic pseudo-random bytes (no NUL-free guarantee: this is binary junk). */
export function randomBytes(size: number, seed = 42): Buffer {
  const b = Buffer.alloc(size);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < size; i++) {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    b[i] = x & 0xff;
  }
  return b;
}

/** A big CSV (for the memory-limit test). */
export function writeBigCsv(filePath: string, rows: number): void {
  const fd = fs.openSync(filePath, 'w');
  try {
    fs.writeSync(fd, 'id,name,description,city\n');
    const batch: string[] = [];
    for (let i = 1; i <= rows; i++) {
      batch.push(`${i},Customer ${i},A fairly long description of customer number ${i} and their order history,City ${i % 97}`);
      if (batch.length === 10_000) { fs.writeSync(fd, batch.join('\n') + '\n'); batch.length = 0; }
    }
    if (batch.length) fs.writeSync(fd, batch.join('\n') + '\n');
  } finally {
    fs.closeSync(fd);
  }
}

// ---------------------------------------------------------------------------------------
// Zip bomb: a DOCX whose word/document.xml inflates to `inflatedBytes`. The deflate
// stream is built from one compressed 1 MiB block (compressed with a full flush, so it
// references nothing before it) repeated N times, then an empty final block: the file is
// about 1 KiB per MiB of payload and the test never holds the inflated data.

const MIB = 1 << 20;

function crcTable(): Uint32Array {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
}
const CRC_TABLE = crcTable();
function crc32(buf: Buffer, prev = 0): number {
  if (typeof zlib.crc32 === 'function') return zlib.crc32(buf, prev);
  let c = (prev ^ 0xffffffff) >>> 0;
  for (let i = 0; i < buf.length; i++) c = CRC_TABLE[(c ^ buf[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

interface RawEntry { name: string; data: Buffer[]; method: 0 | 8; crc: number; size: number; declaredSize?: number }

function fullFlushDeflate(buf: Buffer): Buffer {
  return zlib.deflateRawSync(buf, { level: 9, finishFlush: zlib.constants.Z_FULL_FLUSH });
}

/** Writes a zip of raw (already compressed) entries; sizes must fit 32 bits. */
function writeRawZip(filePath: string, entries: RawEntry[]): void {
  const fd = fs.openSync(filePath, 'w');
  let offset = 0;
  const write = (b: Buffer) => { fs.writeSync(fd, b); offset += b.length; };
  const central: Buffer[] = [];
  try {
    for (const e of entries) {
      const name = Buffer.from(e.name, 'utf8');
      const compressed = e.data.reduce((n, b) => n + b.length, 0);
      const size = e.declaredSize ?? e.size;
      const local = Buffer.alloc(30);
      local.writeUInt32LE(0x04034b50, 0);
      local.writeUInt16LE(20, 4);
      local.writeUInt16LE(0x0800, 6); // UTF-8 names
      local.writeUInt16LE(e.method, 8);
      local.writeUInt32LE(0x00210000, 10); // 1980-01-01 00:00
      local.writeUInt32LE(e.crc >>> 0, 14);
      local.writeUInt32LE(compressed, 18);
      local.writeUInt32LE(size, 22);
      local.writeUInt16LE(name.length, 26);
      const cd = Buffer.alloc(46);
      cd.writeUInt32LE(0x02014b50, 0);
      cd.writeUInt16LE(20, 4);
      cd.writeUInt16LE(20, 6);
      cd.writeUInt16LE(0x0800, 8);
      cd.writeUInt16LE(e.method, 10);
      cd.writeUInt32LE(0x00210000, 12);
      cd.writeUInt32LE(e.crc >>> 0, 16);
      cd.writeUInt32LE(compressed, 20);
      cd.writeUInt32LE(size, 24);
      cd.writeUInt16LE(name.length, 28);
      cd.writeUInt32LE(offset, 42);
      central.push(cd, name);
      write(local);
      write(name);
      for (const b of e.data) write(b);
    }
    const cdStart = offset;
    for (const b of central) write(b);
    const eocd = Buffer.alloc(22);
    eocd.writeUInt32LE(0x06054b50, 0);
    eocd.writeUInt16LE(entries.length, 8);
    eocd.writeUInt16LE(entries.length, 10);
    eocd.writeUInt32LE(offset - cdStart, 12);
    eocd.writeUInt32LE(cdStart, 16);
    write(eocd);
  } finally {
    fs.closeSync(fd);
  }
}

function smallEntry(name: string, text: string): RawEntry {
  const data = Buffer.from(text, 'utf8');
  return { name, data: [zlib.deflateRawSync(data)], method: 8, crc: crc32(data), size: data.length };
}

const CONTENT_TYPES = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>';
const ROOT_RELS = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>';

/**
 * Writes a zip-bomb DOCX to `filePath`. With `lieAboutSize` the zip headers declare a
 * small uncompressed size for word/document.xml (the inflated data is still huge).
 */
export function writeZipBombDocx(filePath: string, opts: { inflatedBytes?: number; lieAboutSize?: boolean } = {}): void {
  const inflated = opts.inflatedBytes ?? 1.1 * 1024 * MIB;
  const head = Buffer.from('<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>', 'utf8');
  const tail = Buffer.from('</w:body></w:document>', 'utf8');
  const unit = Buffer.from('<w:p><w:r><w:t>boom boom boom boom boom boom</w:t></w:r></w:p>', 'utf8');
  const chunk = Buffer.alloc(Math.floor(MIB / unit.length) * unit.length);
  for (let i = 0; i < chunk.length; i += unit.length) unit.copy(chunk, i);
  const reps = Math.ceil(inflated / chunk.length);
  const block = fullFlushDeflate(chunk);
  let crc = crc32(head);
  for (let i = 0; i < reps; i++) crc = crc32(chunk, crc);
  crc = crc32(tail, crc);
  const size = head.length + chunk.length * reps + tail.length;
  if (size >= 2 ** 32) throw new Error('bomb too large for a zip32 entry');
  const data = [fullFlushDeflate(head), ...Array.from({ length: reps }, () => block), zlib.deflateRawSync(tail)];
  writeRawZip(filePath, [
    smallEntry('[Content_Types].xml', CONTENT_TYPES),
    smallEntry('_rels/.rels', ROOT_RELS),
    { name: 'word/document.xml', data, method: 8, crc, size, declaredSize: opts.lieAboutSize ? 4096 : undefined },
  ]);
}

// ---------------------------------------------------------------------------------------
// A tiny Compound File Binary (OLE2) writer: enough to make containers that look like a
// Word 97 document, an Excel 97 workbook or an Outlook message to the sniffer and, for
// MSG, to @kenjiuno/msgreader. Streams under 4096 bytes live in the mini stream, as the
// format requires; the root's children are chained through right siblings.

export function makeCfb(streams: Array<{ name: string; data: Buffer }>): Buffer {
  const SECTOR = 512;
  const MINI = 64;
  const pad = (b: Buffer, n: number) => Buffer.concat([b, Buffer.alloc((n - (b.length % n)) % n)]);
  const small = streams.filter((s) => s.data.length < 4096);
  const big = streams.filter((s) => s.data.length >= 4096);
  // Mini stream and its FAT.
  const miniFat: number[] = [];
  const miniStart = new Map<string, number>();
  const miniParts: Buffer[] = [];
  for (const s of small) {
    const n = Math.max(1, Math.ceil(s.data.length / MINI));
    miniStart.set(s.name, miniFat.length);
    for (let i = 0; i < n; i++) miniFat.push(i === n - 1 ? -2 : miniFat.length + 1);
    miniParts.push(pad(s.data.length ? s.data : Buffer.alloc(1), MINI));
  }
  const miniStream = pad(Buffer.concat(miniParts), SECTOR);
  const miniFatBuf = pad(Buffer.from(Int32Array.from(miniFat).buffer), SECTOR);
  for (let i = miniFat.length * 4; i < miniFatBuf.length; i += 4) miniFatBuf.writeInt32LE(-1, i);
  const dirEntries = 1 + streams.length;
  const dirSectors = Math.ceil((dirEntries * 128) / SECTOR);
  const miniFatSectors = small.length ? miniFatBuf.length / SECTOR : 0;
  const miniStreamSectors = small.length ? miniStream.length / SECTOR : 0;
  const bigParts = big.map((s) => pad(s.data, SECTOR));
  const bigSectors = bigParts.reduce((n, b) => n + b.length / SECTOR, 0);
  let fatSectors = 1;
  while (fatSectors * 128 < fatSectors + dirSectors + miniFatSectors + miniStreamSectors + bigSectors) fatSectors++;
  if (fatSectors > 109) throw new Error('container too large for this writer');
  const fat = new Int32Array(fatSectors * 128).fill(-1);
  for (let i = 0; i < fatSectors; i++) fat[i] = -3;
  let next = fatSectors;
  const chain = (n: number): number => {
    if (n === 0) return -2;
    const start = next;
    for (let i = 0; i < n; i++) fat[next + i] = i === n - 1 ? -2 : next + i + 1;
    next += n;
    return start;
  };
  const dirStart = chain(dirSectors);
  const miniFatStart = chain(miniFatSectors);
  const miniStreamStart = chain(miniStreamSectors);
  const bigStart = new Map<string, number>();
  big.forEach((s, i) => bigStart.set(s.name, chain(bigParts[i].length / SECTOR)));

  const header = Buffer.alloc(512);
  Buffer.from([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]).copy(header, 0);
  header.writeUInt16LE(0x003e, 0x18);
  header.writeUInt16LE(0x0003, 0x1a);
  header.writeUInt16LE(0xfffe, 0x1c);
  header.writeUInt16LE(9, 0x1e);
  header.writeUInt16LE(6, 0x20);
  header.writeUInt32LE(fatSectors, 0x2c);
  header.writeInt32LE(dirStart, 0x30);
  header.writeUInt32LE(0x1000, 0x38);
  header.writeInt32LE(miniFatStart, 0x3c);
  header.writeUInt32LE(miniFatSectors, 0x40);
  header.writeInt32LE(-2, 0x44);
  for (let i = 0; i < 109; i++) header.writeInt32LE(i < fatSectors ? i : -1, 0x4c + i * 4);

  const dir = Buffer.alloc(dirSectors * SECTOR);
  const entry = (i: number, name: string, type: number, right: number, child: number, start: number, size: number) => {
    const o = i * 128;
    const n = Buffer.from(name + '\0', 'utf16le');
    n.copy(dir, o);
    dir.writeUInt16LE(n.length, o + 0x40);
    dir[o + 0x42] = type;
    dir[o + 0x43] = 1;
    dir.writeInt32LE(-1, o + 0x44);
    dir.writeInt32LE(right, o + 0x48);
    dir.writeInt32LE(child, o + 0x4c);
    dir.writeInt32LE(start, o + 0x74);
    dir.writeUInt32LE(size, o + 0x78);
  };
  for (let i = dirEntries; i < dirSectors * 4; i++) {
    dir.writeInt32LE(-1, i * 128 + 0x44);
    dir.writeInt32LE(-1, i * 128 + 0x48);
    dir.writeInt32LE(-1, i * 128 + 0x4c);
  }
  entry(0, 'Root Entry', 5, -1, streams.length ? 1 : -1, small.length ? miniStreamStart : -2, small.length ? miniParts.reduce((n, b) => n + b.length, 0) : 0);
  streams.forEach((s, i) => {
    const start = s.data.length < 4096 ? miniStart.get(s.name)! : bigStart.get(s.name)!;
    entry(i + 1, s.name, 2, i + 2 <= streams.length ? i + 2 : -1, -1, start, s.data.length);
  });
  return Buffer.concat([header, Buffer.from(fat.buffer), dir, ...(small.length ? [miniFatBuf, miniStream] : []), ...bigParts]);
}

/** An Outlook .msg with subject, sender and plain body (Unicode string properties). */
export function makeMsg(subject: string, body: string): Buffer {
  const u = (s: string) => Buffer.from(s, 'utf16le');
  return makeCfb([
    { name: '__properties_version1.0', data: Buffer.alloc(32) },
    { name: '__substg1.0_0037001F', data: u(subject) },
    { name: '__substg1.0_0C1A001F', data: u('Shop Support') },
    { name: '__substg1.0_1000001F', data: u(body) },
  ]);
}

/**
 * A minimal Word 97 binary document: a FIB (magic 0xA5EC, "1Table" flag, ccpText, fcClx)
 * and the text as one UTF-16 piece, with a one-piece piece table in the 1Table stream —
 * what a .doc reader needs to find the body text.
 */
export function makeDoc(paragraphs: string[]): Buffer {
  const text = paragraphs.join('\r') + '\r';
  const textOffset = 0x800;
  const word = Buffer.alloc(Math.max(4096, textOffset + text.length * 2));
  word.writeUInt16LE(0xa5ec, 0x00); // wIdent
  word.writeUInt16LE(0x00c1, 0x02); // nFib (Word 97)
  word.writeUInt16LE(0x0200, 0x0a); // fWhichTblStm: the table stream is "1Table"
  word.writeUInt32LE(textOffset, 0x18); // fcMin
  word.writeUInt32LE(text.length, 0x4c); // ccpText
  word.writeUInt32LE(0, 0x1a2); // fcClx: the CLX is at offset 0 of 1Table
  Buffer.from(text, 'utf16le').copy(word, textOffset);
  const table = Buffer.alloc(1 + 4 + 8 + 8);
  table[0] = 0x02; // Pcdt
  table.writeUInt32LE(16, 1); // lcb of the PlcPcd: 2 CPs + 1 PCD
  table.writeUInt32LE(0, 5); // CP 0
  table.writeUInt32LE(text.length, 9); // CP end
  table.writeUInt16LE(0, 13); // PCD flags
  table.writeUInt32LE(textOffset, 15); // fc: bit 30 clear → UTF-16 text at this offset
  word.writeUInt32LE(table.length, 0x1a6); // lcbClx
  return makeCfb([
    { name: 'WordDocument', data: word },
    { name: '1Table', data: table },
  ]);
}

// ---------------------------------------------------------------------------------------
// The benchmarks' inputs: a help-centre handbook of support prose, an order export of any size.

/**
 * A help-centre handbook: every page a heading and 85-115% of `wordsPerPage` words of
 * paragraphs on one topic (A4, 10.5 pt). Text that would not fit is cut at the page's
 * bottom margin, so the PDF has exactly `pages` pages (checked).
 */
export async function makeHandbookPdf(pages: number, wordsPerPage: number, seed = 42): Promise<{ pdf: Buffer; words: number }> {
  const rand = prng(seed);
  const doc = new PDFDocument({ autoFirstPage: false, compress: true, info: { Title: 'Customer support handbook' } });
  const done = collect(doc);
  let added = 0;
  let words = 0;
  doc.on('pageAdded', () => added++);
  for (let p = 0; p < pages; p++) {
    doc.addPage({ size: 'A4', margins: { top: 56, bottom: 56, left: 64, right: 64 } });
    const topic = TOPICS[Math.floor(p / 4) % TOPICS.length];
    const heading = `${p + 1}. ${topic.title}`;
    const body = passage(rand, topic, Math.round(wordsPerPage * (0.85 + 0.3 * rand())));
    words += body.join(' ').split(/\s+/).length;
    const width = doc.page.width - 128;
    doc.font('Helvetica-Bold').fontSize(15).text(heading, 64, 56, { width });
    doc.moveDown(0.6);
    const height = doc.page.height - 56 - doc.y;
    doc.font('Helvetica').fontSize(10.5).text(body.join('\n\n'), { width, height, ellipsis: true, lineGap: 1.5 });
  }
  doc.end();
  const pdf = await done;
  if (added !== pages) throw new Error(`the generated PDF has ${added} pages, expected ${pages}: text overflowed a page`);
  return { pdf, words };
}

/** A CSV order export of exactly `bytes` bytes, 64 KB at a time from a pool of pre-built blocks. */
export function orderExportCsv(bytes: number): Readable {
  const rand = prng(2024);
  const pick = (xs: string[]) => xs[Math.floor(rand() * xs.length)];
  const block = (b: number) => {
    let text = '';
    for (let i = 0; text.length < 64 * 1024; i++) {
      text +=
        `${100000 + b * 1000 + i},2026-${String(1 + Math.floor(rand() * 12)).padStart(2, '0')}-${String(1 + Math.floor(rand() * 28)).padStart(2, '0')},` +
        `customer${Math.floor(rand() * 1e6)}@example.com,${pick(['standing desk', 'espresso machine', 'winter jacket', 'gift card'])},${pick(['delivered', 'shipped', 'refunded', 'returned'])},` +
        `${(rand() * 500).toFixed(2)},"Customer asked about delivery times and the returns window for order ${b}-${i}"\n`;
    }
    return Buffer.from(text);
  };
  const pool = [Buffer.from('order_id,date,customer,product,status,amount_eur,notes\n'), ...Array.from({ length: 64 }, (_, b) => block(b))];
  let sent = 0;
  let n = 0;
  return new Readable({
    read() {
      if (sent >= bytes) return void this.push(null);
      const next = pool[n === 0 ? n++ : 1 + (n++ % 64)];
      const take = Math.min(next.length, bytes - sent);
      sent += take;
      this.push(next.subarray(0, take));
    },
  });
}

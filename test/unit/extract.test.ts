import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { ExtractionError, extractDocument, sniffBuffer, sniffType, type DocKind, type ExtractResult, type Transcriber } from '../../lib/extract';
import { OpenAiTranscriber } from '../../providers/speech/openai-transcriber';
import * as D from '../../dev/fakes/documents';
import { opusTone } from '../../dev/fakes/speech';

let dir: string;
const files: Record<string, string> = {};

/** Writes a generated document under `name` and remembers its path. */
function put(name: string, data: Buffer | string): string {
  files[name] = D.writeFile(dir, name, data);
  return files[name];
}

beforeAll(async () => {
  dir = D.tempDir();
  put('guide.pdf', await D.makePdf());
  put('big.pdf', await D.makeBigPdf(150));
  put('manual.docx', await D.makeDocx());
  put('prices.xlsx', await D.makeXlsx());
  put('prices.xls', D.makeXls());
  put('prices.ods', D.makeOds());
  put('prices.csv', D.makeCsv());
  put('deck.pptx', await D.makePptx());
  put('order.eml', await D.makeEml());
  // Opus voice notes as browsers record them (ffmpeg): audio-only WebM (Chrome), Ogg (Firefox).
  put('voice-note.webm', opusTone('webm', dir));
  put('voice-note.opus', opusTone('ogg', dir));
  put('hours.html', D.makeHtml());
  put('returns.md', D.makeMarkdown());
  put('cafe.rtf', D.makeRtf());
  put('delivery.odt', await D.makeOdt());
  put('legacy.doc', D.makeDoc(['Opening hours are 9 to 5.', 'Closed on Sundays.']));
  put('note.msg', D.makeMsg('Printer jam', 'Open tray 2 and remove the paper.'));
  put('notes.txt', 'Plain notes: the wifi password is on the fridge.\n');
  put('data.json', '{"faq":[{"q":"Do you ship abroad?","a":"Yes, to the EU."}]}');
  put('feed.xml', '<?xml version="1.0"?><catalog><book id="b1"><title>Dune</title><price>9.99</price></book></catalog>');
  put('scan.png', await D.makeTextPng());
  put('photo.jpg', await D.makeTextPng(['RECEIPT'], 'jpeg'));
  put('anim.gif', D.IMAGE_HEADERS.gif());
  put('pic.webp', D.IMAGE_HEADERS.webp());
  put('fax.tiff', D.IMAGE_HEADERS.tiff());
  put('voice.wav', D.makeWav());
  put('song.mp3', D.makeMp3());
  put('clip.ogg', D.makeOgg());
  put('memo.m4a', D.makeIsoMedia('M4A '));
  put('movie.mp4', D.makeIsoMedia('isom'));
  put('movie.webm', D.makeWebm());
  // The tricky ones.
  put('corrupt.pdf', D.makeCorruptPdf());
  put('really-a-png.pdf', await D.makeTextPng(['X']));
  put('empty.txt', '');
  put('empty.pdf', '');
  put('random.bin', D.randomBytes(4096));
  put('junk.txt', D.randomBytes(4096, 7));
  put('archive.zip', await D.makePlainZip());
  put('archive-named.docx', await D.makePlainZip());
  put('drawing.svg', '<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"><text>hi</text></svg>');
  put('slides.ppt', D.makeCfb([{ name: 'PowerPoint Document', data: Buffer.alloc(100) }]));
  put('utf16.txt', Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('Olá, UTF-16 text', 'utf16le')]));
  put('latin1.txt', Buffer.from('Caf\xe9 cr\xe8me br\xfbl\xe9e', 'latin1'));
  put('whitespace.txt', '  \n\t\n   ');
  put('script.exe.txt', 'just text with a misleading name');
  put('scan.pdf', await D.makeScannedPdf([['SCANNED', 'INVOICE 7781'], ['PAGE TWO', 'TOTAL 42.00']]));
  put('scan-jpeg.pdf', await D.makeScannedPdf([['RECEIPT 5521']], 'jpeg'));
  put('text-named.exe', 'this is text but .exe is not a text format');
}, 60_000);

afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

async function extract(name: string, opts: Parameters<typeof extractDocument>[1] = {}): Promise<ExtractResult> {
  const type = await sniffType(files[name], name);
  if (!type) throw new Error(`${name} did not sniff`);
  return extractDocument({ filePath: files[name], fileName: name, ...type }, opts);
}

async function extractionError(promise: Promise<unknown>): Promise<ExtractionError> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof ExtractionError) return err;
    throw err;
  }
  throw new Error('expected an ExtractionError');
}

function allText(r: ExtractResult): string {
  return r.segments.map((s) => s.text).join('\n');
}

/** Extraction children of this process that are still alive (Linux /proc). */
function liveChildren(): number[] {
  const pids: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === process.pid && fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(`extract${path.sep}child`)) pids.push(Number(entry));
    } catch {
      // raced with an exiting process
    }
  }
  return pids;
}

describe('sniffType', () => {
  // Every row has three elements: Jest treats a missing trailing argument as a `done` callback.
  const expected: Array<[string, DocKind | null, string | undefined]> = [
    ['guide.pdf', 'pdf', 'application/pdf'],
    ['manual.docx', 'docx', 'application/vnd.openxmlformats-officedocument.wordprocessingml.document'],
    ['prices.xlsx', 'xlsx', 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet'],
    ['deck.pptx', 'pptx', 'application/vnd.openxmlformats-officedocument.presentationml.presentation'],
    ['delivery.odt', 'odt', 'application/vnd.oasis.opendocument.text'],
    ['prices.ods', 'ods', 'application/vnd.oasis.opendocument.spreadsheet'],
    ['prices.xls', 'xls', 'application/vnd.ms-excel'],
    ['legacy.doc', 'doc', 'application/msword'],
    ['note.msg', 'msg', 'application/vnd.ms-outlook'],
    ['cafe.rtf', 'rtf', 'application/rtf'],
    ['prices.csv', 'csv', 'text/csv'],
    ['order.eml', 'eml', 'message/rfc822'],
    ['hours.html', 'html', 'text/html'],
    ['returns.md', 'markdown', 'text/markdown'],
    ['notes.txt', 'text', 'text/plain'],
    ['data.json', 'json', 'application/json'],
    ['feed.xml', 'xml', 'application/xml'],
    ['scan.png', 'image', 'image/png'],
    ['photo.jpg', 'image', 'image/jpeg'],
    ['anim.gif', 'image', 'image/gif'],
    ['pic.webp', 'image', 'image/webp'],
    ['fax.tiff', 'image', 'image/tiff'],
    ['voice.wav', 'audio', 'audio/wav'],
    ['song.mp3', 'audio', 'audio/mpeg'],
    ['clip.ogg', 'audio', 'audio/ogg'],
    ['memo.m4a', 'audio', 'audio/x-m4a'],
    ['movie.mp4', 'video', 'video/mp4'],
    ['movie.webm', 'video', 'video/webm'],
    // A WebM with audio tracks only is audio (Chrome's voice notes); Ogg Opus is named with a parameter by file-type.
    ['voice-note.webm', 'audio', 'audio/webm'],
    ['voice-note.opus', 'audio', 'audio/ogg'],
    // Bytes win over names.
    ['really-a-png.pdf', 'image', 'image/png'],
    ['corrupt.pdf', 'pdf', 'application/pdf'],
    ['utf16.txt', 'text', 'text/plain'],
    ['latin1.txt', 'text', 'text/plain'],
    ['script.exe.txt', 'text', 'text/plain'],
    // Empty: a text-format name keeps its kind (extraction then finds no text); others have none.
    ['empty.txt', 'text', 'text/plain'],
    ['empty.pdf', null, undefined],
    ['random.bin', null, undefined],
    ['junk.txt', null, undefined],
    ['archive.zip', null, undefined],
    ['archive-named.docx', null, undefined],
    ['drawing.svg', null, undefined],
    ['slides.ppt', null, undefined],
    ['text-named.exe', null, undefined],
  ];

  test.each(expected)('%s → %s', async (name, kind, mime) => {
    const got = await sniffType(files[name], name);
    if (kind === null) expect(got).toBeNull();
    else expect(got).toEqual({ kind, mime });
  });

  test('sniffBuffer agrees for in-memory bytes and ignores the name for binary formats', async () => {
    expect(await sniffBuffer(fs.readFileSync(files['guide.pdf']), 'invoice.txt')).toEqual({ kind: 'pdf', mime: 'application/pdf' });
    expect(await sniffBuffer(fs.readFileSync(files['manual.docx']), 'x.bin')).toMatchObject({ kind: 'docx' });
  });
});

describe('extractDocument', () => {
  test('PDF: one segment per page with page numbers', async () => {
    const r = await extract('guide.pdf');
    expect(r.segments).toEqual([
      { page: 1, text: D.TEXT.pdfPage1 },
      { page: 2, text: D.TEXT.pdfPage2 },
    ]);
  });

  test('scanned PDF (no text layer): each page OCR\'d, one segment per page with its number; PNG and JPEG scans alike', async () => {
    const r = await extract('scan.pdf');
    expect(r.segments).toEqual([
      { page: 1, text: 'SCANNED\nINVOICE 7781' },
      { page: 2, text: 'PAGE TWO\nTOTAL 42.00' },
    ]);
    expect(r.warnings).toEqual([]);
    expect((await extract('scan-jpeg.pdf')).segments).toEqual([{ page: 1, text: 'RECEIPT 5521' }]);
  }, 60_000);

  test('DOCX: headings kept as segment headings', async () => {
    const r = await extract('manual.docx');
    expect(r.segments).toEqual([
      { heading: D.TEXT.docxHeading1, text: `${D.TEXT.docxHeading1}\n\n${D.TEXT.docxPara1}` },
      { heading: D.TEXT.docxHeading2, text: `${D.TEXT.docxHeading2}\n\n${D.TEXT.docxPara2}` },
    ]);
  });

  test('XLSX: one segment per row with sheet and row', async () => {
    const r = await extract('prices.xlsx');
    expect(r.segments).toEqual([
      { sheet: 'Prices', row: 2, text: 'Product: Widget; Price: 9.99; Stock: 12' },
      { sheet: 'Prices', row: 3, text: 'Product: Gadget; Price: 24.5; Stock: 3' },
      { sheet: 'Prices', row: 4, text: 'Product: Gizmo; Price: 5; Stock: 40' },
      { sheet: 'Staff', row: 2, text: 'Name: Ana; Role: Support lead' },
    ]);
  });

  test.each(['prices.xls', 'prices.ods'])('%s: rows like XLSX', async (name) => {
    const r = await extract(name);
    expect(r.segments).toContainEqual({ sheet: 'Prices', row: 3, text: 'Product: Gadget; Price: 24.5; Stock: 3' });
    expect(r.segments).toHaveLength(3);
  });

  test('CSV: header-labelled rows (header is row 1)', async () => {
    const r = await extract('prices.csv');
    expect(r.segments[0]).toEqual({ row: 2, text: 'Product: Widget; Price: 9.99; Stock: 12' });
    expect(r.segments).toHaveLength(3);
  });

  test('PPTX: one segment per slide, title as heading', async () => {
    const r = await extract('deck.pptx');
    expect(r.segments).toEqual([
      { slide: 1, heading: D.TEXT.slide1Title, text: `${D.TEXT.slide1Title}\n${D.TEXT.slide1Body}` },
      { slide: 2, heading: D.TEXT.slide2Title, text: `${D.TEXT.slide2Title}\n${D.TEXT.slide2Body}` },
    ]);
  });

  test('EML: headers, body, and the text of its text and PDF attachments', async () => {
    const r = await extract('order.eml');
    const [mail, ...atts] = r.segments;
    expect(mail.heading).toBe(D.TEXT.emailSubject);
    expect(mail.text).toContain('From: "Shop" <shop@example.com>');
    expect(mail.text).toContain('To: "Customer" <customer@example.com>');
    expect(mail.text).toContain(`Subject: ${D.TEXT.emailSubject}`);
    expect(mail.text).toContain('Date: 2024-05-01T10:00:00.000Z');
    expect(mail.text).toContain(D.TEXT.emailBody);
    expect(atts).toEqual([
      { heading: 'Attachment: notes.txt', text: D.TEXT.emailAttachmentText },
      { heading: 'Attachment: invoice.pdf', page: 1, text: D.TEXT.pdfPage1 },
    ]);
  });

  test('MSG: subject, sender and body', async () => {
    const r = await extract('note.msg');
    expect(r.segments).toEqual([{ heading: 'Printer jam', text: 'From: Shop Support\nSubject: Printer jam\n\nOpen tray 2 and remove the paper.' }]);
  });

  test('DOC: body text', async () => {
    const r = await extract('legacy.doc');
    expect(allText(r)).toBe('Opening hours are 9 to 5.\nClosed on Sundays.');
  });

  test('HTML: headings kept, scripts and styles dropped', async () => {
    const r = await extract('hours.html');
    expect(r.segments.map((s) => s.heading)).toEqual(['Store hours', 'Holidays']);
    expect(r.segments[0].text).toContain('We are open from 9 to 5 on weekdays.');
    expect(r.segments[1].text).toContain('Christmas');
    expect(allText(r)).not.toMatch(/hidden script|color:red/);
  });

  test('Markdown: split at headings, not inside code fences', async () => {
    const r = await extract('returns.md');
    expect(r.segments.map((s) => s.heading)).toEqual(['Returns', 'Exceptions']);
    expect(r.segments[1].text).toContain('# not a heading');
  });

  test('ODT: headings and paragraphs', async () => {
    const r = await extract('delivery.odt');
    expect(r.segments).toEqual([
      { heading: 'Delivery areas', text: 'Delivery areas\nWe deliver to Porto and Braga.' },
      { heading: 'Fees', text: 'Fees\nDelivery costs\tfive euros.' },
    ]);
  });

  test('RTF: control words stripped, escapes decoded', async () => {
    const r = await extract('cafe.rtf');
    expect(allText(r)).toBe('Café opening hours\nOpen daily from 8 – 20.');
  });

  test('text, JSON and XML', async () => {
    expect(allText(await extract('notes.txt'))).toBe('Plain notes: the wifi password is on the fridge.');
    expect(allText(await extract('data.json'))).toContain('"q": "Do you ship abroad?"');
    const xml = allText(await extract('feed.xml'));
    expect(xml).toBe('catalog\n  book id=b1\n    title: Dune\n    price: 9.99');
    expect(allText(await extract('utf16.txt'))).toBe('Olá, UTF-16 text');
    expect(allText(await extract('latin1.txt'))).toBe('Café crème brûlée');
  });

  test('image OCR finds the rendered words (offline model)', async () => {
    const r = await extract('scan.png');
    expect(r.segments).toHaveLength(1);
    for (const word of D.TEXT.ocrWords) expect(r.segments[0].text).toContain(word);
  });

  test('corrupt PDF → ExtractionError', async () => {
    const err = await extractionError(extract('corrupt.pdf'));
    expect(err.reason).toBe('PDF is corrupt or encrypted');
  });

  test('a PNG named .pdf is OCRed as an image, not parsed as a PDF', async () => {
    const r = await extract('really-a-png.pdf');
    expect(r.segments[0].text).toContain('X');
  });

  test.each(['empty.txt', 'whitespace.txt'])('%s → no text could be extracted', async (name) => {
    const err = await extractionError(extract(name));
    expect(err.reason).toBe('no text could be extracted');
  });

  test.each([
    ['honest headers', false],
    ['lying headers', true],
  ])('zip-bomb DOCX (%s) fails fast without hurting this process', async (_label, lieAboutSize) => {
    const bomb = path.join(dir, `bomb-${lieAboutSize}.docx`);
    D.writeZipBombDocx(bomb, { inflatedBytes: 1.1 * 1024 ** 3, lieAboutSize });
    expect(await sniffType(bomb, 'bomb.docx')).toMatchObject({ kind: 'docx' });
    const rssBefore = process.memoryUsage().rss;
    const started = Date.now();
    const err = await extractionError(extractDocument({ filePath: bomb, fileName: 'bomb.docx', kind: 'docx', mime: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document' }));
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(err.reason).toMatch(/zip bomb|memory limit/);
    expect(process.memoryUsage().rss - rssBefore).toBeLessThan(200 * 1024 * 1024);
    expect(liveChildren()).toEqual([]);
  });

  test('a child that runs out of heap → memory-limit ExtractionError', async () => {
    const big = path.join(dir, 'huge.csv');
    D.writeBigCsv(big, 400_000); // ~45 MB of CSV → several hundred MB of rows in the heap
    const started = Date.now();
    const err = await extractionError(extractDocument({ filePath: big, fileName: 'huge.csv', kind: 'csv', mime: 'text/csv' }, { maxMemoryMb: 64 }));
    expect(err.reason).toBe('extraction exceeded its memory limit');
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(liveChildren()).toEqual([]);
  });

  test('a parser that takes too long is killed at the timeout', async () => {
    const started = Date.now();
    const err = await extractionError(extract('big.pdf', { timeoutMs: 150 }));
    expect(err.reason).toBe('extraction exceeded 0.15 s');
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(liveChildren()).toEqual([]);
  });

  test('cancelling through the AbortSignal kills the child', async () => {
    const ac = new AbortController();
    const p = extract('big.pdf', { signal: ac.signal });
    setTimeout(() => ac.abort(), 50);
    expect((await extractionError(p)).reason).toBe('extraction was cancelled');
    expect(liveChildren()).toEqual([]);
  });

  test('audio/video without a transcriber → ExtractionError', async () => {
    expect((await extractionError(extract('voice.wav'))).reason).toBe('audio needs a transcriber: set TRANSCRIBE_BASE_URL, or run npm run models:fetch for the embedded one');
    expect((await extractionError(extract('movie.mp4', { transcriber: null }))).reason).toBe('video needs a transcriber: set TRANSCRIBE_BASE_URL, or run npm run models:fetch for the embedded one');
  });

  describe('through an OpenAI-compatible transcription server', () => {
    let server: http.Server;
    let baseUrl: string;
    const seen: Array<{ path: string; auth?: string; model: string; fileName: string; fileType: string; size: number }> = [];
    let failNext = false;

    beforeAll(async () => {
      server = http.createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          void (async () => {
            if (req.method !== 'POST' || req.url !== '/v1/audio/transcriptions') {
              res.writeHead(404).end();
              return;
            }
            if (failNext) {
              failNext = false;
              res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"busy"}');
              return;
            }
            // Parse the multipart body for real.
            const form = await new Response(Buffer.concat(chunks), { headers: { 'content-type': String(req.headers['content-type']) } }).formData();
            const file = form.get('file') as File;
            seen.push({ path: req.url, auth: req.headers.authorization, model: String(form.get('model')), fileName: file.name, fileType: file.type, size: file.size });
            res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ text: `heard ${file.size} bytes` }));
          })();
        });
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });

    afterAll(async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });

    test('audio is posted as multipart (file, model) and the text comes back', async () => {
      const transcriber: Transcriber = new OpenAiTranscriber(baseUrl, 'sk-test', 'whisper-1');
      const wavSize = fs.statSync(files['voice.wav']).size;
      const r = await extract('voice.wav', { transcriber });
      expect(r.segments).toEqual([{ text: `heard ${wavSize} bytes` }]);
      expect(seen.at(-1)).toEqual({ path: '/v1/audio/transcriptions', auth: 'Bearer sk-test', model: 'whisper-1', fileName: 'upload.wav', fileType: 'audio/wav', size: wavSize });
    });

    test('video goes to the transcriber as it is (base URL may end in /v1)', async () => {
      const r = await extract('movie.mp4', { transcriber: new OpenAiTranscriber(`${baseUrl}/v1/`, '', 'whisper-1') });
      expect(r.segments[0].text).toMatch(/^heard \d+ bytes$/);
      expect(seen.at(-1)).toMatchObject({ fileName: 'upload.mp4', fileType: 'video/mp4', auth: undefined });
    });

    test('an HTTP error becomes an ExtractionError', async () => {
      failNext = true;
      const err = await extractionError(extract('song.mp3', { transcriber: new OpenAiTranscriber(baseUrl, 'k', 'whisper-1') }));
      expect(err.reason).toBe('transcription failed (HTTP 503)');
    });
  });
});

/** ODT, PPTX (unzip + streaming XML) and RTF (a small control-word stripper). */
import path from 'node:path';
import { SaxesParser, type SaxesTagPlain } from 'saxes';
import { SectionBuilder } from './sections';
import { openGuardedZip } from './zip';
import { ExtractionError, type ChildLimits, type Segment } from './types';

function parseXml(xml: string, handlers: {
  open?: (tag: SaxesTagPlain) => void;
  close?: (tag: SaxesTagPlain) => void;
  text?: (text: string) => void;
}): void {
  const parser = new SaxesParser({ xmlns: false });
  if (handlers.open) parser.on('opentag', handlers.open);
  if (handlers.close) parser.on('closetag', handlers.close);
  if (handlers.text) {
    parser.on('text', handlers.text);
    parser.on('cdata', handlers.text);
  }
  parser.write(xml).close();
}

function attr(tag: SaxesTagPlain, name: string): string | undefined {
  const v = tag.attributes[name];
  return typeof v === 'string' ? v : undefined;
}

// ---------------------------------------------------------------------------------------
// ODT: content.xml, paragraphs (text:p) and headings (text:h).

export async function extractOdt(buf: Buffer, limits: ChildLimits): Promise<Segment[]> {
  const zip = await openGuardedZip(buf, limits);
  try {
    const content = await zip.read('content.xml');
    if (!content) throw new ExtractionError('ODT is corrupt (no content.xml)');
    return odtContentSegments(content.toString('utf8'));
  } finally {
    zip.close();
  }
}

export function odtContentSegments(xml: string): Segment[] {
  const out = new SectionBuilder();
  const stack: Array<{ heading: boolean; parts: string[] }> = [];
  let skip = 0;
  const SKIPPED = new Set(['text:tracked-changes', 'office:annotation-end', 'text:sequence-decls']);
  parseXml(xml, {
    open(tag) {
      if (SKIPPED.has(tag.name) || skip) { if (!tag.isSelfClosing) skip++; return; }
      const top = stack[stack.length - 1];
      switch (tag.name) {
        case 'text:p':
        case 'text:h':
          if (!tag.isSelfClosing) stack.push({ heading: tag.name === 'text:h', parts: [] });
          break;
        case 'text:s':
          top?.parts.push(' '.repeat(Math.min(Number(attr(tag, 'text:c') ?? 1) || 1, 200)));
          break;
        case 'text:tab':
          top?.parts.push('\t');
          break;
        case 'text:line-break':
          top?.parts.push('\n');
          break;
      }
    },
    close(tag) {
      if (skip) { if (!tag.isSelfClosing) skip--; return; }
      if ((tag.name === 'text:p' || tag.name === 'text:h') && !tag.isSelfClosing) {
        const p = stack.pop();
        if (!p) return;
        const text = p.parts.join('').trim();
        if (p.heading) out.addHeading(text);
        else out.addLine(text);
      }
    },
    text(t) {
      if (skip || !stack.length) return;
      stack[stack.length - 1].parts.push(t.replace(/\s+/g, ' '));
    },
  });
  return out.finish();
}

// ---------------------------------------------------------------------------------------
// PPTX: one segment per slide (in presentation order), title as heading, speaker notes appended.

interface SlideText { title: string; body: string[] }

const SKIPPED_PLACEHOLDERS = new Set(['sldNum', 'dt', 'sldImg', 'hdr']);

export function slideXmlText(xml: string): SlideText {
  const result: SlideText = { title: '', body: [] };
  const shapes: Array<{ ph?: string; paras: string[] }> = [];
  let para: string[] | null = null;
  let inText = false;
  parseXml(xml, {
    open(tag) {
      switch (tag.name) {
        case 'p:sp':
        case 'p:graphicFrame':
          if (!tag.isSelfClosing) shapes.push({ paras: [] });
          break;
        case 'p:ph':
          if (shapes.length) shapes[shapes.length - 1].ph = attr(tag, 'type') ?? 'body';
          break;
        case 'a:p':
          if (!tag.isSelfClosing) para = [];
          break;
        case 'a:t':
          inText = !tag.isSelfClosing;
          break;
        case 'a:br':
          para?.push('\n');
          break;
        case 'a:tab':
          para?.push('\t');
          break;
      }
    },
    close(tag) {
      switch (tag.name) {
        case 'a:t':
          inText = false;
          break;
        case 'a:p': {
          const text = (para ?? []).join('').trim();
          para = null;
          if (!text) break;
          if (shapes.length) shapes[shapes.length - 1].paras.push(text);
          else result.body.push(text);
          break;
        }
        case 'p:sp':
        case 'p:graphicFrame': {
          if (tag.isSelfClosing) break;
          const shape = shapes.pop();
          if (!shape || (shape.ph && SKIPPED_PLACEHOLDERS.has(shape.ph))) break;
          const target = shapes.length ? shapes[shapes.length - 1].paras : null;
          if ((shape.ph === 'title' || shape.ph === 'ctrTitle') && !result.title) result.title = shape.paras.join(' ');
          else if (target) target.push(...shape.paras);
          else result.body.push(...shape.paras);
          break;
        }
      }
    },
    text(t) {
      if (inText && para) para.push(t);
    },
  });
  return result;
}

function relsTargets(xml: string, baseDir: string): Map<string, { target: string; type: string }> {
  const map = new Map<string, { target: string; type: string }>();
  parseXml(xml, {
    open(tag) {
      if (tag.name !== 'Relationship') return;
      const id = attr(tag, 'Id');
      const target = attr(tag, 'Target');
      if (!id || !target || attr(tag, 'TargetMode') === 'External') return;
      const resolved = target.startsWith('/') ? target.slice(1) : path.posix.normalize(path.posix.join(baseDir, target));
      map.set(id, { target: resolved, type: attr(tag, 'Type') ?? '' });
    },
  });
  return map;
}

function relsPathFor(part: string): string {
  return path.posix.join(path.posix.dirname(part), '_rels', path.posix.basename(part) + '.rels');
}

export async function extractPptx(buf: Buffer, limits: ChildLimits): Promise<Segment[]> {
  const zip = await openGuardedZip(buf, limits);
  try {
    // Slide order comes from presentation.xml's sldIdLst; fall back to slideN numbering.
    let order: string[] = [];
    const pres = await zip.read('ppt/presentation.xml');
    const presRels = await zip.read('ppt/_rels/presentation.xml.rels');
    if (pres && presRels) {
      const rels = relsTargets(presRels.toString('utf8'), 'ppt');
      parseXml(pres.toString('utf8'), {
        open(tag) {
          if (tag.name === 'p:sldId') {
            const rel = rels.get(attr(tag, 'r:id') ?? '');
            if (rel && zip.entries.has(rel.target)) order.push(rel.target);
          }
        },
      });
    }
    if (!order.length) {
      const num = (n: string) => Number(/(\d+)\.xml$/.exec(n)?.[1] ?? 0);
      order = [...zip.entries.keys()].filter((n) => /^ppt\/slides\/slide\d+\.xml$/.test(n)).sort((a, b) => num(a) - num(b));
    }
    if (!order.length) throw new ExtractionError('PPTX is corrupt (no slides found)');

    const segments: Segment[] = [];
    for (let i = 0; i < order.length; i++) {
      const xml = await zip.read(order[i]);
      if (!xml) continue;
      const slide = slideXmlText(xml.toString('utf8'));
      const lines = [...(slide.title ? [slide.title] : []), ...slide.body];
      const relsXml = await zip.read(relsPathFor(order[i]));
      if (relsXml) {
        const notesRel = [...relsTargets(relsXml.toString('utf8'), path.posix.dirname(order[i])).values()].find((r) => r.type.endsWith('/notesSlide'));
        const notesXml = notesRel ? await zip.read(notesRel.target) : null;
        if (notesXml) {
          const notes = slideXmlText(notesXml.toString('utf8'));
          const noteText = notes.body.join('\n').trim();
          if (noteText) lines.push(`Notes: ${noteText}`);
        }
      }
      const text = lines.join('\n').trim();
      if (!text) continue;
      const seg: Segment = { text, slide: i + 1 };
      if (slide.title) seg.heading = slide.title.replace(/\s+/g, ' ').trim();
      segments.push(seg);
    }
    return segments;
  } finally {
    zip.close();
  }
}

// ---------------------------------------------------------------------------------------
// RTF: strip control words, keep text, \par breaks, \'hh bytes (in the document's code
// page) and \uN characters; skip destinations that hold no body text.

const SKIP_DESTINATIONS = new Set([
  'fonttbl', 'colortbl', 'stylesheet', 'info', 'pict', 'object', 'objdata', 'listtable', 'listoverridetable',
  'rsidtbl', 'generator', 'themedata', 'colorschememapping', 'datastore', 'latentstyles', 'xmlnstbl',
  'filetbl', 'revtbl', 'pgdsctbl', 'header', 'headerl', 'headerr', 'headerf', 'footer', 'footerl', 'footerr',
  'footerf', 'fldinst', 'bkmkstart', 'bkmkend', 'private', 'mmathPr', 'wgrffmtfilter', 'protusertbl', 'userprops',
]);

const WORD_CHARS: Record<string, string> = {
  par: '\n', line: '\n', sect: '\n', page: '\n', row: '\n', cell: '\t', tab: '\t',
  emdash: '\u2014', endash: '\u2013', bullet: '\u2022', lquote: '\u2018', rquote: '\u2019',
  ldblquote: '\u201c', rdblquote: '\u201d', emspace: ' ', enspace: ' ', qmspace: ' ',
};

export function rtfToText(rtf: string): string {
  let codepage = 'windows-1252';
  const out: string[] = [];
  let bytes: number[] = [];
  const flushBytes = () => {
    if (!bytes.length) return;
    try {
      out.push(new TextDecoder(codepage).decode(Uint8Array.from(bytes)));
    } catch {
      out.push(new TextDecoder('windows-1252').decode(Uint8Array.from(bytes)));
    }
    bytes = [];
  };
  interface State { skip: boolean; uc: number }
  let state: State = { skip: false, uc: 1 };
  const stack: State[] = [];
  let groupStart = false; // just after '{': the next control word may name a destination
  let pendingSkip = 0; // fallback characters still to skip after \uN
  let i = 0;
  const n = rtf.length;
  const emit = (s: string) => {
    if (state.skip) return;
    flushBytes();
    out.push(s);
  };
  while (i < n) {
    const c = rtf[i];
    if (c === '{') {
      flushBytes();
      stack.push(state);
      state = { ...state };
      groupStart = true;
      pendingSkip = 0;
      i++;
      continue;
    }
    if (c === '}') {
      flushBytes();
      state = stack.pop() ?? { skip: false, uc: 1 };
      groupStart = false;
      pendingSkip = 0;
      i++;
      continue;
    }
    if (c === '\\') {
      const next = rtf[i + 1];
      if (next === undefined) break;
      if (/[a-zA-Z]/.test(next)) {
        let j = i + 1;
        while (j < n && /[a-zA-Z]/.test(rtf[j])) j++;
        const word = rtf.slice(i + 1, j);
        let k = j;
        if (rtf[k] === '-' || /[0-9]/.test(rtf[k] ?? '')) {
          k++;
          while (k < n && /[0-9]/.test(rtf[k])) k++;
        }
        const param = k > j ? Number(rtf.slice(j, k)) : undefined;
        if (rtf[k] === ' ') k++;
        i = k;
        const wasGroupStart = groupStart;
        groupStart = false;
        if (word === 'bin' && param && param > 0) { i += param; continue; }
        if (SKIP_DESTINATIONS.has(word) && wasGroupStart) { state.skip = true; continue; }
        if (word === 'ansicpg' && param) { codepage = `windows-${param}`; continue; }
        if (word === 'uc' && param !== undefined) { state.uc = Math.max(0, param); continue; }
        if (word === 'u' && param !== undefined) {
          emit(String.fromCharCode(param < 0 ? param + 65536 : param));
          pendingSkip = state.uc;
          continue;
        }
        if (WORD_CHARS[word]) emit(WORD_CHARS[word]);
        continue;
      }
      groupStart = false;
      if (next === '*') { state.skip = true; i += 2; continue; } // ignorable destination
      if (next === "'") {
        const hex = rtf.slice(i + 2, i + 4);
        i += 4;
        if (pendingSkip > 0) { pendingSkip--; continue; }
        if (!state.skip && /^[0-9a-fA-F]{2}$/.test(hex)) bytes.push(parseInt(hex, 16));
        continue;
      }
      i += 2;
      if (next === '\\' || next === '{' || next === '}') emit(next);
      else if (next === '~') emit('\u00a0');
      else if (next === '_') emit('-');
      else if (next === '\n' || next === '\r') emit('\n');
      continue;
    }
    groupStart = false;
    i++;
    if (c === '\n' || c === '\r') continue;
    if (pendingSkip > 0) { pendingSkip--; continue; }
    emit(c);
  }
  flushBytes();
  return out.join('');
}

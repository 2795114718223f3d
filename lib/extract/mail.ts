/**
 * Email: EML with mailparser, Outlook MSG with @kenjiuno/msgreader. The first segment has
 * the headers (From/To/Cc/Subject/Date) and the body; each attachment is sniffed from its
 * bytes and extracted recursively (depth- and count-limited), its segments headed
 * "Attachment: NAME".
 */
import type { AddressObject } from 'mailparser';
import MsgReader from '@kenjiuno/msgreader';
import { htmlToPlainText } from './html';
import { ExtractionError, type Segment } from './types';

export interface Attachment { fileName: string; content: Buffer }
export type NestedExtractor = (att: Attachment) => Promise<Segment[]>;

function addressText(a: AddressObject | AddressObject[] | undefined): string {
  if (!a) return '';
  return (Array.isArray(a) ? a : [a]).map((x) => x.text).join(', ');
}

function messageSegment(headers: Array<[string, string | undefined]>, body: string, subject: string | undefined): Segment {
  const head = headers.filter(([, v]) => v && v.trim()).map(([k, v]) => `${k}: ${v!.trim()}`).join('\n');
  const seg: Segment = { text: [head, body.trim()].filter(Boolean).join('\n\n') };
  if (subject?.trim()) seg.heading = subject.trim();
  return seg;
}

async function attachmentSegments(atts: Attachment[], nested: NestedExtractor, maxAttachments: number, warnings: string[]): Promise<Segment[]> {
  const out: Segment[] = [];
  if (atts.length > maxAttachments) warnings.push(`only the first ${maxAttachments} of ${atts.length} attachments were read`);
  for (const att of atts.slice(0, maxAttachments)) {
    try {
      const segs = await nested(att);
      for (const s of segs) out.push({ ...s, heading: s.heading ? `Attachment: ${att.fileName} › ${s.heading}` : `Attachment: ${att.fileName}` });
    } catch (err) {
      const reason = err instanceof ExtractionError ? err.reason : 'could not be read';
      warnings.push(`attachment "${att.fileName}" skipped: ${reason}`);
    }
  }
  return out;
}

export async function extractEml(buf: Buffer, nested: NestedExtractor, maxAttachments: number, warnings: string[]): Promise<Segment[]> {
  const { simpleParser } = await import('mailparser');
  const mail = await simpleParser(buf, { skipImageLinks: true, skipTextLinks: true, skipTextToHtml: true, maxHtmlLengthToParse: 50 * 1024 * 1024 });
  const body = mail.text?.trim() ? mail.text : typeof mail.html === 'string' ? await htmlToPlainText(mail.html) : '';
  const first = messageSegment([
    ['From', addressText(mail.from)],
    ['To', addressText(mail.to)],
    ['Cc', addressText(mail.cc)],
    ['Subject', mail.subject],
    ['Date', mail.date ? mail.date.toISOString() : undefined],
  ], body, mail.subject);
  // Inline parts referenced by the HTML body (cid: images) are not attachments a person sent.
  const atts = (mail.attachments ?? [])
    .filter((a) => !a.related)
    .map((a, i) => ({ fileName: a.filename || `attachment-${i + 1}`, content: a.content }));
  return [first, ...(await attachmentSegments(atts, nested, maxAttachments, warnings))];
}

export async function extractMsg(buf: Buffer, nested: NestedExtractor, maxAttachments: number, warnings: string[]): Promise<Segment[]> {
  const ab = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength) as ArrayBuffer;
  const reader = new MsgReader(ab);
  const data = reader.getFileData();
  if (data.error) throw new ExtractionError('Outlook message is corrupt', String(data.error));
  const recipients = (data.recipients ?? []).map((r) => (r.name && r.email && r.name !== r.email ? `${r.name} <${r.email}>` : r.name || r.email || '')).filter(Boolean);
  const from = data.senderName && data.senderEmail ? `${data.senderName} <${data.senderEmail}>` : data.senderName || data.senderEmail;
  const body = data.body?.trim() ? data.body : data.bodyHtml ? await htmlToPlainText(data.bodyHtml) : '';
  const first = messageSegment([
    ['From', from],
    ['To', recipients.join(', ')],
    ['Subject', data.subject],
    ['Date', data.messageDeliveryTime || data.clientSubmitTime],
  ], body, data.subject);
  const atts: Attachment[] = [];
  for (const [i, a] of (data.attachments ?? []).entries()) {
    if (a.attachmentHidden) continue;
    try {
      const got = reader.getAttachment(a);
      atts.push({ fileName: got.fileName || a.fileName || `attachment-${i + 1}`, content: Buffer.from(got.content) });
    } catch {
      warnings.push(`attachment "${a.fileName ?? i + 1}" skipped: could not be read`);
    }
  }
  return [first, ...(await attachmentSegments(atts, nested, maxAttachments, warnings))];
}

/**
 * Documents with known values for the structured-extraction benchmark: invoices, receipts,
 * order emails and forms, each with the JSON schema a user would ask with and the value each
 * field must come out as; rendered as PDF, DOCX or a scanned PDF (no text layer).
 */
import { Document, Packer, Paragraph } from 'docx';
import PDFDocument from 'pdfkit';
import { collect, makeScannedPdf } from './documents';
import { prng } from './prose';

export type FieldType = 'string' | 'number' | 'integer' | 'date' | 'enum' | 'boolean' | 'email' | 'array';
export type Format = 'pdf' | 'docx' | 'scanned-pdf';

export interface Case {
  kind: string;
  format: Format;
  /** The document's lines. */
  lines: string[];
  schema: Record<string, unknown>;
  /** Expected value of each field, and its type for the per-type figures. */
  expected: Record<string, { value: unknown; type: FieldType }>;
}

const pick = <T>(rand: () => number, xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)];
const money = (rand: () => number, lo: number, hi: number) => Math.round((lo + rand() * (hi - lo)) * 100) / 100;
const date = (rand: () => number) => `2025-${String(1 + Math.floor(rand() * 12)).padStart(2, '0')}-${String(1 + Math.floor(rand() * 28)).padStart(2, '0')}`;
const NAMES = ['Maria Santos', 'John Carter', 'Aiko Tanaka', 'Lena Fischer', 'Omar Haddad', 'Priya Nair', 'Lucas Moreau', 'Sofia Rossi'];
const COMPANIES = ['Harbor Cafe', 'Blue Fern Florists', 'Northwind Bikes', 'Cedar Dental', 'Lumen Studio', 'Pine & Co'];
const PRODUCTS = ['Espresso beans 1kg', 'Paper cups', 'Oat milk 6-pack', 'Descaler', 'Cleaning cloths', 'Napkins', 'Sugar sticks'];
const STORES = ['CORNER MARKET', 'CITY BAKERY', 'GREEN GROCER', 'BOOK NOOK'];
const REQUESTS = ['refund', 'exchange', 'cancellation', 'delivery_status'] as const;
const REQUEST_TEXT: Record<(typeof REQUESTS)[number], string> = {
  refund: 'I would like my money back for this order, please refund it to my card.',
  exchange: 'The shoes are too small; could I swap them for a size 42 instead?',
  cancellation: 'Please cancel the order, I no longer need it and it has not shipped yet.',
  delivery_status: 'Could you tell me where my parcel is? It has not arrived yet.',
};

const obj = (properties: Record<string, unknown>) => ({ type: 'object', properties, required: Object.keys(properties), additionalProperties: false });

function invoice(rand: () => number, format: Format): Case {
  const items = Array.from({ length: 2 + Math.floor(rand() * 2) }, () => ({ name: pick(rand, PRODUCTS), quantity: 1 + Math.floor(rand() * 5), price: money(rand, 2, 40) }));
  const subtotal = Math.round(items.reduce((n, i) => n + i.quantity * i.price, 0) * 100) / 100;
  const total = Math.round(subtotal * 1.23 * 100) / 100;
  const number = `INV-${2025}-${String(Math.floor(rand() * 9000) + 1000)}`;
  const customer = pick(rand, COMPANIES);
  const issued = date(rand);
  return {
    kind: 'invoice',
    format,
    lines: [
      'ACME Supplies Ltd, 4 Mill Road, Porto',
      `INVOICE ${number}`,
      `Date: ${issued}`,
      `Bill to: ${customer}`,
      '',
      ...items.map((i) => `${i.quantity} x ${i.name} @ ${i.price.toFixed(2)} = ${(i.quantity * i.price).toFixed(2)}`),
      '',
      `Subtotal ${subtotal.toFixed(2)}`,
      `VAT 23% ${(total - subtotal).toFixed(2)}`,
      `Total due: ${total.toFixed(2)} EUR`,
    ],
    schema: obj({
      invoice_number: { type: 'string' },
      customer: { type: 'string', description: 'The party billed' },
      issued: { type: 'string', format: 'date' },
      total: { type: 'number', description: 'The total due, taxes included' },
      items: { type: 'array', items: obj({ name: { type: 'string' }, quantity: { type: 'integer' }, price: { type: 'number' } }) },
    }),
    expected: {
      invoice_number: { value: number, type: 'string' },
      customer: { value: customer, type: 'string' },
      issued: { value: issued, type: 'date' },
      total: { value: total, type: 'number' },
      items: { value: items.length, type: 'array' },
    },
  };
}

function receipt(rand: () => number, format: Format): Case {
  const store = pick(rand, STORES);
  const number = String(Math.floor(rand() * 90000) + 10000);
  const lines = Array.from({ length: 2 + Math.floor(rand() * 2) }, () => ({ name: pick(rand, ['COFFEE', 'BREAD', 'APPLES', 'MILK', 'TEA', 'CAKE']), price: money(rand, 1, 9) }));
  const total = Math.round(lines.reduce((n, l) => n + l.price, 0) * 100) / 100;
  const card = rand() < 0.5;
  return {
    kind: 'receipt',
    format,
    lines: [store, `RECEIPT ${number}`, ...lines.map((l) => `${l.name} ${l.price.toFixed(2)}`), `TOTAL ${total.toFixed(2)}`, card ? 'PAID BY CARD' : 'PAID CASH'],
    schema: obj({ store: { type: 'string' }, receipt_number: { type: 'string' }, total: { type: 'number' }, paid_by_card: { type: 'boolean' } }),
    expected: {
      store: { value: store, type: 'string' },
      receipt_number: { value: number, type: 'string' },
      total: { value: total, type: 'number' },
      paid_by_card: { value: card, type: 'boolean' },
    },
  };
}

function orderEmail(rand: () => number, format: Format): Case {
  const name = pick(rand, NAMES);
  const order = String(Math.floor(rand() * 900000) + 100000);
  const request = pick(rand, REQUESTS);
  return {
    kind: 'order email',
    format,
    lines: [`From: ${name} <${name.toLowerCase().replace(' ', '.')}@example.com>`, `Subject: Order ${order}`, '', 'Hello,', `this is about my order ${order}. ${REQUEST_TEXT[request]}`, '', `Thanks, ${name}`],
    schema: obj({ order_number: { type: 'string' }, customer_name: { type: 'string' }, request: { type: 'string', enum: [...REQUESTS, 'other'] } }),
    expected: {
      order_number: { value: order, type: 'string' },
      customer_name: { value: name, type: 'string' },
      request: { value: request, type: 'enum' },
    },
  };
}

function form(rand: () => number, format: Format): Case {
  const name = pick(rand, NAMES);
  const email = `${name.split(' ')[0].toLowerCase()}${Math.floor(rand() * 90) + 10}@example.org`;
  const phone = `+351 9${Math.floor(rand() * 9)}${String(Math.floor(rand() * 1_000_000)).padStart(6, '0')}`;
  const age = 18 + Math.floor(rand() * 60);
  return {
    kind: 'form',
    format,
    lines: ['Membership application', `Full name: ${name}`, `Email: ${email}`, `Phone: ${phone}`, `Age: ${age}`, 'Signed on arrival.'],
    schema: obj({ full_name: { type: 'string' }, email: { type: 'string', format: 'email' }, phone: { type: 'string' }, age: { type: 'integer' } }),
    expected: {
      full_name: { value: name, type: 'string' },
      email: { value: email, type: 'email' },
      phone: { value: phone, type: 'string' },
      age: { value: age, type: 'integer' },
    },
  };
}

/** The generated set: every kind in turn, formats rotating (scans are receipts and forms: short lines fit a scanned page). */
export function generate(n: number, seed: number): Case[] {
  const rand = prng(seed);
  const out: Case[] = [];
  const makers = [invoice, receipt, orderEmail, form];
  for (let i = 0; i < n; i++) {
    const make = makers[i % makers.length];
    const formats: Format[] = make === receipt || make === form ? ['scanned-pdf', 'pdf', 'docx'] : ['pdf', 'docx'];
    out.push(make(rand, formats[Math.floor(i / makers.length) % formats.length]));
  }
  return out;
}

export async function render(c: Case): Promise<Buffer> {
  if (c.format === 'scanned-pdf') return makeScannedPdf([c.lines.filter(Boolean)]);
  if (c.format === 'docx') return Packer.toBuffer(new Document({ sections: [{ children: c.lines.map((l) => new Paragraph(l)) }] }));
  const doc = new PDFDocument({ autoFirstPage: false, compress: true });
  const done = collect(doc);
  doc.addPage({ size: 'A4' });
  doc.fontSize(12).text(c.lines.join('\n'), 72, 72);
  doc.end();
  return done;
}

/** Deterministic customer-support prose (help-centre articles from sentence templates with slots) for benches and tests: the same seed, the same text. */

/** mulberry32: a small, fast, seedable PRNG (uniform in [0, 1)). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A standard normal deviate (Box-Muller) from a uniform PRNG. */
export function gaussian(rand: () => number): number {
  let u = 0;
  while (u === 0) u = rand();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rand());
}

const pick = <T>(rand: () => number, xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)];

const PRODUCTS = [
  'wireless headphones', 'standing desk', 'espresso machine', 'hiking backpack', 'smart thermostat', 'winter jacket', 'running shoes',
  'office chair', 'robot vacuum', 'electric kettle', 'yoga mat', 'gaming keyboard', 'air purifier', 'camping tent', 'blender',
  'leather wallet', 'bike helmet', 'desk lamp', 'water bottle', 'baby stroller', 'sofa cover', 'phone case', 'gift card',
];
const PLACES = ['Lisbon', 'Berlin', 'Toronto', 'Melbourne', 'Osaka', 'Dublin', 'Madrid', 'Chicago', 'Oslo', 'Nairobi', 'Warsaw', 'Austin', 'Lyon'];
const PLANS = ['Starter', 'Plus', 'Business', 'Enterprise', 'Family'];
const CARRIERS = ['DHL', 'UPS', 'FedEx', 'the national postal service', 'our local courier partner'];
const CHANNELS = ['live chat', 'email', 'the help centre', 'the mobile app', 'phone'];
const DAYS = ['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];

type Slot = (rand: () => number) => string;
const slots: Record<string, Slot> = {
  product: (r) => pick(r, PRODUCTS),
  place: (r) => pick(r, PLACES),
  plan: (r) => pick(r, PLANS),
  carrier: (r) => pick(r, CARRIERS),
  channel: (r) => pick(r, CHANNELS),
  day: (r) => pick(r, DAYS),
  n: (r) => String(2 + Math.floor(r() * 28)),
  price: (r) => (5 + Math.floor(r() * 495) + 0.99).toFixed(2),
  pct: (r) => String(5 + Math.floor(r() * 8) * 5),
  order: (r) => String(100000 + Math.floor(r() * 900000)),
};

export interface Topic {
  title: string;
  sentences: readonly string[];
}

export const TOPICS: readonly Topic[] = [
  { title: 'Returns and refunds', sentences: [
    'You can return the {product} within {n} days of delivery for a full refund, as long as it is unused and in its original packaging.',
    'Refunds are issued to the original payment method and usually appear on your statement within {n} business days.',
    'If the {product} arrived damaged, send us a photo through {channel} and we will arrange a free replacement.',
    'Items bought on sale can be exchanged for store credit but are not eligible for a cash refund.',
  ] },
  { title: 'Shipping and delivery', sentences: [
    'Orders placed before 2 pm on a {day} leave our warehouse the same day and are handed to {carrier}.',
    'Standard delivery to {place} takes {n} business days; express delivery arrives the next working day.',
    'A tracking link is sent by email as soon as the parcel is scanned by {carrier}.',
    'If your tracking page has not updated for {n} days, contact us through {channel} and we will open an investigation.',
  ] },
  { title: 'Billing and payments', sentences: [
    'We accept credit cards, debit cards, bank transfers and, in most countries, mobile wallets.',
    'Your {plan} subscription renews automatically every month and costs {price} euros including VAT.',
    'Invoices are available in the billing section of your account and can be downloaded as PDF files.',
    'If a payment fails, we retry it after {n} days and send a reminder to the account owner.',
  ] },
  { title: 'Account and security', sentences: [
    'To reset your password, click forgot password on the sign-in page and follow the link we email to you.',
    'Password reset links expire after {n} minutes for your security.',
    'We strongly recommend turning on two-factor authentication with an authenticator app.',
    'If you no longer have access to your phone, contact support through {channel} with proof of identity to recover the account.',
  ] },
  { title: 'Warranty and repairs', sentences: [
    'Every {product} comes with a two-year warranty that covers manufacturing defects.',
    'The warranty does not cover accidental damage, water damage or normal wear and tear.',
    'To make a warranty claim, register the product and describe the fault through {channel}.',
    'Repairs are carried out at our service centre in {place} and usually take {n} working days.',
  ] },
  { title: 'Orders and changes', sentences: [
    'You can cancel an order free of charge until it has been packed, usually within {n} minutes of purchase.',
    'To add an item to an existing order, contact us through {channel} before the order is dispatched.',
    'Out-of-stock items can be pre-ordered; we charge your card only when the {product} ships.',
    'Bulk orders of more than {n} units qualify for a {pct} percent discount; ask our sales team for a quote.',
  ] },
  { title: 'Product care and setup', sentences: [
    'Before first use, charge the {product} fully, which takes about {n} hours.',
    'Clean the {product} with a soft, dry cloth; do not use solvents or abrasive cleaners.',
    'Firmware updates are installed through the mobile app and add new features every few months.',
    'If the device does not turn on, hold the power button for {n} seconds to perform a hard reset.',
  ] },
  { title: 'Loyalty programme', sentences: [
    'Members earn one point for every euro spent and can redeem {n} points for a discount voucher.',
    'Points expire {n} months after they are earned unless you make another purchase.',
    'Gold members get free express shipping and early access to seasonal sales.',
    'Referring a friend gives both of you a voucher worth {price} euros after their first order.',
  ] },
];

const fill = (rand: () => number, template: string) => template.replace(/\{(\w+)\}/g, (_, k: string) => slots[k](rand));

/** Roughly `words` words of prose on one topic, in paragraphs of 3-6 sentences. */
export function passage(rand: () => number, topic: Topic, words: number): string[] {
  const paragraphs: string[] = [];
  let count = 0;
  while (count < words) {
    const p = Array.from({ length: 3 + Math.floor(rand() * 4) }, () => fill(rand, pick(rand, topic.sentences))).join(' ');
    paragraphs.push(p);
    count += p.split(/\s+/).length;
  }
  return paragraphs;
}

/** Questions a customer might type into the search box (full text matches some passages). */
export const QUESTIONS: readonly string[] = [
  'how do I return a damaged product', 'when will my refund arrive', 'how long does delivery take', 'change the delivery address of my order',
  'my tracking page has not updated', 'which payment methods do you accept', 'download an invoice as PDF', 'my payment failed', 'reset my password',
  'turn on two-factor authentication', 'delete my account and personal data', 'warranty claim for a broken product',
  'does the warranty cover water damage', 'cancel my order', 'discount for bulk orders', 'gift wrapping at checkout', 'the device does not turn on',
  'how to clean the product', 'firmware update through the app', 'when do loyalty points expire', 'refer a friend voucher',
  'import duties outside the EU', 'annual billing discount', 'add a VAT number to invoices', 'invite team members to my plan',
  'express delivery next working day', 'item missing from my parcel', 'pre-order an out-of-stock item', 'store credit for sale items',
  'pairing over Bluetooth',
];

import { RichBlocks, richBlocks } from '../../domain/chat/rich';

describe('rich blocks: the reply read into a validated block list', () => {
  test('headings, bold, https links only, tables fitted to their header, lists, quotes with HTML kept as text, code', () => {
    const blocks = richBlocks(
      '## Opening hours\n\nWe open **9–18**, see [hours](https://shop.example/hours) or [this](javascript:alert(1)).\n\n| Day | Hours |\n|---|---|\n| Mon | 9–18 | extra |\n| Sun |\n\n1. one\n2. *two* `code`\n\n> quoted <b>html</b>\n\n```\nx=1\n```',
    );
    expect(blocks).toEqual([
      { type: 'heading', level: 2, spans: [{ text: 'Opening hours' }] },
      { type: 'paragraph', spans: [{ text: 'We open ' }, { text: '9–18', bold: true }, { text: ', see ' }, { text: 'hours', href: 'https://shop.example/hours' }, { text: ' or this.' }] },
      { type: 'table', header: ['Day', 'Hours'], rows: [['Mon', '9–18'], ['Sun', '']] },
      { type: 'list', ordered: true, items: [[{ text: 'one' }], [{ text: 'two', italic: true }, { text: ' ' }, { text: 'code', code: true }]] },
      { type: 'quote', spans: [{ text: 'quoted <b>html</b>' }] },
      { type: 'code', text: 'x=1' },
    ]);
    expect(RichBlocks.safeParse(blocks).success).toBe(true);
  });

  test('plain paragraphs have no rich form; the schema refuses a table row that does not fit and a non-https link', () => {
    expect(richBlocks('Just a plain answer.\n\nTwo paragraphs.')).toBeNull();
    expect(RichBlocks.safeParse([{ type: 'table', header: ['a', 'b'], rows: [['1']] }]).success).toBe(false);
    expect(RichBlocks.safeParse([{ type: 'paragraph', spans: [{ text: 'x', href: 'http://a.example' }] }]).success).toBe(false);
  });
});

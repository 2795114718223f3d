import { chunkSegments, estimateTokens } from '../../domain/kb/chunker';

const words = (n: number, w = 'word') => Array.from({ length: n }, (_, i) => `${w}${i}`).join(' ');

describe('chunkSegments', () => {
  test('keeps pages apart and numbers chunks in order', () => {
    const chunks = chunkSegments([
      { text: 'First page text.', page: 1 },
      { text: 'Second page text.', page: 2 },
    ]);
    expect(chunks.map((c) => [c.ordinal, c.page, c.text])).toEqual([
      [0, 1, 'First page text.'],
      [1, 2, 'Second page text.'],
    ]);
  });

  test('splits long text near the target size with overlap, never above the maximum', () => {
    const paragraphs = Array.from({ length: 12 }, (_, i) => `${words(60, `p${i}w`)}.`).join('\n\n');
    const chunks = chunkSegments([{ text: paragraphs }], { targetTokens: 300, maxTokens: 450, overlapTokens: 40 });
    expect(chunks.length).toBeGreaterThan(2);
    for (const c of chunks) expect(estimateTokens(c.text)).toBeLessThanOrEqual(450 + 40);
    // The next chunk starts with the tail of the previous one.
    const tail = chunks[0].text.split(/\s+/).slice(-3).join(' ');
    expect(chunks[1].text.startsWith(tail) || chunks[1].text.includes(tail)).toBe(true);
    // Nothing is lost: every paragraph's last word appears somewhere.
    for (let i = 0; i < 12; i++) expect(chunks.some((c) => c.text.includes(`p${i}w59.`))).toBe(true);
  });

  test('markdown headings start chunks and label them', () => {
    const chunks = chunkSegments([{ text: '# Returns\n\nYou can return items.\n\n## Shipping\n\nWe ship worldwide.' }]);
    expect(chunks.map((c) => [c.heading, c.text])).toEqual([
      ['Returns', '# Returns\nYou can return items.'],
      ['Shipping', '## Shipping\nWe ship worldwide.'],
    ]);
  });

  test('spreadsheet rows stay whole, grouped per sheet with their row range', () => {
    const segs = [
      ...Array.from({ length: 5 }, (_, i) => ({ text: `SKU: A${i}; Price: ${i}`, sheet: 'Prices', row: i + 2 })),
      { text: 'Name: Bob; Role: Support', sheet: 'Team', row: 2 },
    ];
    const chunks = chunkSegments(segs);
    expect(chunks).toHaveLength(2);
    expect(chunks[0]).toMatchObject({ sheet: 'Prices', rowFrom: 2, rowTo: 6 });
    expect(chunks[0].text.split('\n')).toHaveLength(5);
    expect(chunks[1]).toMatchObject({ sheet: 'Team', rowFrom: 2, rowTo: 2, text: 'Name: Bob; Role: Support' });
  });

  test('one giant paragraph without punctuation is split on words', () => {
    const chunks = chunkSegments([{ text: words(2000) }], { targetTokens: 300, maxTokens: 400, overlapTokens: 0 });
    expect(chunks.length).toBeGreaterThanOrEqual(6);
    for (const c of chunks) expect(estimateTokens(c.text)).toBeLessThanOrEqual(400);
  });
});

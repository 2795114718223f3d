import { MarkerStream, sharesRun, stripMarkers, usedFiles } from '../../domain/chat/citations';
import { documentTitle } from '../../domain/kb/indexing';

const passages = [
  { file_id: 'file_a', file_name: 'returns.md', text: 'Unworn shoes can be returned within 30 days of delivery for a full refund.' },
  { file_id: 'file_b', file_name: 'shipping.html', text: 'Orders ship within two working days from our warehouse in Leeds.' },
  { file_id: 'file_a', file_name: 'returns.md', text: 'Worn shoes cannot be returned.' },
];

describe('citation markers', () => {
  test('markers of shown passages are removed with the space before them, in the order first used; others stay', () => {
    expect(stripMarkers('Returns are free [1]. Shipping takes two days [2][1]; see also [1, 3].', 3)).toEqual({
      text: 'Returns are free. Shipping takes two days; see also.',
      used: [1, 2, 3],
    });
    // Not markers: a number beyond the list, a year, a Markdown link, a reference definition, code.
    const kept = 'Item [7], since [2024], [1](https://x.example), `arr[1]`, and\n```\nx[2]\n```';
    expect(stripMarkers(kept, 3)).toEqual({ text: kept, used: [] });
  });

  test('streamed: a marker cut over several deltas never reaches the visitor, and the deltas join to the clean text', () => {
    const text = 'Returns are free [1]. Ship times [2, 3] vary; `a[1]` stays.';
    for (const size of [1, 2, 3, 4, 7]) {
      const s = new MarkerStream(3);
      let out = '';
      for (let i = 0; i < text.length; i += size) out += s.push(text.slice(i, i + size));
      out += s.end();
      expect(out).toBe(stripMarkers(text, 3).text);
      expect(out).toBe('Returns are free. Ship times vary; `a[1]` stays.');
    }
  });

  test('without markers a passage counts as used only when the answer repeats a run of its content words', () => {
    expect(sharesRun('Good news: orders ship within two working days.', passages[1].text)).toBe(true);
    expect(sharesRun('Shipping is quick and returns are easy.', passages[1].text)).toBe(false);
    expect(usedFiles('Orders ship within two working days.', [], passages).map((p) => p.file_id)).toEqual(['file_b']);
    expect(usedFiles('Hello! How can I help?', [], passages)).toEqual([]);
    // Markers decide when there are some; one file once.
    expect(usedFiles('whatever', [3, 1], passages)).toEqual([passages[2]]);
  });
});

describe('a document title recorded at indexing', () => {
  test('the first heading, else the declared title, else none', () => {
    expect(documentTitle([{ text: 'intro' }, { text: 'x', heading: ' Returns  and refunds ' }, { text: 'y', heading: 'Later' }])).toBe('Returns and refunds');
    expect(documentTitle([{ text: 'x', title: 'Shipping & delivery' }])).toBe('Shipping & delivery');
    expect(documentTitle([{ text: 'x', title: 'Page title' }, { text: 'y', heading: 'Heading' }])).toBe('Heading');
    expect(documentTitle([{ text: 'x' }])).toBeNull();
  });
});

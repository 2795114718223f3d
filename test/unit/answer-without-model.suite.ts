import { answerWithoutModel, titleOf } from '../../domain/chat/answer-without-model';

const returns1 = {
  file_id: 'file_returns',
  file_name: 'returns-policy.md',
  text:
    '# Returns\n\nYou can return any product within 30 days of delivery. ' +
    'A damaged product is replaced or refunded: write to us with a photo of the damage and your order number. ' +
    'We send a prepaid return label by e-mail within one working day. ' +
    'Refunds reach your account within 5 to 7 working days after the parcel arrives at our warehouse. ' +
    'Items bought on sale can be returned as well, but gift cards cannot be returned.',
};
/** The next chunk of the same article: it starts with the overlap, mid-sentence. */
const returns2 = { file_id: 'file_returns', file_name: 'returns-policy.md', text: 'and your order number. We send a prepaid return label for every damaged product.' };
const warranty = { file_id: 'file_warranty', file_name: 'warranty_terms.pdf', text: 'The warranty covers a damaged product for two years when the damage comes from a manufacturing fault; return it to us.' };
const shipping = { file_id: 'file_shipping', file_name: 'shipping.md', text: 'Parcels are shipped within two days. Tracking links are sent by e-mail.' };
const agent = { handoff: true, handoffMessage: 'A colleague will take it from here.' };

describe('the answer without a language model', () => {
  test('a greeting and thanks get a short reply, never a quote', () => {
    for (const q of ['hello', 'Hi there!', 'good morning']) expect(answerWithoutModel(q, [returns1], agent)).toMatchObject({ kind: 'greeting', cited: [], text: expect.stringMatching(/^Hello!/) });
    for (const q of ['thanks', 'Thank you so much!', 'ok thanks']) expect(answerWithoutModel(q, [returns1], agent)).toMatchObject({ kind: 'thanks', cited: [] });
  });

  test('an answered question: the best passage in whole sentences under a visitor-facing line and its title, related articles as suggested actions', () => {
    const a = answerWithoutModel('how do I return a damaged product?', [returns1, returns2, warranty, shipping], agent);
    expect(a.kind).toBe('answer');
    expect(a.text.startsWith('From our help articles:\n\n**Returns policy**\n\n')).toBe(true);
    const quote = a.text.split('\n\n').at(-1)!;
    // Whole sentences from the first that covers the question best, the chunk's own heading dropped.
    expect(quote.startsWith('You can return any product within 30 days of delivery. A damaged product is replaced or refunded')).toBe(true);
    expect(quote).toMatch(/[.!?]$/);
    expect(quote.length).toBeLessThanOrEqual(600);
    expect(a.text).not.toMatch(/^>|returns-policy\.md|no language model|knowledge base/m);
    // The overlapping chunk of the same article is not offered again; the warranty article is; shipping does not cover the question.
    expect(a.suggested_actions).toEqual(['Warranty terms']);
    expect(a.cited.map((p) => p.file_id)).toEqual(['file_returns']);
  });

  test('nothing relevant: it says so honestly and offers a person when the agent can hand off', () => {
    const a = answerWithoutModel('do you sell spaceships?', [shipping, warranty], agent);
    expect(a).toMatchObject({ kind: 'not_found', cited: [], suggested_actions: [], handoff: false });
    expect(a.text).toBe("I couldn't find that in our help articles. If you would like to talk to a person, just say so.");
    expect(answerWithoutModel('do you sell spaceships?', [], { handoff: false }).text).toBe("I couldn't find that in our help articles. You could try asking in other words.");
  });

  test('asking for a person hands over only when the agent may', () => {
    expect(answerWithoutModel('can I talk to a real person please', [shipping], agent)).toMatchObject({ kind: 'handoff', handoff: true, text: 'A colleague will take it from here.' });
    expect(answerWithoutModel('can I talk to a real person please', [shipping], { handoff: false })).toMatchObject({ kind: 'not_found', handoff: false });
  });

  test('a chunk that starts mid-sentence is quoted from its first whole sentence', () => {
    const a = answerWithoutModel('prepaid label damaged product', [returns2], agent);
    expect(a.text.split('\n\n').at(-1)).toBe('We send a prepaid return label for every damaged product.');
  });

  test("a document's recorded title (its first heading, as indexed) heads the quote and names related articles, before any made from the file name", () => {
    const a = answerWithoutModel('how do I return a damaged product?', [{ ...returns1, title: 'Returns and refunds' }, { ...warranty, title: 'Our two-year warranty' }], agent);
    expect(a.text.startsWith('From our help articles:\n\n**Returns and refunds**\n\n')).toBe(true);
    expect(a.suggested_actions).toEqual(['Our two-year warranty']);
    expect(a.cited.map((p) => p.file_id)).toEqual(['file_returns']);
  });

  test('titles from file names', () => {
    expect(titleOf('returns-policy_v2.md')).toBe('Returns policy v2');
    expect(titleOf('FAQ.pdf')).toBe('FAQ');
  });
});

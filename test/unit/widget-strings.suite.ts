import fs from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';

/** The widget's interface words (web/widget.js, STRINGS): every language says everything English says, with the same blanks. */
const source = fs.readFileSync(path.join(__dirname, '..', '..', 'web', 'widget.js'), 'utf8');
const table = source.slice(source.indexOf('var STRINGS = {'), source.indexOf('var lang = '));
const STRINGS = vm.runInNewContext(`${table}; STRINGS`) as Record<string, Record<string, string>>;

describe('the widget\'s words', () => {
  test('English, Spanish, French, German, Portuguese and Arabic', () => {
    expect(Object.keys(STRINGS).sort()).toEqual(['ar', 'de', 'en', 'es', 'fr', 'pt']);
  });

  test.each(['es', 'fr', 'de', 'pt', 'ar'])('%s has every word, with the same {blanks}, none left in English', (lang) => {
    const blanks = (s: string) => (s.match(/\{\w+\}/g) ?? []).sort();
    for (const [key, english] of Object.entries(STRINGS.en)) {
      const word = STRINGS[lang][key];
      expect([key, typeof word]).toEqual([key, 'string']);
      expect([key, blanks(word)]).toEqual([key, blanks(english)]);
      // Short labels may match English ("Chat", "Message"); sentences may not.
      if (english.length > 20) expect([key, word]).not.toEqual([key, english]);
    }
    expect(Object.keys(STRINGS[lang]).sort()).toEqual(Object.keys(STRINGS.en).sort());
  });
});

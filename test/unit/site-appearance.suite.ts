import { checkAppearance, launcherLabel } from '../../domain/widget/appearance';

describe('a site appearance change is checked and normalised', () => {
  test('a colour is #rgb or #rrggbb in any case, stored as lower-case #rrggbb', () => {
    expect(checkAppearance({ brand_color: '#0A7' })).toEqual({ brand_color: '#00aa77' });
    expect(checkAppearance({ brand_color: '#12AbEf' })).toEqual({ brand_color: '#12abef' });
    for (const bad of ['red', '#12345', '#ggg', 'rgb(0,0,0)', '#1234567', '']) {
      expect(() => checkAppearance({ brand_color: bad })).toThrow(/^brand_color: .* is not a hex colour/);
    }
  });

  test('position, theme and language take only their listed values', () => {
    expect(checkAppearance({ position: 'left', theme: 'dark', language: 'ar' })).toEqual({ position: 'left', theme: 'dark', language: 'ar' });
    expect(() => checkAppearance({ position: 'top' })).toThrow("position: 'top' is not one of right, left");
    expect(() => checkAppearance({ theme: 'blue' })).toThrow("theme: 'blue' is not one of light, dark, auto");
    expect(() => checkAppearance({ language: 'it' })).toThrow("language: 'it' is not one of auto, en, es, fr, de, pt, ar");
  });

  test('a launcher label is trimmed plain text of at most 40 characters; empty clears it', () => {
    expect(launcherLabel('  Help  ')).toBe('Help');
    expect(launcherLabel('')).toBeNull();
    expect(launcherLabel('   ')).toBeNull();
    expect(launcherLabel(null)).toBeNull();
    // 40 characters counted as characters, not UTF-16 units: 40 emoji pass, 41 letters do not.
    expect(launcherLabel('💬'.repeat(40))).toBe('💬'.repeat(40));
    expect(() => launcherLabel('x'.repeat(41))).toThrow('launcher_label: at most 40 characters (got 41)');
    expect(() => launcherLabel('Help\nnow')).toThrow(/one line of plain text/);
    expect(() => launcherLabel('Help\u202Ewon')).toThrow(/one line of plain text/);
  });

  test('fields left out stay out of the change', () => {
    expect(checkAppearance({})).toEqual({});
    expect(checkAppearance({ theme: 'light' })).toEqual({ theme: 'light' });
  });
});

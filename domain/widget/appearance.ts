import { DomainError } from '../errors';

/** A site's look and language, as the widget's init returns it (every field always present). */
export interface SiteAppearance {
  /** `#rrggbb`, lower case. */
  brand_color: string;
  position: 'right' | 'left';
  /** The launcher button's text; null: the widget's own icon-only launcher. */
  launcher_label: string | null;
  /** `auto` follows the visitor's `prefers-color-scheme`. */
  theme: 'light' | 'dark' | 'auto';
  /** `auto` follows the visitor's browser language, among the ones the widget speaks. */
  language: 'auto' | 'en' | 'es' | 'fr' | 'de' | 'pt' | 'ar';
}

export const POSITIONS = ['right', 'left'] as const;
export const THEMES = ['light', 'dark', 'auto'] as const;
export const LANGUAGES = ['auto', 'en', 'es', 'fr', 'de', 'pt', 'ar'] as const;
/** A launcher label is a short button text: longer ones would wrap or hide the page behind it. */
export const LAUNCHER_LABEL_MAX = 40;

/** What a site shows until someone sets it (the widget's long-standing look). */
export const DEFAULT_APPEARANCE: SiteAppearance = { brand_color: '#243b6b', position: 'right', launcher_label: null, theme: 'auto', language: 'auto' };

/** A change: the fields given are set (a null or empty label clears it); the others keep their value. */
export type AppearancePatch = { [K in keyof SiteAppearance]?: K extends 'launcher_label' ? string | null : string };

const bad = (message: string) => new DomainError('invalid_request', message);

/** `#abc` or `#aabbcc` (any case) as `#aabbcc`. */
export function brandColor(value: string): string {
  const m = /^#?([0-9a-f]{3}|[0-9a-f]{6})$/i.exec(value.trim());
  if (!m) throw bad(`brand_color: '${value.slice(0, 20)}' is not a hex colour such as #243b6b or #0a7`);
  const hex = m[1].toLowerCase();
  return `#${hex.length === 3 ? [...hex].map((c) => c + c).join('') : hex}`;
}

function oneOf<T extends string>(field: string, allowed: readonly T[], value: string): T {
  if (!(allowed as readonly string[]).includes(value)) throw bad(`${field}: '${value.slice(0, 20)}' is not one of ${allowed.join(', ')}`);
  return value as T;
}

/**
 * A launcher label: one line of plain text, trimmed, at most 40 characters (code points);
 * empty clears it. Control and invisible format characters are refused: the label is a
 * button's visible text, never markup (the widget sets it as text).
 */
export function launcherLabel(value: string | null): string | null {
  if (value === null) return null;
  const text = value.trim();
  if (!text) return null;
  if (/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u.test(text)) throw bad('launcher_label: one line of plain text, without control or invisible characters');
  if ([...text].length > LAUNCHER_LABEL_MAX) throw bad(`launcher_label: at most ${LAUNCHER_LABEL_MAX} characters (got ${[...text].length})`);
  return text;
}

/** The patch checked and normalised; throws 400 invalid_request naming the field. */
export function checkAppearance(patch: AppearancePatch): Partial<SiteAppearance> {
  const out: Partial<SiteAppearance> = {};
  if (patch.brand_color !== undefined) out.brand_color = brandColor(patch.brand_color);
  if (patch.position !== undefined) out.position = oneOf('position', POSITIONS, patch.position);
  if (patch.launcher_label !== undefined) out.launcher_label = launcherLabel(patch.launcher_label);
  if (patch.theme !== undefined) out.theme = oneOf('theme', THEMES, patch.theme);
  if (patch.language !== undefined) out.language = oneOf('language', LANGUAGES, patch.language);
  return out;
}

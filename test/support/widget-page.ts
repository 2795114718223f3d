import axe from 'axe-core';
import type { Page } from 'playwright-core';

/** Shared by the widget's browser suites: the page's widget, waiting on a condition, and an axe scan. */

// Page functions run in the browser; the project type-checks without the DOM lib.
declare const window: { axe: { run: (...args: unknown[]) => Promise<{ violations: unknown[] }> } };

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };

/** The widget's host element, its launcher and its panel (the shadow root is open: locators reach inside). */
export const widget = (page: Page) => page.locator('[data-concierge-widget]');
export const launcher = (page: Page) => widget(page).locator('.launcher');
export const panel = (page: Page) => widget(page).locator('.panel');
export const textbox = (page: Page) => widget(page).getByRole('textbox', { name: 'Message' });
/** Finished agent replies (not the live bubble). */
export const finals = (page: Page) => widget(page).locator('.msg.assistant:not(.live)');

export async function until(fn: () => Promise<boolean>, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await fn())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * axe-core run in the page (it scans open shadow roots too): the serious and critical violations, of the whole page
 * or (`scope`: 'widget') of the widget alone, for pages whose own content is not ours to judge.
 */
export async function axeScan(page: Page, scope: 'page' | 'widget' = 'page'): Promise<string[]> {
  // Evaluated, not added as an inline <script>: the demo page's Content-Security-Policy refuses inline scripts.
  // Once per document: a page scanned again (after a click, at another size) keeps the axe it was given.
  if (!(await page.evaluate(() => typeof window.axe !== 'undefined'))) await page.evaluate(axe.source);
  const result = await page.evaluate(
    (only) => window.axe.run(only ? { include: [['[data-concierge-widget]']] } : document, { resultTypes: ['violations'] }),
    scope === 'widget',
  );
  return (result.violations as Array<{ id: string; impact: string; nodes: Array<{ target: unknown[] }> }>)
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => JSON.stringify(n.target)).join(' ')}`);
}
declare const document: unknown;

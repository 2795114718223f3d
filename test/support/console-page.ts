import type { Page } from 'playwright-core';
import type { Services } from '../../app/services';
import type { ConsoleRole } from '../../db/entities';
import { CLI_CONTEXT } from '../../domain/audit/audit-log';

/**
 * What a console page logs that fails a test: script errors and console errors. A refused request (401 before sign-in,
 * a 403 the test asks for) is logged by the browser as "Failed to load resource": not the page's fault.
 */
export function watchProblems(page: Page, problems: string[] = []): string[] {
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() === 'error' && !/^Failed to load resource/.test(msg.text())) problems.push(`console: ${msg.text()}`);
  });
  return problems;
}

/**
 * A person made as the CLI makes one (a one-time sign-in link), who opens the link on `page`, sets a password and lands
 * on the console's Overview.
 */
export async function signInWithLink(page: Page, base: string, services: Services, workspaceId: string, who: { email: string; password: string; role: ConsoleRole }): Promise<void> {
  const made = await services.people.create({ cli: true }, workspaceId, { email: who.email, role: who.role }, CLI_CONTEXT, 'sign_in');
  const link = new URL(made.link.url);
  await page.goto(`${base}${link.pathname}${link.hash}`);
  await page.getByLabel('New password').fill(who.password);
  await page.getByLabel('Repeat the password').fill(who.password);
  await page.getByRole('button', { name: 'Set password and sign in' }).click();
  await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
}

import { spawn } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';

/** An account of the test provider (its subject is the login typed in the dev form): the claims it has. */
export interface OidcAccount {
  email: string;
  email_verified: boolean;
}

export interface OidcProvider {
  issuer: string;
  close(): Promise<void>;
}

/**
 * dev/fakes/oidc-provider.mjs (oidc-provider 9, a real OpenID Connect provider) as a child process on 127.0.0.1 and a
 * random port, with one confidential client and the accounts the test chooses; PKCE required.
 */
export async function startOidcProvider(opts: { client: { client_id: string; client_secret: string; redirect_uris: string[] }; accounts: Record<string, OidcAccount> }): Promise<OidcProvider> {
  const child = spawn(process.execPath, [path.join(__dirname, '../../dev/fakes/oidc-provider.mjs')], {
    env: { ...process.env, OIDC_CONFIG: JSON.stringify(opts) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const issuer = await new Promise<string>((resolve, reject) => {
    const lines = readline.createInterface({ input: child.stdout! });
    lines.once('line', (line) => resolve((JSON.parse(line) as { issuer: string }).issuer));
    child.once('exit', (code) => reject(new Error(`oidc-provider exited (${code}): ${stderr}`)));
  });
  return {
    issuer,
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

/** A browser's cookies, by name (the provider's paths and flags do not matter on one loopback origin). */
export class CookieJar {
  private readonly cookies = new Map<string, string>();
  store(res: Response): void {
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      if (/expires=Thu, 01 Jan 1970/i.test(line) || value === '') this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }
  header(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }
}

/**
 * A person at the provider: follows the authorization URL through the dev login form (typing `login`) and the consent
 * form, and returns the URL the provider finally redirects to (the client's redirect URI with code and state, or an
 * error), without requesting it.
 */
export async function loginAtProvider(authorizationUrl: string, login: string, redirectUriPrefix: string): Promise<URL> {
  const jar = new CookieJar();
  let url = new URL(authorizationUrl);
  let body: URLSearchParams | null = null;
  for (let hop = 0; hop < 20; hop++) {
    if (url.href.startsWith(redirectUriPrefix)) return url;
    const res = await fetch(url, { method: body ? 'POST' : 'GET', redirect: 'manual', headers: { cookie: jar.header(), ...(body ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) }, body });
    jar.store(res);
    body = null;
    const location = res.headers.get('location');
    if (location) {
      await res.arrayBuffer();
      url = new URL(location, url);
      continue;
    }
    const html = await res.text();
    if (res.status !== 200) throw new Error(`provider answered ${res.status} at ${url.pathname}: ${html.slice(0, 500)}`);
    // The dev interaction page: a login form, then a consent form, both posting to /interaction/<uid>.
    const prompt = /name="prompt" value="(\w+)"/.exec(html)?.[1] ?? (html.includes('name="login"') ? 'login' : 'consent');
    body = new URLSearchParams(prompt === 'login' ? { prompt, login, password: 'any' } : { prompt });
  }
  throw new Error('too many hops at the provider');
}

// A real OpenID Connect provider (panva's oidc-provider 9, ESM-only, hence a child process of its own) on 127.0.0.1
// and a random port, for the console's SSO tests (test/support/oidc.ts starts it).
//
// Given by the parent in OIDC_CONFIG (JSON): `client` {client_id, client_secret, redirect_uris} and `accounts`, a map
// from the login typed in the dev form (the account's subject) to the claims it has ({email, email_verified}). PKCE is
// required of every client (S256 is the only method oidc-provider 9 offers). The quick-start dev interactions stay on:
// POST /interaction/<uid> with `prompt=login&login=<account>`, then `prompt=consent`. When listening it prints one line
// of JSON, {"issuer": "http://127.0.0.1:<port>"}, on stdout.
import http from 'node:http';
import Provider from 'oidc-provider';

const config = JSON.parse(process.env.OIDC_CONFIG ?? '{}');
const accounts = config.accounts ?? {};

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: [{ ...config.client, response_types: ['code'], grant_types: ['authorization_code'], token_endpoint_auth_method: 'client_secret_basic' }],
  pkce: { required: () => true },
  claims: { openid: ['sub'], email: ['email', 'email_verified'] },
  // Scope-requested claims in the ID token too (as most IdPs do); the client also reads userinfo when they are absent.
  conformIdTokenClaims: false,
  cookies: { keys: ['concierge test oidc provider cookie key'] },
  async findAccount(_ctx, id) {
    const account = accounts[id];
    if (!account) return undefined;
    return { accountId: id, claims: async () => ({ ...account, sub: id }) };
  },
  // The ID token's expiry is the test's to choose (default 10 minutes).
  ttl: { IdToken: config.idTokenTtl ?? 600 },
});
provider.on('server_error', (_ctx, err) => process.stderr.write(`oidc-provider: ${err.stack}\n`));
server.on('request', provider.callback());
process.stdout.write(`${JSON.stringify({ issuer })}\n`);
process.on('SIGTERM', () => server.close(() => process.exit(0)));

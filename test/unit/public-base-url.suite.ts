import { ConfigError, loadConfig, publicBaseUrl } from '../../app/config';
import { signLink } from '../../domain/storage/signed-links';
import { SecretBox } from '../../lib/crypto/secret-box';
import { randomBytes } from 'node:crypto';

describe('PUBLIC_BASE_URL: the origin of every link handed out', () => {
  test('unset: the address the API serves on (a wildcard host as loopback)', () => {
    expect(publicBaseUrl(loadConfig({}))).toBe('http://127.0.0.1:3000');
    expect(publicBaseUrl(loadConfig({ HOST: '0.0.0.0', PORT: '8080' }))).toBe('http://127.0.0.1:8080');
    expect(publicBaseUrl(loadConfig({ HOST: '::1', PORT: '8080' }))).toBe('http://[::1]:8080');
  });

  test('set: used as given, without a trailing slash; a path prefix is kept', () => {
    expect(publicBaseUrl(loadConfig({ PUBLIC_BASE_URL: 'https://concierge.example.com/' }))).toBe('https://concierge.example.com');
    expect(publicBaseUrl(loadConfig({ PUBLIC_BASE_URL: 'https://example.com/concierge' }))).toBe('https://example.com/concierge');
  });

  test('anything but an http(s) URL without query or fragment fails at boot, naming the setting', () => {
    for (const bad of ['concierge.example.com', 'ftp://concierge.example.com', 'https://concierge.example.com/?x=1']) {
      expect(() => loadConfig({ PUBLIC_BASE_URL: bad })).toThrow(ConfigError);
      expect(() => loadConfig({ PUBLIC_BASE_URL: bad })).toThrow(/PUBLIC_BASE_URL/);
    }
  });

  test('signed media links are absolute on it', () => {
    const url = signLink(new SecretBox(randomBytes(32)), 'https://example.com/concierge/', { sha256: 'a'.repeat(64), mime: 'image/png' });
    expect(url).toMatch(/^https:\/\/example\.com\/concierge\/api\/media\/[\w-]+\.[0-9a-f]+$/);
  });
});

import {
  checkUrl,
  forbiddenReason,
  parseWebhookUrl,
  policyFromCidrs,
  systemResolver,
  UnsafeUrlError,
  type Resolver,
} from '../../lib/net/ssrf';

const empty = policyFromCidrs(undefined);

/** Fake DNS: named hosts answer from the table, `localhost` from the system (/etc/hosts), anything else fails. */
const fakeDns: Record<string, string[]> = {
  'hooks.example.com': ['93.184.216.34'],
  'internal.example': ['10.1.2.3'],
  'mixed.example': ['93.184.216.34', '192.168.0.1'],
  'mixed6.example': ['2606:4700::1111', 'fd00::5'],
  'metadata.example': ['169.254.169.254'],
  'v6loop.example': ['::1'],
  'mapped.example': ['::ffff:10.0.0.7'],
  'garbage.example': ['not-an-address'],
  'empty.example': [],
};
const resolve: Resolver = async (hostname) => {
  if (hostname === 'localhost') return systemResolver(hostname);
  const answer = fakeDns[hostname];
  if (!answer) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
  return answer;
};

async function refusal(url: string, policy = empty): Promise<string> {
  try {
    await checkUrl(url, policy, resolve);
  } catch (err) {
    expect(err).toBeInstanceOf(UnsafeUrlError);
    return (err as UnsafeUrlError).reason;
  }
  throw new Error(`expected ${url} to be refused`);
}

const SCHEME = /^scheme must be https$/;
const CREDENTIALS = /^credentials in the URL are not allowed$/;
const LOOPBACK4 = /^host is a loopback address \(127\.0\.0\.1/;

const refused: Array<[string, RegExp]> = [
  // Scheme, credentials, syntax
  ['http://example.com/hook', SCHEME],
  ['ftp://example.com/hook', SCHEME],
  ['file:///etc/passwd', SCHEME],
  ['gopher://127.0.0.1:6379/_INFO', SCHEME],
  ['javascript:alert(1)', SCHEME],
  ['HTTP://example.com', SCHEME],
  ['https://user:pw@example.com', CREDENTIALS],
  ['https://user@example.com', CREDENTIALS],
  ['https://:pw@example.com', CREDENTIALS],
  ['not a url', /^URL does not parse$/],
  ['https://', /^URL does not parse$/],
  ['https://[fe80::1%25eth0]/', /^URL does not parse$/],
  [`https://example.com/${'a'.repeat(2048)}`, /^URL is longer than 2048 characters$/],
  // Every spelling of 127.0.0.1
  ['https://127.0.0.1', LOOPBACK4],
  ['https://127.0.0.1:8443/hook', LOOPBACK4],
  ['https://2130706433', LOOPBACK4],
  ['https://0x7f000001', LOOPBACK4],
  ['https://0x7f.1', LOOPBACK4],
  ['https://0x7f.0.0.1', LOOPBACK4],
  ['https://0177.0.0.1', LOOPBACK4],
  ['https://0177.1', LOOPBACK4],
  ['https://127.1', LOOPBACK4],
  ['https://127.0.1', LOOPBACK4],
  ['https://127.0.0.1.', LOOPBACK4],
  ['https://%31%32%37.0.0.1', LOOPBACK4],
  ['https://\uff11\uff12\uff17.\uff10.\uff10.\uff11', LOOPBACK4], // full-width digits
  ['https://127.255.255.254', /^host is a loopback address \(127\.255\.255\.254\)$/],
  // IPv4 special ranges
  ['https://0', /^host is an unspecified address \(0\.0\.0\.0\)$/],
  ['https://0.0.0.0', /^host is an unspecified address \(0\.0\.0\.0\)$/],
  ['https://10.0.0.1', /^host is a private address \(10\.0\.0\.1\)$/],
  ['https://012.0.0.1', /^host is a private address \(10\.0\.0\.1\)$/],
  ['https://167772161', /^host is a private address \(10\.0\.0\.1\)$/],
  ['https://172.16.5.4', /^host is a private address \(172\.16\.5\.4\)$/],
  ['https://172.31.255.255', /^host is a private address/],
  ['https://192.168.1.1', /^host is a private address \(192\.168\.1\.1\)$/],
  ['https://169.254.169.254/latest/meta-data/', /^host is a link-local address \(169\.254\.169\.254\)$/],
  ['https://100.64.0.1', /^host is a carrier-grade NAT address \(100\.64\.0\.1\)$/],
  ['https://224.0.0.1', /^host is a multicast address \(224\.0\.0\.1\)$/],
  ['https://239.255.255.250', /^host is a multicast address/],
  ['https://240.0.0.1', /^host is a reserved address \(240\.0\.0\.1\)$/],
  ['https://255.255.255.255', /^host is a broadcast address \(255\.255\.255\.255\)$/],
  ['https://192.0.0.8', /^host is a reserved address/],
  ['https://192.0.2.10', /^host is a documentation address/],
  ['https://198.51.100.7', /^host is a documentation address/],
  ['https://203.0.113.9', /^host is a documentation address/],
  ['https://198.18.0.1', /^host is a benchmarking address/],
  // IPv6
  ['https://[::1]', /^host is a loopback address \(::1\)$/],
  ['https://[0:0:0:0:0:0:0:1]:8443', /^host is a loopback address \(::1\)$/],
  ['https://[::]', /^host is an unspecified address \(::\)$/],
  ['https://[fe80::1]', /^host is a link-local address \(fe80::1\)$/],
  ['https://[fc00::1]', /^host is a unique-local address \(fc00::1\)$/],
  ['https://[fd12:3456::1]', /^host is a unique-local address \(fd12:3456::1\)$/],
  ['https://[fec0::1]', /^host is a site-local address/],
  ['https://[ff02::1]', /^host is a multicast address \(ff02::1\)$/],
  ['https://[2001:db8::1]', /^host is a documentation address/],
  ['https://[100::1]', /^host is a discard-only address/],
  ['https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]', /^host is a Teredo address/],
  ['https://[1::]', /^host is a reserved address \(1::\)$/],
  // IPv6 forms that embed a forbidden IPv4 address
  ['https://[::ffff:127.0.0.1]', /^host is a loopback address \(127\.0\.0\.1 embedded in IPv4-mapped ::ffff:7f00:1\)$/],
  ['https://[::ffff:7f00:1]', /^host is a loopback address \(127\.0\.0\.1 embedded in IPv4-mapped/],
  ['https://[0:0:0:0:0:ffff:127.0.0.1]', /^host is a loopback address \(127\.0\.0\.1 embedded in IPv4-mapped/],
  ['https://[::ffff:169.254.169.254]', /^host is a link-local address \(169\.254\.169\.254 embedded in IPv4-mapped/],
  ['https://[::ffff:a00:1]', /^host is a private address \(10\.0\.0\.1 embedded in IPv4-mapped/],
  ['https://[::127.0.0.1]', /^host is a loopback address \(127\.0\.0\.1 embedded in IPv4-compatible ::7f00:1\)$/],
  ['https://[64:ff9b::7f00:1]', /^host is a loopback address \(127\.0\.0\.1 embedded in NAT64 64:ff9b::7f00:1\)$/],
  ['https://[64:ff9b::169.254.169.254]', /^host is a link-local address \(169\.254\.169\.254 embedded in NAT64/],
  ['https://[64:ff9b:1::808:808]', /^host is a local-use NAT64 address/],
  ['https://[2002:7f00:1::]', /^host is a loopback address \(127\.0\.0\.1 embedded in 6to4 2002:7f00:1::\)$/],
  ['https://[2002:c0a8:101::1]', /^host is a private address \(192\.168\.1\.1 embedded in 6to4/],
  // Names
  ['https://localhost', /^host resolves to a loopback address \(127\.0\.0\.1\)$/],
  ['https://localhost.', /^host resolves to a loopback address/],
  ['https://LOCALHOST:8443/x', /^host resolves to a loopback address/],
  ['https://LocalHost./x', /^host resolves to a loopback address/],
  ['https://internal.example/hook', /^host resolves to a private address \(10\.1\.2\.3\)$/],
  ['https://mixed.example/hook', /^host resolves to a private address \(192\.168\.0\.1\)$/],
  ['https://mixed6.example/hook', /^host resolves to a unique-local address \(fd00::5\)$/],
  ['https://metadata.example', /^host resolves to a link-local address \(169\.254\.169\.254\)$/],
  ['https://v6loop.example', /^host resolves to a loopback address \(::1\)$/],
  ['https://mapped.example', /^host resolves to a private address \(10\.0\.0\.7 embedded in IPv4-mapped ::ffff:10\.0\.0\.7\)$/],
  ['https://garbage.example', /^host resolves to not an IP address/],
  ['https://nowhere.example', /^host does not resolve$/],
  ['https://empty.example', /^host does not resolve$/],
];

describe('checkUrl refuses', () => {
  it('a corpus of at least 40 URLs', () => {
    expect(refused.length).toBeGreaterThanOrEqual(40);
  });

  it.each(refused)('%s', async (url, reason) => {
    expect(await refusal(url)).toMatch(reason);
  });
});

describe('checkUrl accepts', () => {
  it.each([
    ['https://hooks.example.com/x', 'https://hooks.example.com/x', ['93.184.216.34']],
    ['https://HOOKS.Example.com./x?y=1', 'https://hooks.example.com./x?y=1', ['93.184.216.34']],
    ['https://[2606:4700::1111]', 'https://[2606:4700::1111]/', ['2606:4700::1111']],
    ['https://8.8.8.8/path', 'https://8.8.8.8/path', ['8.8.8.8']],
    ['https://134744072/path', 'https://8.8.8.8/path', ['8.8.8.8']],
    ['https://[::ffff:8.8.8.8]', 'https://[::ffff:808:808]/', ['::ffff:808:808']],
    ['https://[64:ff9b::8.8.8.8]', 'https://[64:ff9b::808:808]/', ['64:ff9b::808:808']],
    ['https://[2002:808:808::1]', 'https://[2002:808:808::1]/', ['2002:808:808::1']],
  ])('%s', async (raw, href, addresses) => {
    const result = await checkUrl(raw, empty, resolve);
    expect(result.url.href).toBe(href);
    expect(result.addresses).toEqual(addresses);
  });

  it('returns every resolved address when all of them are public', async () => {
    const many: Resolver = async () => ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'];
    await expect(checkUrl('https://multi.example/', empty, many)).resolves.toMatchObject({
      addresses: ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'],
    });
  });

  it('asks the resolver for the name without a trailing dot', async () => {
    const asked: string[] = [];
    const spy: Resolver = async (h) => {
      asked.push(h);
      return ['93.184.216.34'];
    };
    await checkUrl('https://Hooks.Example.COM./x', empty, spy);
    expect(asked).toEqual(['hooks.example.com']);
  });

  it('does not call the resolver for IP literals', async () => {
    const never: Resolver = () => Promise.reject(new Error('should not be called'));
    await expect(checkUrl('https://[2606:4700::1111]:8443/', empty, never)).resolves.toBeDefined();
  });
});

describe('allow list', () => {
  const loop = policyFromCidrs('127.0.0.0/8');

  it('lets a listed private range through and nothing else', async () => {
    await expect(checkUrl('https://127.0.0.1:8443', loop, resolve)).resolves.toMatchObject({ addresses: ['127.0.0.1'] });
    await expect(checkUrl('https://localhost:8443', loop, resolve)).resolves.toBeDefined();
    await expect(checkUrl('https://[::ffff:127.0.0.1]', loop, resolve)).resolves.toBeDefined();
    expect(await refusal('https://10.0.0.1', loop)).toBe('host is a private address (10.0.0.1)');
    expect(await refusal('https://[::1]', loop)).toBe('host is a loopback address (::1)');
    expect(await refusal('https://http.example/', loop)).toBe('host does not resolve');
  });

  it('takes IPv6 ranges and whitespace', async () => {
    const policy = policyFromCidrs(' 127.0.0.0/8 , ::1/128,fd00::/8 ,');
    await expect(checkUrl('https://[::1]:8443', policy, resolve)).resolves.toBeDefined();
    await expect(checkUrl('https://[fd12::1]', policy, resolve)).resolves.toBeDefined();
    expect(await refusal('https://[fc00::1]', policy)).toMatch(/unique-local/);
  });

  it('takes a bare address as a single host', () => {
    const policy = policyFromCidrs('10.0.0.5');
    expect(forbiddenReason('10.0.0.5', policy)).toBeNull();
    expect(forbiddenReason('10.0.0.6', policy)).toBe('a private address (10.0.0.6)');
  });

  it('is empty by default', () => {
    expect(policyFromCidrs(undefined).allow).toBeNull();
    expect(policyFromCidrs('').allow).toBeNull();
    expect(policyFromCidrs(' , ').allow).toBeNull();
  });

  it.each(['banana', '10.0.0.0/33', '10.0.0/8', '::1/129', '10.0.0.0/', '/8', '10.0.0.0/8/1', '10.0.0.0/0x8', '10.0.0.0/-1', 'fe80::/10%eth0', '10.0.0.0/8;'])(
    'throws on a malformed entry: %s',
    (csv) => {
      expect(() => policyFromCidrs(`127.0.0.0/8,${csv}`)).toThrow(/invalid CIDR in address allow list/);
    },
  );
});

describe('forbiddenReason', () => {
  it.each([
    ['8.8.8.8', null],
    ['93.184.216.34', null],
    ['2606:4700::1111', null],
    ['172.15.255.255', null],
    ['172.32.0.0', null],
    ['100.128.0.1', null],
    ['fe80::1%eth0', 'a link-local address (fe80::1%eth0)'],
    ['::0.0.0.2', 'an unspecified address (0.0.0.2 embedded in IPv4-compatible ::0.0.0.2)'],
    ['::ffff:0:7f00:1', 'a reserved address (::ffff:0:7f00:1)'],
    ['2001:10::1', 'an ORCHID address (2001:10::1)'],
    ['2001:2::1', 'a benchmarking address (2001:2::1)'],
    ['', 'not an IP address ()'],
  ])('%s', (ip, reason) => {
    expect(forbiddenReason(ip, empty)).toBe(reason);
  });
});

describe('parseWebhookUrl', () => {
  it('returns the parsed URL for a plain https URL', () => {
    expect(parseWebhookUrl('https://hooks.example.com:8443/a?b=c').port).toBe('8443');
  });

  it('accepts exactly 2048 characters', () => {
    const url = `https://example.com/${'a'.repeat(2048 - 'https://example.com/'.length)}`;
    expect(url).toHaveLength(2048);
    expect(() => parseWebhookUrl(url)).not.toThrow();
  });
});

describe('systemResolver', () => {
  it('resolves localhost from /etc/hosts', async () => {
    const addresses = await systemResolver('localhost');
    expect(addresses.length).toBeGreaterThan(0);
    expect(addresses.every((a) => a === '::1' || a.startsWith('127.'))).toBe(true);
  });
});

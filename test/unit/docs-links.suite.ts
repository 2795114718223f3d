import fs from 'node:fs';
import path from 'node:path';

/** The documentation's links resolve, and every docs/ file the code cites exists. */
const root = path.join(__dirname, '../..');
const docs = ['README.md', ...fs.readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

/** GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens. */
const slug = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}_\- ]/gu, '')
    .replaceAll(' ', '-');
const anchors = (file: string) => new Set([...fs.readFileSync(file, 'utf8').matchAll(/^#+ (.+)$/gm)].map((m) => slug(m[1])));

test('every relative link in README.md and docs/ names a file that exists, and a heading of it', () => {
  const broken: string[] = [];
  for (const doc of docs) {
    const text = fs.readFileSync(path.join(root, doc), 'utf8');
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target)) continue;
      const [file, anchor] = target.split('#');
      const full = file ? path.join(root, path.dirname(doc), file) : path.join(root, doc);
      if (!fs.existsSync(full)) broken.push(`${doc}: ${target}`);
      else if (anchor && full.endsWith('.md') && !anchors(full).has(anchor)) broken.push(`${doc}: ${target} (no such heading)`);
    }
  }
  expect(broken).toEqual([]);
});

test('every docs/*.md a source file cites exists', () => {
  const dirs = ['api', 'app', 'domain', 'providers', 'lib', 'db', 'activities', 'workflows', 'worker', 'bin', 'dev', 'scripts', 'test', 'bench'];
  const missing = new Set<string>();
  const walk = (dir: string): void => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\.(ts|js|mjs|sh)$/.test(e.name)) {
        for (const [cited] of fs.readFileSync(p, 'utf8').matchAll(/docs\/[\w-]+\.md/g)) if (!fs.existsSync(path.join(root, cited))) missing.add(`${path.relative(root, p)}: ${cited}`);
      }
    }
  };
  for (const d of dirs) if (fs.existsSync(path.join(root, d))) walk(path.join(root, d));
  expect([...missing]).toEqual([]);
});

// Real read speech for the voice tests and the voice bench: Debian's pocketsphinx-testdata (BSD-style licence), 16 kHz
// recordings of people reading, with their transcripts. `npm run setup` installs the package; without it the data is
// fetched once with `apt-get download` and unpacked with `dpkg -x` into `cacheDir`. Nothing of it is committed.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const INSTALLED = '/usr/share/pocketsphinx/test/data';

/** The directory holding `librivox/`, `cards/` and their transcripts; `who` names the caller in the error. */
export function pocketsphinxData(cacheDir: string, who: string): string {
  if (fs.existsSync(path.join(INSTALLED, 'librivox'))) return INSTALLED;
  const cached = path.join(cacheDir, 'usr/share/pocketsphinx/test/data');
  if (fs.existsSync(path.join(cached, 'librivox'))) return cached;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pocketsphinx-testdata-'));
  try {
    execFileSync('apt-get', ['download', 'pocketsphinx-testdata'], { cwd: tmp, stdio: 'ignore', timeout: 120_000 });
    const deb = fs.readdirSync(tmp).find((f) => f.endsWith('.deb'));
    if (!deb) throw new Error('apt-get download left no .deb');
    fs.mkdirSync(cacheDir, { recursive: true });
    execFileSync('dpkg', ['-x', path.join(tmp, deb), cacheDir], { stdio: 'ignore' });
  } catch (err) {
    throw new Error(`${who} need real recordings: Debian pocketsphinx-testdata (npm run setup installs it; or apt-get install pocketsphinx-testdata): ${(err as Error).message}`);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return cached;
}

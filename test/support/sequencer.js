// Jest's test order: the longest suites first, so no worker starts a minute-long suite when the others are
// almost done. Jest knows each suite's last duration from its cache, but a fresh clone (CI) has no cache and
// Jest then orders by file size, which put the 50-80 s suites (fuzz, voice, SIP calls) anywhere. The durations
// in suite-durations.json (seconds, measured with 3 workers; `npm run test:durations` rewrites it from a
// `jest --json` report) stand in for the cache where it has no entry. The cluster test runs last, whatever it
// took: its four processes and the build must not share the two cores with the suites that speak and listen in real
// time (voice, SIP and browser calls), which then miss their moment.
const path = require('node:path');
const Sequencer = require('@jest/test-sequencer').default;
const measured = require('./suite-durations.json');

const ROOT = path.resolve(__dirname, '../..');
const LAST = new Set(['test/e2e/cluster.test.ts']);

class LongestFirst extends Sequencer {
  time(test) {
    const name = path.relative(ROOT, test.path);
    if (LAST.has(name)) return 0;
    return super.time(test) ?? (measured[name] ?? 1) * 1000;
  }
}

module.exports = LongestFirst;

import os from 'node:os';

/**
 * The test-only ICE allowance (VOICE_ICE_ALLOW_CIDRS, empty in production): the test
 * "browser" is a werift peer on this machine, whose candidates are its own interface
 * addresses (private, documentation or unique-local ranges here) and loopback.
 */
export const LOCAL_ICE_CIDRS = [
  '127.0.0.0/8',
  '::1/128',
  ...Object.values(os.networkInterfaces())
    .flat()
    .filter((a) => a !== undefined)
    .map((a) => `${a.address.split('%')[0]}/${a.family === 'IPv4' ? 32 : 128}`),
].join(',');

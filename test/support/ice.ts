import { localIceCidrs } from '../../providers/webrtc/ice';

/**
 * The test-only ICE allowance (VOICE_ICE_ALLOW_CIDRS, empty in production): the test
 * "browser" is a werift peer on this machine, whose candidates are its own interface
 * addresses (private, documentation or unique-local ranges here) and loopback.
 */
export const LOCAL_ICE_CIDRS = localIceCidrs();

import { isIP } from 'node:net';
import os from 'node:os';
import { forbiddenReason, type AddressPolicy } from '../../lib/net/ssrf';

/**
 * Candidates taken from one offer. A browser gathers a few per network interface
 * (host, server-reflexive, relay), and our offers are bundled (one transport): 20 is
 * generous for a real browser and bounds the connectivity checks one offer can make the
 * agent's peer send.
 */
export const MAX_OFFER_CANDIDATES = 20;

export interface CandidateFilterResult {
  sdp: string;
  kept: number;
  /** Why each dropped candidate was dropped (for a count in the logs; the addresses are the visitor's). */
  dropped: string[];
}

/**
 * The ICE candidates of a visitor's offer that the agent's peer may send STUN checks
 * (and then media) to: only addresses the SSRF policy allows (lib/net/ssrf.ts: public
 * unicast, or what the operator's VOICE_ICE_ALLOW_CIDRS names), never a name (an mDNS
 * `….local` or any host name would be resolved by us, to anything), at most `max`.
 * Everything else is removed from the SDP before werift reads it, so the worker never
 * probes its own network (127.0.0.1:5098, 10.0.0.1, 169.254.169.254) for a visitor.
 * The `c=` line is not filtered: an ICE agent (werift) only ever connects to candidates.
 */
export function filterOfferCandidates(sdp: string, policy: AddressPolicy, max = MAX_OFFER_CANDIDATES): CandidateFilterResult {
  const eol = sdp.includes('\r\n') ? '\r\n' : '\n';
  const dropped: string[] = [];
  let kept = 0;
  const lines = sdp.split(/\r?\n/).filter((line) => {
    if (!line.startsWith('a=candidate:')) return true;
    const reason = candidateRefusal(line, policy);
    if (reason) {
      dropped.push(reason);
      return false;
    }
    // Bundled m-lines repeat the same candidates; each line is counted (what werift would check).
    if (kept >= max) {
      dropped.push(`more than ${max} candidates`);
      return false;
    }
    kept++;
    return true;
  });
  return { sdp: lines.join(eol), kept, dropped };
}

/** Null when the candidate line may be used; else why not. RFC 8839 §5.1: foundation component transport priority address port typ type … */
function candidateRefusal(line: string, policy: AddressPolicy): string | null {
  const fields = line.slice('a=candidate:'.length).trim().split(/\s+/);
  if (fields.length < 8 || fields[6] !== 'typ') return 'a malformed candidate';
  const address = fields[4];
  if (!isIP(address.split('%')[0])) return 'a candidate named by a host name, not an address';
  const port = Number(fields[5]);
  if (!Number.isInteger(port) || port < 1 || port > 65535) return 'a candidate without a valid port';
  const reason = forbiddenReason(address, policy);
  return reason ? `a candidate at ${reason}` : null;
}

/**
 * Loopback and this machine's own interface addresses, as CIDRs: the candidates of a browser on the same machine.
 * `npm start` allows them when its API listens on loopback (only a local browser can reach it then), and so do the
 * tests, whose "browser" is a peer on this machine. Never a production default.
 */
export function localIceCidrs(): string {
  const own = Object.values(os.networkInterfaces())
    .flat()
    .filter((a) => a !== undefined)
    .map((a) => `${a.address.split('%')[0]}/${a.family === 'IPv4' ? 32 : 128}`);
  return ['127.0.0.0/8', '::1/128', ...own].join(',');
}

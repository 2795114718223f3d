import dgram from 'node:dgram';
import type { AddressInfo } from 'node:net';
import { MediaStreamTrack, RTCPeerConnection, usePCMU } from 'werift';
import { policyFromCidrs } from '../../lib/net/ssrf';
import { DirectLeg } from '../../providers/webrtc/direct-peer';
import { filterOfferCandidates, MAX_OFFER_CANDIDATES } from '../../providers/webrtc/ice';

const strict = { allow: null };
const cand = (addr: string, port = 5098, n = 1) => `a=candidate:${n} 1 udp 2122260223 ${addr} ${port} typ host generation 0`;
const sdp = (...candidates: string[]) => ['v=0', 'o=- 1 0 IN IP4 0.0.0.0', 's=-', 't=0 0', 'm=audio 9 UDP/TLS/RTP/SAVPF 0', 'c=IN IP4 0.0.0.0', ...candidates, 'a=end-of-candidates', ''].join('\r\n');

/** A browser-like werift offer whose only candidate is `addr:port` (a host the visitor names). */
async function offerNaming(addr: string, port: number): Promise<string> {
  const pc = new RTCPeerConnection({ codecs: { audio: [usePCMU()], video: [] }, bundlePolicy: 'max-bundle' });
  pc.addTransceiver(new MediaStreamTrack({ kind: 'audio' }), { direction: 'sendrecv' });
  pc.createDataChannel('transcript');
  await pc.setLocalDescription(await pc.createOffer());
  if (pc.iceGatheringState !== 'complete') await pc.iceGatheringStateChange.watch((s) => s === 'complete');
  const offer = pc.localDescription!.sdp;
  await pc.close();
  const lines = offer.split('\r\n').filter((l) => !l.startsWith('a=candidate:'));
  const at = lines.findIndex((l) => l === 'a=end-of-candidates');
  lines.splice(at, 0, cand(addr, port));
  return lines.join('\r\n');
}

/** What reaches a UDP port on 127.0.0.1 (the "internal service") while `run` goes on. */
async function packetsTo(run: (port: number) => Promise<void>): Promise<Buffer[]> {
  const sock = dgram.createSocket('udp4');
  const got: Buffer[] = [];
  sock.on('message', (m) => got.push(m));
  await new Promise<void>((r) => sock.bind(0, '127.0.0.1', r));
  try {
    await run((sock.address() as AddressInfo).port);
  } finally {
    sock.close();
  }
  return got;
}

/** A STUN binding request (RFC 5389: type 0x0001, magic cookie 0x2112A442). */
const isStun = (b: Buffer) => b.length >= 20 && b.readUInt16BE(0) === 0x0001 && b.readUInt32BE(4) === 0x2112a442;

describe('ICE candidates of a visitor offer', () => {
  it('drops candidates at private, loopback, link-local and CGNAT addresses, host names (mDNS) and malformed lines; keeps public ones', () => {
    const out = filterOfferCandidates(
      sdp(cand('10.0.0.1'), cand('169.254.169.254'), cand('127.0.0.1'), cand('100.64.0.1'), cand('fd00::1'), cand('::1'), cand('4f2a-b1.local'), 'a=candidate:x 1 udp', cand('8.8.8.8', 40000), cand('2606:4700::1111', 40001)),
      strict,
    );
    expect(out.kept).toBe(2);
    expect(out.dropped).toHaveLength(8);
    expect(out.sdp.split('\r\n').filter((l) => l.startsWith('a=candidate:'))).toEqual([cand('8.8.8.8', 40000), cand('2606:4700::1111', 40001)]);
    // Everything else in the offer is kept as it was.
    expect(out.sdp).toContain('c=IN IP4 0.0.0.0\r\na=candidate:1 1 udp 2122260223 8.8.8.8 40000');
    expect(out.sdp.endsWith('a=end-of-candidates\r\n')).toBe(true);
  });

  it('keeps a non-public address only when the explicit allowance (VOICE_ICE_ALLOW_CIDRS) names it', () => {
    expect(filterOfferCandidates(sdp(cand('127.0.0.1')), policyFromCidrs('127.0.0.0/8')).kept).toBe(1);
    expect(filterOfferCandidates(sdp(cand('10.0.0.1')), policyFromCidrs('127.0.0.0/8')).kept).toBe(0);
  });

  it(`takes at most ${MAX_OFFER_CANDIDATES} candidates from one offer`, () => {
    const many = Array.from({ length: 200 }, (_, i) => cand('8.8.8.8', 1000 + i, i));
    const out = filterOfferCandidates(sdp(...many), strict);
    expect(out.kept).toBe(MAX_OFFER_CANDIDATES);
    expect(out.sdp.split('\r\n').filter((l) => l.startsWith('a=candidate:'))).toHaveLength(MAX_OFFER_CANDIDATES);
  });

  it("the agent's peer never sends a STUN packet to a candidate at 127.0.0.1 without the allowance (and does with it: the probe works)", async () => {
    const refused = await packetsTo(async (port) => {
      const { leg, connected } = await DirectLeg.answer(await offerNaming('127.0.0.1', port), { candidatePolicy: strict, connectTimeoutMs: 3000 });
      await connected.catch(() => undefined);
      await leg.close();
    });
    expect(refused.filter(isStun)).toEqual([]);

    const allowed = await packetsTo(async (port) => {
      const { leg, connected } = await DirectLeg.answer(await offerNaming('127.0.0.1', port), { candidatePolicy: policyFromCidrs('127.0.0.0/8'), connectTimeoutMs: 3000 });
      await connected.catch(() => undefined);
      await leg.close();
    });
    expect(allowed.filter(isStun).length).toBeGreaterThan(0);
  }, 30_000);

  it('a peer given no policy at all treats the offer as a stranger\'s: the internal address gets nothing', async () => {
    const got = await packetsTo(async (port) => {
      const { leg, connected } = await DirectLeg.answer(await offerNaming('127.0.0.1', port), { connectTimeoutMs: 3000 });
      await connected.catch(() => undefined);
      await leg.close();
    });
    expect(got.filter(isStun)).toEqual([]);
  }, 30_000);
});

/**
 * The SDP of a G.711 phone call (RFC 4566, offer/answer RFC 3264): we offer one audio
 * stream with PCMU (payload type 0) then PCMA (8), ptime 20; the answer names where to
 * send our RTP and which of the two the far end chose.
 */

export const PCMU = 0;
export const PCMA = 8;
export type G711 = typeof PCMU | typeof PCMA;

export interface SdpOffer {
  /** Our address in c= and o= (IPv4). */
  address: string;
  rtpPort: number;
  /** Increments when a new offer replaces the session (o= version). */
  sessionId: string;
  version?: number;
}

export function offerSdp(o: SdpOffer): string {
  return [
    'v=0',
    `o=concierge ${o.sessionId} ${o.version ?? 1} IN IP4 ${o.address}`,
    's=concierge',
    `c=IN IP4 ${o.address}`,
    't=0 0',
    `m=audio ${o.rtpPort} RTP/AVP ${PCMU} ${PCMA}`,
    `a=rtpmap:${PCMU} PCMU/8000`,
    `a=rtpmap:${PCMA} PCMA/8000`,
    'a=ptime:20',
    'a=sendrecv',
    '',
  ].join('\r\n');
}

export interface SdpAnswer {
  /** Where our RTP goes. */
  address: string;
  port: number;
  /** The codec the answer chose (the first of ours it lists). */
  payloadType: G711;
}

/** Reads the answer's first audio stream; an Error says why it cannot carry the call. */
export function parseAnswer(sdp: string): SdpAnswer {
  const lines = sdp.split(/\r?\n/).map((l) => l.trim());
  let sessionAddress: string | undefined;
  let mediaAddress: string | undefined;
  let media: string[] | null = null;
  let inAudio = false;
  for (const line of lines) {
    if (line.startsWith('m=')) {
      if (media) break; // only the first audio stream
      const fields = line.slice(2).split(/\s+/);
      inAudio = fields[0] === 'audio';
      if (inAudio) media = fields;
    } else if (line.startsWith('c=')) {
      const addr = /^c=IN IP[46] ([^\s/]+)/.exec(line)?.[1];
      if (!media && !inAudio) sessionAddress = addr;
      else if (inAudio) mediaAddress = addr;
    }
  }
  if (!media) throw new Error('the answer has no audio stream');
  const port = Number(media[1]);
  if (!port) throw new Error('the answer rejected the audio stream (port 0)');
  const chosen = media.slice(3).map(Number).find((pt) => pt === PCMU || pt === PCMA) as G711 | undefined;
  if (chosen === undefined) throw new Error(`the answer chose no G.711 codec (payload types ${media.slice(3).join(' ')})`);
  const address = mediaAddress ?? sessionAddress;
  if (!address) throw new Error('the answer has no connection address');
  return { address, port, payloadType: chosen };
}

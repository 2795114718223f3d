/**
 * The SDP of a G.711 phone call (RFC 4566, offer/answer RFC 3264): we offer one audio
 * stream with PCMU (payload type 0) then PCMA (8), and telephone-event/8000 (RFC 4733
 * DTMF, dynamic payload type 101, events 0-15: the digits, * # and A-D), ptime 20; the
 * answer names where to send our RTP, which of the two codecs the far end chose, and the
 * payload type it gives telephone-event (none: the far end takes no RFC 4733 digits).
 */

export const PCMU = 0;
export const PCMA = 8;
export type G711 = typeof PCMU | typeof PCMA;
/** The payload type we offer for telephone-event (RFC 4733); the answer's own number is what we send with. */
export const TELEPHONE_EVENT = 101;

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
    `m=audio ${o.rtpPort} RTP/AVP ${PCMU} ${PCMA} ${TELEPHONE_EVENT}`,
    `a=rtpmap:${PCMU} PCMU/8000`,
    `a=rtpmap:${PCMA} PCMA/8000`,
    `a=rtpmap:${TELEPHONE_EVENT} telephone-event/8000`,
    `a=fmtp:${TELEPHONE_EVENT} 0-15`,
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
  /** The answer's payload type for telephone-event/8000 (RFC 4733 DTMF); undefined: it takes none. */
  dtmfPayloadType?: number;
}

/** Reads the answer's first audio stream; an Error says why it cannot carry the call. */
export function parseAnswer(sdp: string): SdpAnswer {
  const lines = sdp.split(/\r?\n/).map((l) => l.trim());
  let sessionAddress: string | undefined;
  let mediaAddress: string | undefined;
  let media: string[] | null = null;
  let inAudio = false;
  let dtmfPayloadType: number | undefined;
  for (const line of lines) {
    const event = inAudio ? /^a=rtpmap:(\d{2,3}) telephone-event\/8000\b/i.exec(line) : null;
    if (event) dtmfPayloadType ??= Number(event[1]);
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
  // Only a telephone-event the answer's m= line lists (a stray rtpmap names nothing).
  if (dtmfPayloadType !== undefined && !media.slice(3).map(Number).includes(dtmfPayloadType)) dtmfPayloadType = undefined;
  return { address, port, payloadType: chosen, ...(dtmfPayloadType !== undefined ? { dtmfPayloadType } : {}) };
}

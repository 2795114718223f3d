import { randomInt } from 'node:crypto';
import dgram from 'node:dgram';
import { lookup } from 'node:dns/promises';
import net from 'node:net';
import { ConfigError } from '../../lib/config-error';
import { DialFailed, dialStatus } from '../../domain/ports/voice';
import type { DialOutInput, MediaLeg, Telephony } from '../../domain/ports/voice';
import { offerSdp, parseAnswer } from '../../lib/sip/sdp';
import { SipUac } from '../../lib/sip/uac';

export interface SipTrunkSettings {
  /** SIP_TRUNK_URI: `sip:host[:port][;transport=udp]`. */
  uri: string;
  /** SIP_USERNAME / SIP_PASSWORD: digest credentials for 401/407 challenges. */
  username?: string;
  password?: string;
  /** SIP_FROM_NUMBER: the caller id (E.164), From's user part. */
  fromNumber: string;
  /** SIP_RINGING_TIMEOUT_SECONDS: how long the phone may ring before we CANCEL (no_answer). */
  ringingTimeoutSeconds?: number;
  /** SIP_LOCAL_IP: the address put in Via, Contact and SDP; default: the one the OS routes to the trunk from. */
  localIp?: string;
  /** SIP_RTP_PORTS: the UDP range for RTP; default: any free port. */
  rtpPorts?: [number, number];
  /** The trunk host's address already resolved and checked (a workspace's trunk: the address rules): sent there, not looked up again. */
  address?: string;
  /** RFC 3261 T1 in ms (tests shorten the retransmission timers). */
  t1Ms?: number;
  /** How long a transfer waits for the far end's NOTIFY of the target's answer (default 30 s). */
  transferTimeoutMs?: number;
}

/** What a REFER may name: an E.164 number or an extension. */
const TRANSFER_TARGET = /^(\+[1-9][0-9]{6,14}|[0-9*#]{1,15})$/;

export interface TrunkAddress {
  host: string;
  port: number;
}

/** Reads SIP_TRUNK_URI; a ConfigError for anything but SIP over UDP. */
export function parseTrunkUri(uri: string): TrunkAddress {
  const m = /^sip:(?:[^@;]+@)?(\[[0-9a-f:]+\]|[^:;@]+)(?::(\d{1,5}))?((?:;[^;]*)*)$/i.exec(uri.trim());
  if (!m) throw new ConfigError(`SIP_TRUNK_URI must look like sip:host[:port][;transport=udp] (got ${uri})`);
  const transport = /;transport=([a-z]+)/i.exec(m[3] ?? '')?.[1]?.toLowerCase();
  if (transport && transport !== 'udp') throw new ConfigError(`SIP_TRUNK_URI: only transport=udp is supported (got ${transport})`);
  return { host: m[1].replace(/^\[|\]$/g, ''), port: m[2] ? Number(m[2]) : 5060 };
}

/** The local address the OS would send from to reach `address` (a connected UDP socket sends nothing). */
async function routeFrom(address: string): Promise<string> {
  const socket = dgram.createSocket(net.isIPv6(address) ? 'udp6' : 'udp4');
  try {
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.connect(9, address, () => resolve());
    });
    return socket.address().address;
  } finally {
    socket.close();
  }
}

function bindSignalling(): Promise<dgram.Socket> {
  return new Promise((resolve, reject) => {
    const socket = dgram.createSocket('udp4');
    socket.once('error', reject);
    socket.bind(0, '0.0.0.0', () => {
      socket.removeListener('error', reject);
      socket.on('error', () => undefined);
      resolve(socket);
    });
  });
}

/**
 * Dial-out over a SIP trunk directly (no LiveKit): per call one UDP socket for SIP and
 * one for RTP. The INVITE offers PCMU and PCMA; 180/183 report ringing, the 2xx is ACKed
 * and the answered call is an RtpLeg. 486/600/603 are busy; 408/480/487 and our ringing
 * timeout (we CANCEL) are no_answer; other failures, or no response at all, failed.
 * Aborting before the answer CANCELs. The password only enters digest hashes.
 *
 * The answered leg also presses and hears keys (RFC 4733 telephone-event, offered as
 * payload type 101) and transfers the call: `leg.transfer(target)` sends REFER with
 * `Refer-To: <sip:target@trunk>` (a number in E.164 or an extension of the trunk's PBX);
 * once the far end's NOTIFY reports the target answered (a 2xx sipfrag) the leg ends
 * `transferred` and closing it sends our BYE. A refused or failed transfer leaves the
 * call as it was. The target is checked by the caller (domain/voice/dial-out.ts
 * checkTransferTarget: the destination policy), not here.
 */
export class SipTrunkTelephony implements Telephony {
  readonly kind = 'sip' as const;
  private readonly trunk: TrunkAddress;

  constructor(private readonly settings: SipTrunkSettings) {
    this.trunk = parseTrunkUri(settings.uri);
    if (!/^\+?[0-9]{3,15}$/.test(settings.fromNumber)) throw new ConfigError('SIP_FROM_NUMBER must be a phone number in E.164 (+14155550100)');
    if (!!settings.username !== !!settings.password) throw new ConfigError('SIP_USERNAME and SIP_PASSWORD go together');
  }

  async dial(input: DialOutInput, progress: (status: 'ringing' | 'in_progress') => void, signal: AbortSignal): Promise<MediaLeg> {
    signal.throwIfAborted();
    const { settings, trunk } = this;
    let next: { address: string; port: number };
    try {
      next = { address: settings.address ?? (net.isIP(trunk.host) ? trunk.host : (await lookup(trunk.host, { family: 4 })).address), port: trunk.port };
    } catch (err) {
      throw new DialFailed('failed', `the SIP trunk's host ${trunk.host} does not resolve: ${err instanceof Error ? err.message : String(err)}`);
    }
    const localIp = settings.localIp ?? (await routeFrom(next.address));
    const sip = await bindSignalling();
    // The RTP leg (werift's packets) loads with the first call, not with the app.
    const { bindRtpSocket, RtpLeg } = await import('../../lib/sip/rtp-leg.js');
    const rtp = await bindRtpSocket('0.0.0.0', settings.rtpPorts).catch((err: unknown) => {
      sip.close();
      throw err;
    });
    const hostPart = trunk.port === 5060 ? trunk.host : `${trunk.host}:${trunk.port}`;
    const sdp = offerSdp({ address: localIp, rtpPort: rtp.address().port, sessionId: String(randomInt(1, 2 ** 47)) });
    const uac = new SipUac({
      socket: sip,
      next,
      local: { address: localIp, port: sip.address().port },
      target: `sip:${input.to}@${hostPart}`,
      from: `sip:${settings.fromNumber}@${hostPart}`,
      credentials: settings.username && settings.password ? { username: settings.username, password: settings.password } : undefined,
      t1Ms: settings.t1Ms,
      sessionSdp: () => sdp,
    });
    const closeAll = () => {
      uac.dispose();
      sip.close();
      rtp.close();
    };

    let timedOut = false;
    const ringing = setTimeout(
      () => {
        timedOut = true;
        uac.cancelInvite();
      },
      (settings.ringingTimeoutSeconds ?? 30) * 1000,
    );
    const onAbort = () => uac.cancelInvite();
    signal.addEventListener('abort', onAbort, { once: true });
    let rang = false;
    let result;
    try {
      result = await uac.invite(sdp, (status) => {
        if ((status === 180 || status === 183) && !rang) {
          rang = true;
          progress('ringing');
        }
      });
    } finally {
      clearTimeout(ringing);
      signal.removeEventListener('abort', onAbort);
    }

    if (result.status >= 200 && result.status < 300) {
      // Answered as we gave up (the 200 crossed our CANCEL): hang up at once.
      const hangUp = async (reason: Error) => {
        await uac.bye().catch(() => 0);
        closeAll();
        throw reason;
      };
      if (signal.aborted) return hangUp(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
      if (timedOut) return hangUp(new DialFailed('no_answer', `not answered within ${settings.ringingTimeoutSeconds ?? 30} s`));
      let peer;
      try {
        peer = parseAnswer(result.body);
      } catch (err) {
        return hangUp(new DialFailed('failed', `the call was answered with unusable media: ${(err as Error).message}`));
      }
      progress('in_progress');
      const leg = new RtpLeg(rtp, peer, async () => {
        await uac.bye();
      });
      uac.onBye(() => leg.remoteHungUp('remote_hung_up'));
      leg.transfer = async (target: string) => {
        if (!TRANSFER_TARGET.test(target)) throw new Error('a transfer target is a number in E.164 (+14155550123) or an extension (digits, * and #)');
        const result = await uac.refer(`sip:${target}@${hostPart}`, settings.transferTimeoutMs);
        if (result.ok) leg.finish('transferred');
        return result;
      };
      // Closing the leg sends our BYE (unless the far end's came first), then frees the SIP socket too.
      const close = leg.close.bind(leg);
      leg.close = async () => {
        try {
          await close();
        } finally {
          uac.dispose();
          sip.close();
        }
      };
      return leg;
    }

    closeAll();
    if (signal.aborted) throw signal.reason instanceof Error ? signal.reason : new Error('aborted');
    if (timedOut) throw new DialFailed('no_answer', `not answered within ${settings.ringingTimeoutSeconds ?? 30} s`, result.status || undefined);
    if (result.status === 0) throw new DialFailed('failed', `the SIP trunk did not respond (${trunk.host}:${trunk.port})`);
    throw new DialFailed(dialStatus(result.status), `SIP ${result.status} ${result.reason}`.trim(), result.status);
  }
}

/** The settings sipTrunkFromConfig reads (the SIP_* keys of app/config.ts). */
export interface SipTrunkConfig {
  SIP_TRUNK_URI?: string;
  SIP_USERNAME?: string;
  SIP_PASSWORD?: string;
  SIP_FROM_NUMBER?: string;
  SIP_RINGING_TIMEOUT_SECONDS?: number;
  SIP_LOCAL_IP?: string;
  SIP_RTP_PORTS?: string;
}

/** The direct SIP trunk from settings: null without SIP_TRUNK_URI; a ConfigError when half configured. */
export function sipTrunkFromConfig(config: SipTrunkConfig): SipTrunkTelephony | null {
  if (!config.SIP_TRUNK_URI) return null;
  if (!config.SIP_FROM_NUMBER) throw new ConfigError('SIP_FROM_NUMBER (the caller id) is required with SIP_TRUNK_URI');
  const ports = config.SIP_RTP_PORTS?.split('-').map(Number) as [number, number] | undefined;
  if (ports && !(ports[0] > 0 && ports[0] < ports[1] && ports[1] <= 65535)) throw new ConfigError('SIP_RTP_PORTS must be a range such as 20000-20100');
  return new SipTrunkTelephony({
    uri: config.SIP_TRUNK_URI,
    username: config.SIP_USERNAME,
    password: config.SIP_PASSWORD,
    fromNumber: config.SIP_FROM_NUMBER,
    ringingTimeoutSeconds: config.SIP_RINGING_TIMEOUT_SECONDS,
    localIp: config.SIP_LOCAL_IP,
    rtpPorts: ports,
  });
}

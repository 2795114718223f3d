import { ConfigError } from '../../app/config';
import { telephonyFromConfig } from '../../app/voice';
import { livekitFromConfig } from '../../providers/livekit/livekit';
import { testConfig } from '../support/app';
import { authorization, parseChallenge } from '../../lib/sip/digest';
import { header, headers, param, parseMessage, serialize, uriOf } from '../../lib/sip/message';
import { offerSdp, parseAnswer } from '../../lib/sip/sdp';
import { parseTrunkUri, sipTrunkFromConfig } from '../../providers/telephony/sip-trunk';

describe('SIP messages', () => {
  test('a response parses with compact headers, multi-value Via and the body cut at Content-Length', () => {
    const raw = [
      'SIP/2.0 200 OK',
      'v: SIP/2.0/UDP 10.0.0.1:5060;branch=z9hG4bKa, SIP/2.0/UDP 10.0.0.2:5060;branch=z9hG4bKb',
      'f: <sip:+14155550100@trunk>;tag=abc',
      'To: "Bob" <sip:+14155550123@trunk>;tag=xyz',
      'i: 123@host',
      'CSeq: 2 INVITE',
      'Record-Route: <sip:p1;lr>, <sip:p2;lr>',
      'm: <sip:bob@10.0.0.9:5070;transport=udp>',
      'l: 4',
      '',
      'v=0\r\nextra',
    ].join('\r\n');
    const msg = parseMessage(raw)!;
    expect(msg).toMatchObject({ status: 200, reason: 'OK', body: 'v=0\r' });
    expect(headers(msg, 'Via')).toHaveLength(2);
    expect(param(header(msg, 'Via')!, 'branch')).toBe('z9hG4bKa');
    expect(param(header(msg, 'To')!, 'tag')).toBe('xyz');
    expect(uriOf(header(msg, 'Contact')!)).toBe('sip:bob@10.0.0.9:5070;transport=udp');
    expect(headers(msg, 'Record-Route')).toEqual(['<sip:p1;lr>', '<sip:p2;lr>']);
    expect(header(msg, 'call-id')).toBe('123@host');
    expect(parseMessage('\r\n\r\n')).toBeNull();
  });

  test('serialize writes the start line, canonical names and the body length in bytes', () => {
    const text = serialize({ method: 'BYE', uri: 'sip:x@y', headers: [['call-id', 'c'], ['cseq', '3 BYE'], ['Content-Length', '99']], body: 'é' });
    expect(text).toBe('BYE sip:x@y SIP/2.0\r\nCall-ID: c\r\nCSeq: 3 BYE\r\nContent-Length: 2\r\n\r\né');
  });
});

describe('digest authentication', () => {
  test('the RFC 2617 §3.5 example response (MD5, qop=auth)', () => {
    const c = parseChallenge('Digest realm="testrealm@host.com", qop="auth,auth-int", nonce="dcd98b7102dd2f0e8b11d0f600bfb0c093", opaque="5ccc069c403ebaf9f0171e9517f40e41"')!;
    expect(c).toMatchObject({ realm: 'testrealm@host.com', qop: 'auth', algorithm: 'MD5', stale: false });
    const value = authorization(c, { method: 'GET', uri: '/dir/index.html', username: 'Mufasa', password: 'Circle Of Life', nc: 1, cnonce: '0a4f113b' });
    expect(value).toContain('response="6629fae49393a05397450978507c4ef1"');
    expect(value).toContain('nc=00000001');
    expect(value).toContain('opaque="5ccc069c403ebaf9f0171e9517f40e41"');
    expect(value).not.toContain('Circle Of Life');
  });

  test('another scheme is not a digest challenge', () => {
    expect(parseChallenge('Basic realm="x"')).toBeNull();
  });
});

describe('SDP', () => {
  test('our offer lists PCMU then PCMA at 20 ms, and telephone-event/8000 (RFC 4733 DTMF) as payload type 101', () => {
    const sdp = offerSdp({ address: '192.0.2.10', rtpPort: 20000, sessionId: '42' });
    expect(sdp).toContain('c=IN IP4 192.0.2.10\r\n');
    expect(sdp).toContain('m=audio 20000 RTP/AVP 0 8 101\r\n');
    expect(sdp).toContain('a=rtpmap:101 telephone-event/8000\r\na=fmtp:101 0-15\r\n');
    expect(sdp).toContain('a=ptime:20\r\n');
  });

  test("the answer's telephone-event payload type is the one we send digits with; none listed (or only a stray rtpmap): no RFC 4733 digits", () => {
    const answer = (m: string, maps: string) => `v=0\r\nc=IN IP4 198.51.100.1\r\nm=audio 4000 RTP/AVP ${m}\r\na=rtpmap:0 PCMU/8000\r\n${maps}`;
    expect(parseAnswer(answer('0 96', 'a=rtpmap:96 telephone-event/8000\r\na=fmtp:96 0-16\r\n')).dtmfPayloadType).toBe(96);
    expect(parseAnswer(answer('0', 'a=rtpmap:96 telephone-event/8000\r\n')).dtmfPayloadType).toBeUndefined();
    expect(parseAnswer(answer('0 101', '')).dtmfPayloadType).toBeUndefined();
    // A telephone-event at another clock rate is not the 8 kHz one the audio runs at.
    expect(parseAnswer(answer('0 101', 'a=rtpmap:101 telephone-event/48000\r\n')).dtmfPayloadType).toBeUndefined();
  });

  test('the answer gives the media address (media-level c= over session-level) and the chosen codec', () => {
    expect(parseAnswer('v=0\r\nc=IN IP4 198.51.100.1\r\nm=audio 4000 RTP/AVP 8 101\r\nc=IN IP4 198.51.100.2\r\n')).toEqual({ address: '198.51.100.2', port: 4000, payloadType: 8 });
    expect(parseAnswer('v=0\nc=IN IP4 198.51.100.1\nm=audio 4000 RTP/AVP 0\n')).toEqual({ address: '198.51.100.1', port: 4000, payloadType: 0 });
    expect(() => parseAnswer('v=0\r\nc=IN IP4 1.2.3.4\r\nm=audio 0 RTP/AVP 0\r\n')).toThrow('port 0');
    expect(() => parseAnswer('v=0\r\nc=IN IP4 1.2.3.4\r\nm=audio 4000 RTP/AVP 18\r\n')).toThrow('no G.711');
  });
});

describe('SIP trunk settings', () => {
  test('SIP_TRUNK_URI: host, port (5060 by default), UDP only', () => {
    expect(parseTrunkUri('sip:127.0.0.1:5070')).toEqual({ host: '127.0.0.1', port: 5070 });
    expect(parseTrunkUri('sip:trunk.example.com;transport=udp')).toEqual({ host: 'trunk.example.com', port: 5060 });
    expect(() => parseTrunkUri('sip:trunk.example.com;transport=tls')).toThrow(ConfigError);
    expect(() => parseTrunkUri('https://trunk.example.com')).toThrow(ConfigError);
  });

  test('from config: none without SIP_TRUNK_URI; the caller id is required; credentials go together', () => {
    expect(sipTrunkFromConfig({})).toBeNull();
    expect(() => sipTrunkFromConfig({ SIP_TRUNK_URI: 'sip:127.0.0.1' })).toThrow('SIP_FROM_NUMBER');
    expect(() => sipTrunkFromConfig({ SIP_TRUNK_URI: 'sip:127.0.0.1', SIP_FROM_NUMBER: '+14155550100', SIP_USERNAME: 'u' })).toThrow('go together');
    expect(() => sipTrunkFromConfig({ SIP_TRUNK_URI: 'sip:127.0.0.1', SIP_FROM_NUMBER: '+14155550100', SIP_RTP_PORTS: '30000-20000' })).toThrow('SIP_RTP_PORTS');
    expect(sipTrunkFromConfig({ SIP_TRUNK_URI: 'sip:127.0.0.1', SIP_FROM_NUMBER: '+14155550100' })?.kind).toBe('sip');
  });

  test('dial-out picks LiveKit SIP when it has a trunk, else the direct SIP trunk, else none', () => {
    const sip = { SIP_TRUNK_URI: 'sip:127.0.0.1:5070', SIP_FROM_NUMBER: '+14155550100' };
    const lk = { LIVEKIT_URL: 'wss://lk.example.com', LIVEKIT_API_KEY: 'APIkey', LIVEKIT_API_SECRET: 'secret-secret-secret' };
    expect(telephonyFromConfig(testConfig(sip), null)?.kind).toBe('sip');
    expect(telephonyFromConfig(testConfig({ ...sip, ...lk, LIVEKIT_SIP_TRUNK_ID: 'ST_1' }), livekitFromConfig({ ...lk, LIVEKIT_SIP_TRUNK_ID: 'ST_1' }))?.kind).toBe('livekit-sip');
    // LiveKit without a trunk carries voice chat only: dial-out still goes over the SIP trunk.
    expect(telephonyFromConfig(testConfig({ ...sip, ...lk }), livekitFromConfig(lk))?.kind).toBe('sip');
    expect(telephonyFromConfig(testConfig(), null)).toBeNull();
  });
});

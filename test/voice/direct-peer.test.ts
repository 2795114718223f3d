import { MediaStreamTrack, RTCPeerConnection, RtpHeader, RtpPacket, usePCMU } from 'werift';
import { DirectLeg } from '../../providers/webrtc/direct-peer';
import { policyFromCidrs } from '../../lib/net/ssrf';
import { LOCAL_ICE_CIDRS } from '../support/ice';
import { decodeMulaw as ulawDecode, encodeMulaw } from '../../lib/audio/audio';
/** The test-only ICE allowance: the "browser" here is a werift peer on this machine. */
const local = { candidatePolicy: policyFromCidrs(LOCAL_ICE_CIDRS) };
const ulawEncode = (s: Int16Array) => Buffer.from(encodeMulaw(s));

function tone(hz: number, samples: number, amplitude = 8000): Int16Array {
  return Int16Array.from({ length: samples }, (_, i) => Math.round(amplitude * Math.sin((2 * Math.PI * hz * i) / 8000)));
}

describe('direct transport: the agent answers a browser-like offer', () => {
  it('exchanges PCMU audio both ways and carries transcript frames on the `transcript` channel', async () => {
    // The "browser": a werift peer that offers like Chrome does (audio sendrecv + a data channel).
    const browser = new RTCPeerConnection({ codecs: { audio: [usePCMU()], video: [] }, bundlePolicy: 'max-bundle' });
    const mic = new MediaStreamTrack({ kind: 'audio' });
    browser.addTransceiver(mic, { direction: 'sendrecv' });
    const channel = browser.createDataChannel('transcript');
    const heard: number[] = [];
    browser.onTrack.subscribe((track) => track.onReceiveRtp.subscribe((rtp) => heard.push(...ulawDecode(rtp.payload))));
    const frames: unknown[] = [];
    channel.onMessage.subscribe((data) => frames.push(JSON.parse(data.toString())));
    await browser.setLocalDescription(await browser.createOffer());
    if (browser.iceGatheringState !== 'complete') await browser.iceGatheringStateChange.watch((s) => s === 'complete');

    const { answerSdp, leg, connected } = await DirectLeg.answer(browser.localDescription!.sdp, local);
    expect(answerSdp).toMatch(/a=rtpmap:0 PCMU\/8000/);
    await browser.setRemoteDescription({ type: 'answer', sdp: answerSdp });
    await connected;

    const received: Int16Array[] = [];
    leg.onAudio((f) => received.push(f));
    // The browser talks: 10 frames of a 440 Hz tone.
    const t = tone(440, 1600);
    for (let i = 0; i < 10; i++) {
      mic.writeRtp(new RtpPacket(new RtpHeader({ payloadType: 0, sequenceNumber: i + 1, timestamp: i * 160, marker: i === 0 }), ulawEncode(t.subarray(i * 160, (i + 1) * 160))));
      await new Promise((r) => setTimeout(r, 20));
    }
    // The agent talks: 300 ms, paced.
    const started = Date.now();
    leg.play(tone(300, 2400));
    expect(leg.playing).toBe(true);
    await new Promise((r) => setTimeout(r, 450));
    expect(leg.playing).toBe(false);
    expect(Date.now() - started).toBeGreaterThanOrEqual(280);
    for (let i = 0; i < 50 && !leg.channelOpen; i++) await new Promise((r) => setTimeout(r, 20));
    leg.sendTranscript({ type: 'transcript', speaker: 'assistant', text: 'Hello', timestamp: 1, partial: false });
    for (let i = 0; i < 50 && frames.length === 0; i++) await new Promise((r) => setTimeout(r, 20));

    expect(received.length).toBeGreaterThanOrEqual(8);
    expect(received[0].length).toBe(160);
    expect(Math.max(...received[3])).toBeGreaterThan(6000);
    expect(heard.length).toBeGreaterThanOrEqual(2000);
    expect(frames).toEqual([{ type: 'transcript', speaker: 'assistant', text: 'Hello', timestamp: 1, partial: false }]);

    const ended = leg.ended;
    await browser.close();
    await leg.close();
    await expect(ended).resolves.toEqual(expect.any(String));
  }, 30_000);

  it('drops queued audio on barge-in', async () => {
    const browser = new RTCPeerConnection({ codecs: { audio: [usePCMU()], video: [] }, bundlePolicy: 'max-bundle' });
    browser.addTransceiver(new MediaStreamTrack({ kind: 'audio' }), { direction: 'sendrecv' });
    browser.createDataChannel('transcript');
    await browser.setLocalDescription(await browser.createOffer());
    if (browser.iceGatheringState !== 'complete') await browser.iceGatheringStateChange.watch((s) => s === 'complete');
    const { answerSdp, leg, connected } = await DirectLeg.answer(browser.localDescription!.sdp, local);
    await browser.setRemoteDescription({ type: 'answer', sdp: answerSdp });
    await connected;
    let sent = 0;
    leg.onPlayed(() => sent++);
    leg.play(tone(300, 8000)); // one second
    await new Promise((r) => setTimeout(r, 100));
    leg.clearPlayback();
    const atClear = sent;
    await new Promise((r) => setTimeout(r, 200));
    expect(leg.playing).toBe(false);
    expect(sent).toBe(atClear);
    expect(sent).toBeLessThan(20);
    await browser.close();
    await leg.close();
  }, 30_000);
});

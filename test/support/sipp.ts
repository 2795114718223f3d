import { spawn, spawnSync } from 'node:child_process';
import dgram from 'node:dgram';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * SIPp (Debian `sip-tester`) as the far end of a SIP trunk: a real SIP/RTP stack on
 * 127.0.0.1 running one of the UAS scenarios in test/fixtures/sipp/ for one call (-m 1),
 * its @@FIELD@@ placeholders filled. SIPp's exit code says whether the scenario ran to
 * its end (0) or failed (1: a message it did not expect, a timeout, 403 on bad digest
 * credentials). Its SIP trace is kept for assertions and failure messages.
 */

const FIXTURES = path.resolve(__dirname, '../fixtures/sipp');

/** Whether the sipp binary is installed (`sip-tester`, installed by npm run setup). */
export const sippInstalled = !spawnSync('sipp', ['-v'], { stdio: 'ignore' }).error;

export type SippScenario = 'answer-wait-bye' | 'answer-hang-up' | 'reinvite' | 'busy' | 'no-answer' | 'auth' | 'refer' | 'answer-dtmf';

export interface SippOptions {
  scenario: SippScenario;
  /**
   * Values for the scenario's @@FIELD@@ placeholders: CODEC (the payload type its SDP
   * answer offers, 0 by default), MEDIA (an action after the ACK, none by default),
   * MEDIA_PORT (the RTP port its SDP answer gives, its own -mp port by default: a test
   * may put a listener of its own there to capture what we send), HANGUP_MS, USERNAME,
   * PASSWORD.
   */
  fields?: Record<string, string>;
  /** Echo every RTP packet received on the media port back to its sender (-rtp_echo). */
  rtpEcho?: boolean;
  /** SIPp gives up (and fails) after this long; 90 s by default. */
  timeoutSeconds?: number;
}

export interface SippRun {
  /** The trunk URI to dial it on (SIP_TRUNK_URI). */
  uri: string;
  port: number;
  /** Its RTP port (-mp), what its SDP answer offers. */
  mediaPort: number;
  /** Resolves when sipp exits: its exit code and the SIP messages it sent and received. */
  exited: Promise<{ code: number | null; trace: string }>;
  /** The SIP trace so far. */
  trace(): string;
  stop(): void;
}

function udpFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = dgram.createSocket('udp4');
    s.once('error', () => resolve(false));
    s.bind(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/** A free even UDP port with the three above it free too (SIPp's media and echo ports). */
async function freePorts(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const p = 20000 + 2 * Math.floor(Math.random() * 20000);
    const checks = await Promise.all([0, 1, 2, 3].map((d) => udpFree(p + d)));
    if (checks.every(Boolean)) return p;
  }
  throw new Error('no free UDP ports for sipp');
}

export async function startSipp(o: SippOptions): Promise<SippRun> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sipp-'));
  const fields: Record<string, string> = { CODEC: '0', MEDIA: '', MEDIA_PORT: '[media_port]', HANGUP_MS: '1000', ...o.fields };
  const xml = fs.readFileSync(path.join(FIXTURES, `${o.scenario}.xml`), 'utf8').replace(/@@([A-Z_]+)@@/g, (m, name: string) => fields[name] ?? m);
  const scenario = path.join(dir, `${o.scenario}.xml`);
  fs.writeFileSync(scenario, xml);
  const base = await freePorts();
  const port = base;
  const mediaPort = base + 2;
  const messages = path.join(dir, 'messages.log');
  const errors = path.join(dir, 'errors.log');
  const args = ['-sf', scenario, '-i', '127.0.0.1', '-p', String(port), '-mp', String(mediaPort), '-m', '1', '-nostdin', '-trace_msg', '-message_file', messages, '-trace_err', '-error_file', errors, '-timeout', `${o.timeoutSeconds ?? 90}s`, '-timeout_error'];
  if (o.rtpEcho) args.push('-rtp_echo');
  const child = spawn('sipp', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const read = (f: string) => (fs.existsSync(f) ? fs.readFileSync(f, 'utf8') : '');
  const trace = () => read(messages);
  const exited = new Promise<{ code: number | null; trace: string }>((resolve) => {
    child.on('exit', (code) => resolve({ code, trace: `${trace()}${read(errors)}${stderr}` }));
  });
  // SIPp binds at once; an INVITE that still comes too early is retransmitted (Timer A).
  await new Promise((r) => setTimeout(r, 300));
  return {
    uri: `sip:127.0.0.1:${port}`,
    port,
    mediaPort,
    exited,
    trace,
    stop: () => {
      if (child.exitCode === null) child.kill('SIGTERM');
    },
  };
}

/** A pcap-free RTP source for SIPp: `pcm` as raw G.711 μ-law bytes, for `<exec rtp_stream="file,loops,0"/>`. */
export function writeMulawFile(bytes: Uint8Array): string {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'sipp-audio-')), 'audio.ulaw');
  fs.writeFileSync(file, bytes);
  return file;
}

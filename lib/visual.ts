import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';

/** What describes a picture for the agent (providers/llm/vision.ts: a vision-capable model). */
export interface ImageDescriber {
  describe(image: Buffer, mime: string): Promise<string>;
}

/** Frames described per video, at these fractions of its length. */
const FRAME_AT = [0.1, 0.5, 0.9];
const FFMPEG_TIMEOUT_MS = 30_000;

function run(cmd: string, args: string[]): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let err = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), FFMPEG_TIMEOUT_MS);
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => (err = (err + c.toString()).slice(-2000)));
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(Buffer.concat(out));
      else reject(new Error(`${cmd} exited with ${code}: ${err.trim().split('\n').at(-1) ?? ''}`));
    });
  });
}

const clock = (s: number) => `${Math.floor(s / 60)}:${String(Math.floor(s % 60)).padStart(2, '0')}`;

/**
 * A description of an image, or of a video's key frames (each with its time), for the
 * agent; '' when there is nothing to describe. ffmpeg failing on a video is a file that
 * cannot be read, not a failure of the service: its frames are then left out.
 */
export async function describeVisual(filePath: string, kind: string, mime: string, describer: ImageDescriber): Promise<string> {
  if (kind === 'image') {
    const text = await describer.describe(await fs.readFile(filePath), mime);
    return text ? `What the image shows: ${text}` : '';
  }
  if (kind !== 'video') return '';
  let seconds: number;
  try {
    seconds = Number((await run('ffprobe', ['-v', 'error', '-show_entries', 'format=duration', '-of', 'default=nw=1:nk=1', filePath])).toString().trim());
  } catch {
    return '';
  }
  if (!Number.isFinite(seconds) || seconds <= 0) return '';
  const lines: string[] = [];
  for (const at of FRAME_AT) {
    const t = seconds * at;
    let frame: Buffer;
    try {
      frame = await run('ffmpeg', ['-v', 'error', '-ss', t.toFixed(2), '-i', filePath, '-frames:v', '1', '-vf', 'scale=768:-2', '-f', 'image2pipe', '-vcodec', 'mjpeg', 'pipe:1']);
    } catch {
      continue;
    }
    if (!frame.length) continue;
    const text = await describer.describe(frame, 'image/jpeg');
    if (text) lines.push(`At ${clock(t)}: ${text}`);
  }
  return lines.length ? `What the video shows:\n${lines.join('\n')}` : '';
}

/**
 * A recording's length as its container states it (ffprobe reads only the headers, and
 * what it needs of the start of the file: milliseconds, whatever the length), so a long
 * recording is refused before it is decoded or queued for transcription.
 */
import { execFile } from 'node:child_process';

/** ffprobe's own limit: a header read that takes longer than this is given up (null, as when there is no duration). */
const PROBE_TIMEOUT_MS = 10_000;

/**
 * Seconds, or null when the container states no length (a browser's WebM recording has
 * none until it is finalised), ffprobe is not installed, or it cannot read the file:
 * callers then rely on the decoder's own cap (whisper.ts stops decoding past it).
 */
export function probeDurationSeconds(filePath: string, ffprobe = 'ffprobe'): Promise<number | null> {
  return new Promise((resolve) => {
    execFile(
      ffprobe,
      ['-v', 'error', '-show_entries', 'format=duration', '-of', 'default=noprint_wrappers=1:nokey=1', filePath],
      { timeout: PROBE_TIMEOUT_MS, maxBuffer: 64 * 1024, killSignal: 'SIGKILL' },
      (err, stdout) => {
        if (err) return resolve(null);
        const seconds = Number.parseFloat(String(stdout).trim());
        resolve(Number.isFinite(seconds) && seconds >= 0 ? seconds : null);
      },
    );
  });
}

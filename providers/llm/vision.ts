import { OperationalError } from '../../lib/failures';
import { classifyOpenAiError, openAiClient } from './openai';
import type { ImageDescriber } from '../../lib/visual';

export { describeVisual, type ImageDescriber } from '../../lib/visual';

/**
 * What a picture shows, for the agent: a vision-capable OpenAI-compatible model
 * (`VISION_MODEL`, at `VISION_BASE_URL` or the language model's server) describes an
 * uploaded image, and a few key frames of a video (taken with ffmpeg). Without one,
 * images are read by OCR only and videos by their transcript (the widget's init says so
 * in `capability_warnings`).
 */
export interface VisionSettings {
  baseUrl: string;
  apiKey?: string;
  model: string;
  timeoutMs?: number;
}

const PROMPT =
  'Describe this image for a customer-service agent who cannot see it: what it shows, any text in it, and anything that looks damaged, wrong or noteworthy. Plain text, at most 120 words.';

export class OpenAiImageDescriber implements ImageDescriber {
  private readonly client;

  constructor(private readonly s: VisionSettings) {
    this.client = openAiClient({ baseUrl: s.baseUrl, apiKey: s.apiKey, timeoutMs: s.timeoutMs ?? 60_000 });
  }

  async describe(image: Buffer, mime: string): Promise<string> {
    try {
      const res = await this.client.chat.completions.create({
        model: this.s.model,
        max_tokens: 300,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: PROMPT },
              { type: 'image_url', image_url: { url: `data:${mime};base64,${image.toString('base64')}` } },
            ],
          },
        ],
      });
      return (res.choices[0]?.message?.content ?? '').trim();
    } catch (err) {
      const f = classifyOpenAiError(err, this.s.apiKey);
      throw new OperationalError('VisionUnavailable', `the vision model failed: ${f.detail || f.kind}`, f.retryable);
    }
  }
}

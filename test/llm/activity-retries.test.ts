import { ApplicationFailure } from '@temporalio/activity';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createActivities, type ActivityDeps } from '../../activities';
import { ExtractionError } from '../../lib/extract';
import { LlmError } from '../../providers/llm/model';

/**
 * How the activities turn the shared classifier's verdict (carried by LlmError and
 * ExtractionError) into Temporal retry behaviour. The services are stand-ins that throw.
 */
function activitiesThrowing(err: unknown) {
  const fail = async (): Promise<never> => {
    throw err;
  };
  return createActivities({
    em: undefined as unknown as ActivityDeps['em'],
    services: { turns: { run: fail } } as unknown as ActivityDeps['services'],
    indexing: { extractAndChunk: fail } as unknown as ActivityDeps['indexing'],
  });
}

const turn = { conversationId: 'c', workspaceId: 'w', messageId: 'm', replyId: 'r' };

async function failureOf(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected a failure');
}

describe('runAgentTurn', () => {
  test("a retryable LlmError with Retry-After asks Temporal to wait that long (capped at 30 s), same type and message", async () => {
    const a = activitiesThrowing(new LlmError('The language model answered HTTP 429: slow down', true, 429, 7_000));
    const err = await failureOf(new MockActivityEnvironment().run(a.runAgentTurn, turn));
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err).toMatchObject({ type: 'LlmError', message: 'The language model answered HTTP 429: slow down', nonRetryable: false, nextRetryDelay: 7_000 });

    const long = activitiesThrowing(new LlmError('The language model answered HTTP 503', true, 503, 3_600_000));
    expect(await failureOf(new MockActivityEnvironment().run(long.runAgentTurn, turn))).toMatchObject({ nextRetryDelay: 30_000 });
  });

  test('a final LlmError is non-retryable LlmRejected; a retryable one without a hint is left to the retry policy (no delay of its own)', async () => {
    const final = activitiesThrowing(new LlmError('The language model answered HTTP 401: no', false, 401));
    expect(await failureOf(new MockActivityEnvironment().run(final.runAgentTurn, turn))).toMatchObject({ type: 'LlmRejected', nonRetryable: true });

    const plain = new LlmError('The language model could not be reached: ECONNREFUSED', true);
    const failure = await failureOf(new MockActivityEnvironment().run(activitiesThrowing(plain).runAgentTurn, turn));
    expect(failure).toMatchObject({ type: 'LlmError', message: plain.message, nonRetryable: false });
    expect((failure as ApplicationFailure).nextRetryDelay).toBeUndefined();
  });
});

describe('extractAndChunkFile', () => {
  test('a retryable transcription failure is retried (ExtractionCrash); a final one is not (ExtractionError)', async () => {
    const busy = activitiesThrowing(new ExtractionError('transcription failed (HTTP 503)', 'busy', true));
    expect(await failureOf(new MockActivityEnvironment().run(busy.extractAndChunkFile, 'file_1'))).toMatchObject({
      type: 'ExtractionCrash',
      message: 'transcription failed (HTTP 503)',
      nonRetryable: false,
    });

    const rejected = activitiesThrowing(new ExtractionError('transcription failed (HTTP 400)', 'bad file'));
    expect(await failureOf(new MockActivityEnvironment().run(rejected.extractAndChunkFile, 'file_1'))).toMatchObject({
      type: 'ExtractionError',
      message: 'transcription failed (HTTP 400)',
      nonRetryable: true,
    });
  });
});

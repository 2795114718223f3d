import { turnsOf } from '../../domain/debugger/conversation-debugger';
import { redactSecrets } from '../../domain/debugger/redact';
import type { RecordedActivity, RecordedHistory } from '../../domain/ports/workflow-history';

const at = (s: number) => new Date(Date.UTC(2026, 10, 28, 12, 0, s)).toISOString();

function activity(a: Partial<RecordedActivity> & Pick<RecordedActivity, 'type' | 'input' | 'scheduledEventId'>): RecordedActivity {
  return { scheduledAt: at(1), startedAt: at(2), closedAt: at(5), attempt: 1, outcome: 'completed', ...a };
}

const history = (activities: RecordedActivity[], messages: RecordedHistory['messages'] = []): RecordedHistory => ({
  workflowId: 'conversation:conv_1',
  runId: 'run-1',
  workflowType: 'conversationWorkflow',
  startedAt: at(0),
  status: 'running',
  activities,
  messages,
});

describe('the debugger maps a history to turns', () => {
  test("a messaging channel's turn: received by its signal, its reply's send timed from its own activity", () => {
    const [turn] = turnsOf(
      history(
        [
          activity({ scheduledEventId: 5, type: 'runAgentTurn', input: [{ messageId: 'msg_in', replyId: 'msg_out' }], result: { reply_id: 'msg_out', text: 'Hello', attachments: [], extras: {}, handoff: false } }),
          activity({ scheduledEventId: 9, type: 'sendAgentReply', input: [{ conversationId: 'conv_1', replyId: 'msg_out' }], scheduledAt: at(6), closedAt: at(8) }),
        ],
        [{ name: 'customerMessage', args: [{ clientMessageId: 'wamid.1', messageId: 'msg_in', replyId: 'msg_out' }], at: at(0) }],
      ),
      false,
    );
    expect(turn).toMatchObject({ status: 'answered', received_at: at(0), output: 'Hello', traced: false, output_unmasked: null });
    expect(turn.latency).toEqual([
      { step: 'waiting in the conversation', ms: 1000, source: 'event' },
      { step: 'queued for a worker', ms: 1000, source: 'event' },
      { step: 'the turn (last attempt)', ms: 3000, source: 'event' },
      { step: 'sending the reply (message-send)', ms: 2000, source: 'event' },
    ]);
  });

  test('a failed turn says why, redacted; a running one has no end; a held one says so', () => {
    const turns = turnsOf(
      history([
        activity({ scheduledEventId: 5, type: 'runAgentTurn', input: [{ messageId: 'a', replyId: 'b' }], outcome: 'failed', failure: 'HTTP 401 from https://llm.example/v1?api_key=abc123def', result: undefined }),
        activity({ scheduledEventId: 8, type: 'runAgentTurn', input: [{ messageId: 'c', replyId: 'd' }], result: { reply_id: 'd', text: '', attachments: [], extras: {}, handoff: false, held: true } }),
        activity({ scheduledEventId: 11, type: 'runAgentTurn', input: [{ messageId: 'e', replyId: 'f' }], outcome: 'pending', startedAt: null, closedAt: null }),
      ]),
      true,
    );
    expect(turns.map((t) => t.status)).toEqual(['failed', 'held', 'running']);
    expect(turns[0].error).toBe('HTTP 401 from https://llm.example/v1?api_key=[redacted]');
    expect(turns[2].latency).toEqual([]);
  });
});

describe('redactSecrets', () => {
  test.each([
    [`key sk_${'0a'.repeat(32)} here`, 'key sk_[redacted] here'],
    ['Authorization: Bearer eyJhbGciOi.J9eyJzdWIiOiIx.MjM0NTY3ODkw', 'Authorization: Bearer [redacted]'],
    ['{"api_key":"s3cr3t","q":"boots"}', '{"api_key":"[redacted]","q":"boots"}'],
    ['use sk-proj-Ab12Cd34Ef56Gh78Ij90', 'use sk-[redacted]'],
    ['AKIAIOSFODNN7EXAMPLE', 'AKIA[redacted]'],
    ['https://x.example/a?token=abc&page=2', 'https://x.example/a?token=[redacted]&page=2'],
  ])('%s', (text, redacted) => {
    expect(redactSecrets(text)).toBe(redacted);
  });

  test('ordinary text is left alone', () => {
    const text = 'Unworn boots can be sent back within 45 days; order 4411-2290, ticket sk-1.';
    expect(redactSecrets(text)).toBe(text);
  });
});

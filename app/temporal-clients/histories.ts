import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { Payload } from '@temporalio/common';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { optionalTsToMs } from '@temporalio/common/lib/time';
import type { temporal } from '@temporalio/proto';
import type { RecordedActivity, RecordedHistory, RecordedMessage, WorkflowHistories } from '../../domain/ports/workflow-history';

type History = temporal.api.history.v1.IHistory;
type Failure = temporal.api.failure.v1.IFailure;

const at = (ts: Parameters<typeof optionalTsToMs>[0]) => new Date(optionalTsToMs(ts) ?? 0).toISOString();
const num = (v: unknown) => (v === null || v === undefined ? 0 : Number(v));

/**
 * Workflow histories read through this process's Temporal client, payloads decoded by its data converter (the
 * service's codec: decrypted, then parsed), for the console's conversation debugger. The latest run only: a
 * conversation continued as new keeps its earlier turns in the runs before.
 */
export class WorkflowHistoryReader implements WorkflowHistories {
  constructor(private readonly client: Client) {}

  private async fetch(workflowId: string): Promise<History | null> {
    try {
      return await this.client.workflow.getHandle(workflowId).fetchHistory();
    } catch (err) {
      // Over a native connection (a worker's, shared with its client) the error has no class of its own: its text says it.
      if (err instanceof WorkflowNotFoundError || /not found/i.test((err as Error).message)) return null;
      throw err;
    }
  }

  async exportJson(workflowId: string): Promise<string | null> {
    const history = await this.fetch(workflowId);
    return history ? historyToJSON(history) : null;
  }

  private async values(payloads: Payload[] | null | undefined): Promise<unknown[]> {
    if (!payloads?.length) return [];
    const { payloadCodecs, payloadConverter } = this.client.options.loadedDataConverter;
    let decoded = payloads;
    for (const codec of [...payloadCodecs].reverse()) decoded = await codec.decode(decoded);
    return decoded.map((p) => {
      try {
        return payloadConverter.fromPayload(p);
      } catch {
        return '[a payload this reader cannot parse]';
      }
    });
  }

  /** A failure's message: failures' attributes are encoded (and so encrypted) by the service's failure converter. */
  private async failureMessage(failure: Failure | null | undefined): Promise<string> {
    if (!failure) return 'failed';
    if (failure.encodedAttributes) {
      const [attrs] = await this.values([failure.encodedAttributes as Payload]);
      const message = (attrs as { message?: unknown } | undefined)?.message;
      if (typeof message === 'string') return message;
    }
    return failure.message || 'failed';
  }

  async read(workflowId: string): Promise<RecordedHistory | null> {
    const history = await this.fetch(workflowId);
    const events = history?.events ?? [];
    const first = events[0]?.workflowExecutionStartedEventAttributes;
    if (!first) return null;
    const activities = new Map<number, RecordedActivity>();
    const messages: RecordedMessage[] = [];
    let status = 'running';
    for (const e of events) {
      const id = num(e.eventId);
      const time = at(e.eventTime);
      const scheduled = e.activityTaskScheduledEventAttributes;
      if (scheduled) {
        activities.set(id, {
          scheduledEventId: id,
          type: scheduled.activityType?.name ?? '',
          input: await this.values(scheduled.input?.payloads as Payload[] | undefined),
          scheduledAt: time,
          startedAt: null,
          closedAt: null,
          attempt: null,
          outcome: 'pending',
        });
        continue;
      }
      const started = e.activityTaskStartedEventAttributes;
      if (started) {
        const a = activities.get(num(started.scheduledEventId));
        if (a) Object.assign(a, { startedAt: time, attempt: started.attempt ?? null });
        continue;
      }
      const completed = e.activityTaskCompletedEventAttributes;
      if (completed) {
        const a = activities.get(num(completed.scheduledEventId));
        if (a) Object.assign(a, { closedAt: time, outcome: 'completed', result: (await this.values(completed.result?.payloads as Payload[] | undefined))[0] });
        continue;
      }
      const closed = e.activityTaskFailedEventAttributes ?? e.activityTaskTimedOutEventAttributes ?? e.activityTaskCanceledEventAttributes;
      if (closed) {
        const a = activities.get(num(closed.scheduledEventId));
        const outcome = e.activityTaskFailedEventAttributes ? 'failed' : e.activityTaskTimedOutEventAttributes ? 'timed_out' : 'canceled';
        const failure = 'failure' in closed ? await this.failureMessage(closed.failure) : outcome;
        if (a) Object.assign(a, { closedAt: time, outcome, failure });
        continue;
      }
      const update = e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input;
      if (update) {
        messages.push({ name: update.name ?? '', args: await this.values(update.args?.payloads as Payload[] | undefined), at: time });
        continue;
      }
      const signal = e.workflowExecutionSignaledEventAttributes;
      if (signal) {
        messages.push({ name: signal.signalName ?? '', args: await this.values(signal.input?.payloads as Payload[] | undefined), at: time });
        continue;
      }
      if (e.workflowExecutionCompletedEventAttributes) status = 'completed';
      else if (e.workflowExecutionContinuedAsNewEventAttributes) status = 'continued_as_new';
      else if (e.workflowExecutionFailedEventAttributes) status = 'failed';
      else if (e.workflowExecutionCanceledEventAttributes) status = 'canceled';
      else if (e.workflowExecutionTerminatedEventAttributes) status = 'terminated';
      else if (e.workflowExecutionTimedOutEventAttributes) status = 'timed_out';
    }
    return {
      workflowId,
      runId: first.originalExecutionRunId ?? '',
      workflowType: first.workflowType?.name ?? '',
      startedAt: at(events[0].eventTime),
      status,
      activities: [...activities.values()],
      messages,
    };
  }
}

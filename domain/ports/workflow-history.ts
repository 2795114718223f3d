/**
 * A workflow's recorded history as the domain reads it (the console's conversation debugger): the activities it
 * scheduled with their decoded inputs and results and the times of their events, and the updates and signals it took.
 * Implemented over the Temporal client by app/temporal-clients/histories.ts; payloads arrive decoded (decrypted and
 * parsed), failures as their messages.
 */
export interface RecordedActivity {
  /** The ActivityTaskScheduled event's id: the activity's identity within the run. */
  scheduledEventId: number;
  type: string;
  input: unknown[];
  scheduledAt: string;
  /** The last attempt's start (null: never started). */
  startedAt: string | null;
  closedAt: string | null;
  attempt: number | null;
  outcome: 'completed' | 'failed' | 'timed_out' | 'canceled' | 'pending';
  result?: unknown;
  failure?: string;
}

export interface RecordedMessage {
  /** The update's or the signal's name. */
  name: string;
  args: unknown[];
  at: string;
}

export interface RecordedHistory {
  workflowId: string;
  runId: string;
  workflowType: string;
  startedAt: string;
  /** The run's status: running, completed, continued as new, failed… */
  status: string;
  activities: RecordedActivity[];
  /** Updates accepted and signals received, in order. */
  messages: RecordedMessage[];
}

export interface WorkflowHistories {
  /** The latest run of the workflow, or null when there is none. */
  read(workflowId: string): Promise<RecordedHistory | null>;
  /** The latest run's history as `temporal workflow show --output json` writes it (payloads as stored): what `npm run replay` reads. */
  exportJson(workflowId: string): Promise<string | null>;
}

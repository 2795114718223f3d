import type { EntityManager } from '@mikro-orm/postgresql';

export type TaskStatus = 'running' | 'completed' | 'cancelled' | 'failed';

export interface TaskView {
  task_key: string;
  label: string;
  status: TaskStatus;
  blocking: boolean;
  started_at: string;
}

/**
 * The background tasks of conversations as recorded by their actors (a row per child
 * workflow, written when it starts and when it ends): what the widget lists. Whether a
 * blocking task holds up a send is the actor's to say (its update validator), not these
 * rows', which trail the actor by an activity.
 */
export class TaskService {
  constructor(private readonly em: EntityManager) {}

  async open(conversationId: string): Promise<TaskView[]> {
    const rows = await this.em
      .fork()
      .execute<Array<Omit<TaskView, 'started_at'> & { started_at: Date }>>(
        `select task_key, label, status, blocking, started_at from conversation_tasks where conversation_id = ? and status = 'running' order by started_at, task_key`,
        [conversationId],
      );
    return rows.map((r) => ({ ...r, started_at: new Date(r.started_at).toISOString() }));
  }

  /** A task (re)started: running again from now, whatever an earlier run of the same key left. */
  async started(t: { conversationId: string; workspaceId: string; taskKey: string; kind: string; label: string; blocking: boolean; workflowId: string }): Promise<void> {
    await this.em.fork().execute(
      `insert into conversation_tasks (conversation_id, task_key, workspace_id, kind, label, status, blocking, workflow_id)
       values (?, ?, ?, ?, ?, 'running', ?, ?)
       on conflict (conversation_id, task_key) do update set status = 'running', label = excluded.label, error = null, finished_at = null, started_at = clock_timestamp()`,
      [t.conversationId, t.taskKey, t.workspaceId, t.kind, t.label, t.blocking, t.workflowId],
    );
  }

  /** Tasks still running, started before `before`: the reconciliation asks Temporal about each child workflow. */
  async stillRunning(before: Date, limit: number): Promise<Array<{ conversation_id: string; task_key: string; workflow_id: string }>> {
    return this.em
      .fork()
      .execute(`select conversation_id, task_key, workflow_id from conversation_tasks where status = 'running' and started_at < ? order by started_at limit ?`, [before, limit]);
  }

  async finished(t: { conversationId: string; taskKey: string; status: TaskStatus; error: string | null }): Promise<void> {
    await this.em
      .fork()
      .execute(`update conversation_tasks set status = ?, error = ?, finished_at = clock_timestamp() where conversation_id = ? and task_key = ?`, [
        t.status,
        t.error,
        t.conversationId,
        t.taskKey,
      ]);
  }
}

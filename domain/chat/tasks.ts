import type { EntityManager } from '@mikro-orm/postgresql';
import { ConversationTask } from '../../db/entities';

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
    const rows = await this.em.fork().find(ConversationTask, { conversationId, status: 'running' }, { orderBy: { startedAt: 'asc', taskKey: 'asc' } });
    return rows.map((r) => ({ task_key: r.taskKey, label: r.label, status: r.status, blocking: r.blocking, started_at: r.startedAt.toISOString() }));
  }

  /** A task (re)started: running again from now, whatever an earlier run of the same key left. */
  async started(t: { conversationId: string; workspaceId: string; taskKey: string; kind: string; label: string; blocking: boolean; workflowId: string }): Promise<void> {
    await this.em
      .fork()
      .createQueryBuilder(ConversationTask)
      .insert({
        conversationId: t.conversationId,
        taskKey: t.taskKey,
        workspaceId: t.workspaceId,
        kind: t.kind,
        label: t.label,
        status: 'running',
        blocking: t.blocking,
        workflowId: t.workflowId,
        error: null,
        finishedAt: null,
        startedAt: new Date(),
      })
      .onConflict(['conversationId', 'taskKey'])
      .merge(['status', 'label', 'error', 'finishedAt', 'startedAt']);
  }

  /** Tasks still running, started before `before`: the reconciliation asks Temporal about each child workflow. */
  async stillRunning(before: Date, limit: number): Promise<Array<{ conversation_id: string; task_key: string; workflow_id: string }>> {
    const rows = await this.em
      .fork()
      .find(ConversationTask, { status: 'running', startedAt: { $lt: before } }, { fields: ['conversationId', 'taskKey', 'workflowId'], orderBy: { startedAt: 'asc' }, limit });
    return rows.map((r) => ({ conversation_id: r.conversationId, task_key: r.taskKey, workflow_id: r.workflowId }));
  }

  async finished(t: { conversationId: string; taskKey: string; status: TaskStatus; error: string | null }): Promise<void> {
    await this.em.fork().nativeUpdate(ConversationTask, { conversationId: t.conversationId, taskKey: t.taskKey }, { status: t.status, error: t.error, finishedAt: new Date() });
  }
}

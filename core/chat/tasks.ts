import type { EntityManager } from '@mikro-orm/postgresql';

export interface TaskView {
  task_key: string;
  label: string;
  status: 'running' | 'completed' | 'cancelled' | 'failed';
  blocking: boolean;
  started_at: string;
}

/**
 * The background tasks of conversations as recorded by their actors (a row per child
 * workflow, written when it starts and when it ends): what the widget lists, and what
 * makes a send wait (409) while a blocking one runs.
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

  async runningBlocking(conversationId: string): Promise<TaskView | null> {
    return (await this.open(conversationId)).find((t) => t.blocking) ?? null;
  }
}

import { MAX_ELEMENTS } from '../elements';
import { elementDefinition } from './reply-element';
import type { TurnTool } from './types';

/** A knowledge-base file attached under the answer, with a signed link. */
export const attachFile: TurnTool = {
  name: 'attach_file',
  definition: elementDefinition('attachments'),
  accepts: (ctx) => ctx.kinds.includes('attachments'),
  async run(ctx, args) {
    const { deps, input, elements } = ctx;
    // Only a file the agent may show (as POST /file_url decides): an active file it selects, or under its folders.
    const fileId = String(args.file_id ?? '');
    const file = /^file_[0-9a-f]{24}$/.test(fileId) ? await deps.repos.kb.downloadableKbFile(deps.em.fork(), input.workspaceId, fileId, ctx.spec.knowledge_base) : null;
    if (!file) return JSON.stringify({ error: `file_id: '${fileId.slice(0, 40)}' is not a file of your knowledge base you may share` });
    if (elements.attachments.some((a) => a.file_key === `kb/${fileId}`)) return JSON.stringify({ ok: true, note: 'already attached' });
    if (elements.attachments.length >= MAX_ELEMENTS.attachments) return JSON.stringify({ error: `at most ${MAX_ELEMENTS.attachments} attachments per reply` });
    elements.attachments.push({ file_key: `kb/${fileId}`, file_name: file.name, mime_type: file.mime_type, url: deps.uploads.signKbFile(file) });
    return JSON.stringify({ ok: true, note: `${file.name} is attached under your answer` });
  },
};

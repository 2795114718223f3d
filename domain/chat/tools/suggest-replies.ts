import { replyElementTool } from './reply-element';

/** Follow-up replies the visitor can click (the reply's `suggested_actions`). */
export const suggestReplies = replyElementTool('suggest_replies', 'suggested_actions');

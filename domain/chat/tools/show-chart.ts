import { replyElementTool } from './reply-element';

/** A small declarative chart under the answer (bar, line or pie), rendered by the widget. */
export const showChart = replyElementTool('show_chart', 'charts');

import { replyElementTool } from './reply-element';

/** A card under the answer: a title, text, an optional https image and up to three buttons. */
export const showCard = replyElementTool('show_card', 'cards');
